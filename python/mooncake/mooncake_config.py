"""mooncake.mooncake_config — upstream's MooncakeConfig: the settings of one store client.

Read from a JSON file (``MooncakeConfig.from_file``) or the environment
(``MooncakeConfig.load_from_env``), and used by mooncake.mooncake_store_service and by
integrations (SGLang, vLLM) to call ``MooncakeDistributedStore.setup``. Matches upstream's
``mooncake-wheel/mooncake/mooncake_config.py``: same fields in the same order, defaults, size
and boolean syntax, environment variables and errors (ValueError).

JSON file: local_hostname, metadata_server and master_server_address are required; sizes
(global_segment_size default 3355443200, local_buffer_size default 1073741824 bytes) are ints or
strings "<number><suffix>" with suffix kb mb gb tb k m g t b (case-insensitive, powers of 1024,
fractions allowed, no suffix = bytes); booleans are true/1/yes/on/enable or
false/0/no/off/disable (case-insensitive; anything else ValueError).

Environment (load_from_env, when MOONCAKE_CONFIG_PATH is unset; MOONCAKE_MASTER required):
MOONCAKE_LOCAL_HOSTNAME (localhost), MOONCAKE_TE_META_DATA_SERVER (P2PHANDSHAKE),
MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, MOONCAKE_PROTOCOL (tcp),
MOONCAKE_DEVICE (""), MOONCAKE_MASTER, MOONCAKE_OFFLOAD_ENABLED (false),
MOONCAKE_OFFLOAD_FILE_STORAGE_PATH (""), MOONCAKE_TENANT_ID (default),
MOONCAKE_ENABLE_CLIENT_HTTP_SERVER (false), MOONCAKE_CLIENT_HTTP_PORT (9300).
"""
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional

__all__ = ["MooncakeConfig", "DEFAULT_GLOBAL_SEGMENT_SIZE", "DEFAULT_LOCAL_BUFFER_SIZE"]

logger = logging.getLogger(__name__)

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # bytes (3.125 GiB), upstream's default
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # bytes (1 GiB)

# Longest suffixes first, so "mb" is not read as "b".
_UNITS = (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
          ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1))
_TRUE = frozenset(("true", "1", "yes", "on", "enable"))
_FALSE = frozenset(("false", "0", "no", "off", "disable"))
# Protocol names upstream knows (a hint: others only warn, as upstream).
_KNOWN_PROTOCOLS = frozenset((
    "tcp", "rdma", "efa", "nvmeof", "nvlink", "musa", "nvlink_intra", "hip", "barex", "cxl",
    "ascend", "ub", "ubshmem", "maca", "sunrise_link", "rpc_only"))
_REQUIRED = ("local_hostname", "metadata_server", "master_server_address")


def _parse_size(value) -> int:
    """Bytes from an int or a "<number>[suffix]" string (see the module docstring)."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return int(value)
    text = value.strip().lower()
    if not text:
        raise ValueError("Invalid segment size: empty string")
    for suffix, unit in _UNITS:
        if text.endswith(suffix):
            number = text[:-len(suffix)].strip()
            if not number:
                raise ValueError(f"Invalid segment size: missing number before '{suffix}'")
            return int(float(number) * unit)
    return int(float(text))


def _parse_bool(value) -> bool:
    """A bool from a bool, a number, None (False) or one of the words above."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if value is None:
        return False
    text = str(value).strip().lower()
    if not text:
        return False
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"Invalid boolean value: {value!r}")


@dataclass
class MooncakeConfig:
    """One store client's settings (upstream's fields, in upstream's order).

    local_hostname: this client's address ("host" or "host:port").
    metadata_server: "P2PHANDSHAKE" or "http://host:port/metadata".
    global_segment_size, local_buffer_size: bytes (>= 0).
    protocol: "tcp" or "rdma" (stripped and lower-cased; unknown names only warn).
    device_name: rdma device list ("" = automatic).
    master_server_address: "host:port" of mooncake_master, or "etcd://h:p;h:p" to follow the
        master elected there (setup's master_server_addr; env MC_STORE_CLUSTER_ID names the cluster).
    enable_ssd_offload, ssd_offload_path, tenant_id, enable_client_http_server,
    client_http_port: passed to setup() as upstream.

    __post_init__ raises ValueError for an empty or non-str protocol, a negative size, or an
    empty local_hostname / metadata_server / master_server_address.
    """

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = 9300

    def __post_init__(self):
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(f"Invalid protocol: {self.protocol!r}. Protocol must be a "
                             f"non-empty string, e.g. 'tcp' or 'rdma'.")
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in _KNOWN_PROTOCOLS:
            logger.warning("Unrecognised protocol %r; passing it to the store unchanged. "
                           "Known protocols: %s.", self.protocol,
                           ", ".join(sorted(_KNOWN_PROTOCOLS)))
        for name in ("global_segment_size", "local_buffer_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"Invalid {name}: {getattr(self, name)}. Size must be "
                                 f"non-negative.")
        for name in _REQUIRED:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Config field {name!r} must be a non-empty string, "
                                 f"got {value!r}.")

    @staticmethod
    def from_file(file_path: str) -> "MooncakeConfig":
        """The configuration in JSON file `file_path`. OSError when unreadable,
        json.JSONDecodeError (a ValueError) when not JSON, ValueError for a missing required
        field or a bad value."""
        with open(file_path) as f:
            config = json.load(f)
        if not isinstance(config, dict):
            raise ValueError(f"{file_path}: the configuration must be a JSON object")
        for name in _REQUIRED:
            if name not in config:
                raise ValueError(f"Missing required config field: {name}")
        ssd_path = config.get("ssd_offload_path")
        tenant = config.get("tenant_id")
        return MooncakeConfig(
            local_hostname=config.get("local_hostname"),
            metadata_server=config.get("metadata_server"),
            global_segment_size=_parse_size(
                config.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_size(
                config.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=config.get("protocol", "tcp"),
            device_name=config.get("device_name", ""),
            master_server_address=config.get("master_server_address"),
            enable_ssd_offload=_parse_bool(config.get("enable_ssd_offload", False)),
            ssd_offload_path="" if ssd_path is None else str(ssd_path),
            tenant_id="default" if tenant is None else str(tenant),
            enable_client_http_server=_parse_bool(
                config.get("enable_client_http_server", False)),
            client_http_port=int(config.get("client_http_port", 9300)),
        )

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """from_file($MOONCAKE_CONFIG_PATH) when set, else the MOONCAKE_* variables of the
        module docstring. ValueError when neither MOONCAKE_CONFIG_PATH nor MOONCAKE_MASTER is
        set, or for a bad value."""
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        if not os.getenv("MOONCAKE_MASTER"):
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor "
                             "'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_size(
                env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_size(
                env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=env("MOONCAKE_MASTER"),
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=_parse_bool(
                env("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=int(env("MOONCAKE_CLIENT_HTTP_PORT", 9300)),
        )
