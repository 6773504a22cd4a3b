#!/usr/bin/env python3
"""mooncake.mooncake_store_service — upstream's REST front-end over one store client.

    python -m mooncake.mooncake_store_service [--config PATH] [-D key=value ...] [--port 8080]
        [--host 0.0.0.0] [--max-wait-time 60] [--cluster-secret-file PATH]
        [--max-connections 16] [--request-timeout 30]

Sets up one MooncakeDistributedStore from a MooncakeConfig (--config JSON file, else
MooncakeConfig.load_from_env(); -D overrides fields, as strings), retrying setup once a second
for up to --max-wait-time seconds, then serves HTTP on --host:--port until SIGINT or SIGTERM,
and then closes the store and exits 0 (1 when setup or the listener fails). Prints one line
"REST API started on HOST:PORT" once serving (port 0 = any free port).

Routes (upstream's; errors are JSON {"error": "..."}):
  PUT    /api/put           body {"key": str, "value": str}: stores the UTF-8 bytes of value.
                            200 {"status": "success"}; 400 missing key/value or a body that is
                            not a JSON object (upstream: 500 for bad JSON); 500 put failed
  GET    /api/get/{key}     200 the bytes (application/octet-stream); 404 absent; 500
  GET    /api/exist/{key}   200 {"exists": bool}; 500
  DELETE /api/remove/{key}  200 {"status": "success"}; 500 (absent keys included, as upstream)
  DELETE /api/remove_all    200 {"status": "success removed N keys"}; 500
  POST   /api/mount         {"size": int > 0, "protocol"?, "location"?} ->
                            allocate_and_mount_segment: 200 {"status": "success", "segment_ids",
                            "allocated_size"}; 400 bad size; 500
  POST   /api/unmount       {"segment_ids": [str] | str, "grace_period_seconds"?} ->
                            unmount_and_free_segment: 200 {"status": "success"}; 400 no ids; 500
  POST   /api/mount_shm     {"name", "size", "offset"?, "protocol"?, "location"?} ->
                            mount_segment("/dev/shm/<name>", ...): 200 {"status", "segment_ids"};
                            400 missing/invalid name (a path) or size; 500
  POST   /api/unmount_shm   {"segment_ids", "grace_period_seconds"?} -> unmount_segment per id:
                            200; 400; 500 {"error", "failed_segment_ids"}
  POST   /api/unmount_local_disk  {"grace_period_seconds": int 0..3600} ->
                            unmount_local_disk_segment: 200; 400 bad body or grace; 500
  POST   /api/reconfigure   {"mode": "decode", "path", "size", "offset"?, ...}: mounts path, then
                            unmounts the previous decode segments (kept when the mount fails);
                            {"mode": "prefill"}: unmounts them. 200 {"status", "mode"[,
                            "segment_ids"]}; 400 bad mode / missing path or size; 500
  A body of the mount routes that is not a JSON object answers 500 (upstream: its handlers'
  exception path), except /api/unmount_local_disk's (400, as upstream).
Keys in paths are percent-decoded. A body above 100 MB (upstream's limit) is refused with 413
before it is read; a PUT without Content-Length gets 411. Unknown paths 404, other methods 405.

Our additions, per docs/security.md: the service binds exactly --host (default 0.0.0.0 as
upstream; then, without a cluster secret, one warning line says anyone who can reach the port
can read, write and remove objects). With a cluster secret (--cluster-secret-file, else
MOONCAKE_CLUSTER_SECRET_FILE / MOONCAKE_CLUSTER_SECRET) every /api request must carry
"X-Mooncake-Auth: <nonce hex>.<mac hex>", where the nonce comes from GET /api/auth_challenge
({"nonce": "<64 hex>"}, single use, valid 30 s) and the MAC is
HMAC-SHA-256(secret, "mc-auth-v1 rest" | method | path | nonce | SHA-256(body)) (auth_header()
below computes it); anything else gets 401 and nothing happens. The header's format and its
nonce are checked before the body is read (a request without a valid nonce gets 401, its body
unread, and the connection closed), so without the secret nothing but the header is read. Costs
are bounded: at most --max-connections (16) connections are served at once (more are closed;
one peer address holds at most a quarter of 16 or more, so one flooding peer leaves the rest),
so bodies held in memory are at most 16 x 100 MB; a connection idle for 30 s is closed; every
request has an absolute bound of --request-timeout seconds (30), counted from the connection's
accept or the previous response on it, to its response sent, however slowly its bytes trickle
(a watchdog shuts the socket down; one warning a second; a body cut short is never acted on);
outstanding nonces are capped (oldest dropped). A 100 MB body needs 3.4 MB/s under the default.
"""
import argparse
import collections
import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mooncake.mooncake_config import MooncakeConfig

__all__ = ["MooncakeStoreService", "auth_header", "load_cluster_secret", "main", "sync_main"]

MAX_BODY = 100 * 1024 * 1024  # bytes, upstream's client_max_size
IDLE_TIMEOUT_S = 30
REQUEST_TIMEOUT_S = 30  # one request's whole time (the watchdog's bound)
NONCE_TTL_S = 30
MAX_NONCES = 1024
AUTH_HEADER = "X-Mooncake-Auth"
AUTH_LABEL = b"mc-auth-v1 rest"
MAX_LOCAL_DISK_GRACE_S = 3600  # upstream's cap on /api/unmount_local_disk's grace period
MOUNT_ROUTES = ("/api/mount", "/api/unmount", "/api/mount_shm", "/api/unmount_shm",
                "/api/unmount_local_disk", "/api/reconfigure")
_WILDCARDS = ("", "0.0.0.0", "::", "[::]", "*")


def load_cluster_secret(secret_file=None):
    """The cluster secret as bytes, or None: secret_file, else $MOONCAKE_CLUSTER_SECRET_FILE,
    else $MOONCAKE_CLUSTER_SECRET (one trailing newline of a file is ignored, as the C side
    does). OSError when a named file cannot be read; ValueError when it is empty."""
    path = secret_file or os.environ.get("MOONCAKE_CLUSTER_SECRET_FILE")
    if path:
        with open(path, "rb") as f:
            data = f.read(4097)
        if data.endswith(b"\n"):
            data = data[:-1]
        if not data or len(data) > 4096:
            raise ValueError(f"{path}: the cluster secret must be 1..4096 bytes")
        return data
    text = os.environ.get("MOONCAKE_CLUSTER_SECRET")
    return text.encode() if text else None


def _mac(secret, method, path, nonce, body):
    msg = b"|".join((AUTH_LABEL, method.encode(), path.encode(), nonce,
                     hashlib.sha256(body).digest()))
    return hmac.new(secret, msg, hashlib.sha256).digest()


def auth_header(secret, method, path, nonce_hex, body=b""):
    """The X-Mooncake-Auth value proving `secret` for one request (a client's helper)."""
    nonce = bytes.fromhex(nonce_hex)
    return f"{nonce_hex}.{_mac(secret, method, path, nonce, body).hex()}"


class _Nonces:
    """Single-use nonces, valid NONCE_TTL_S, at most MAX_NONCES outstanding. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._issued = collections.OrderedDict()  # nonce bytes -> expiry (monotonic s)

    def issue(self):
        nonce = secrets.token_bytes(32)
        with self._lock:
            self._issued[nonce] = time.monotonic() + NONCE_TTL_S
            while len(self._issued) > MAX_NONCES:
                self._issued.popitem(last=False)
        return nonce

    def take(self, nonce):
        with self._lock:
            expiry = self._issued.pop(nonce, None)
        return expiry is not None and expiry >= time.monotonic()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: a burst of connections (a flood, or many
    # clients at once) then drops new peers' SYNs, and they wait a second per retransmit. Deep
    # enough that a flood the accept thread has not drained yet leaves room for everybody else
    # (the kernel caps it at net.core.somaxconn)
    request_queue_size = 1024

    def __init__(self, address, handler, service, max_connections,
                 request_timeout=REQUEST_TIMEOUT_S):
        host = address[0]
        if ":" in host.strip("[]"):
            self.address_family = socket.AF_INET6
            address = (host.strip("[]"), address[1])
        self.service = service
        self._slots = threading.BoundedSemaphore(max_connections)
        # one peer (an address, whatever its ports) holds at most a quarter of the slots (of 16
        # or more), so a flood of idle connections from it leaves the rest to everybody else
        self._per_peer = max_connections // 4 if max_connections >= 16 else max_connections
        self._peer_lock = threading.Lock()
        self._peer_count = {}  # address -> connections it holds
        self.request_timeout = request_timeout
        self.timed_out = 0  # connections closed by the watchdog
        self._watch_lock = threading.Lock()
        self._watched = {}  # socket -> monotonic start of its current request
        self._watch_stop = threading.Event()
        self._last_timeout_log = 0.0
        self._refused = 0  # connections closed at accept (a peer's cap, or all slots taken)
        self._refused_logged = 0
        self._last_refusal_log = 0.0
        super().__init__(address, handler)
        threading.Thread(target=self._watchdog, name="mooncake-rest-watchdog",
                         daemon=True).start()

    # ---- the per-request bound: each handler reports when its request starts and ends -----

    def request_started(self, sock):
        with self._watch_lock:
            self._watched[sock] = time.monotonic()

    def request_ended(self, sock):
        """Stops watching sock; called before the socket is closed, so the watchdog never
        shuts down a closed socket's reused descriptor."""
        with self._watch_lock:
            self._watched.pop(sock, None)

    def _watchdog(self):
        period = min(max(self.request_timeout / 20, 0.05), 0.5)
        while not self._watch_stop.wait(period):
            now = time.monotonic()
            with self._watch_lock:
                late = [s for s, t in self._watched.items() if now - t >= self.request_timeout]
                for sock in late:
                    del self._watched[sock]
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    self.timed_out += 1
            if late and now - self._last_timeout_log >= 1.0:
                self._last_timeout_log = now
                logging.warning("REST API: closed a connection whose request took over %g s "
                                "(%d closed so far)", self.request_timeout, self.timed_out)

    def server_close(self):
        self._watch_stop.set()
        super().server_close()

    def process_request(self, request, client_address):
        host = client_address[0] if isinstance(client_address, tuple) else client_address
        with self._peer_lock:
            held = self._peer_count.get(host, 0)
            if held < self._per_peer:
                self._peer_count[host] = held + 1
        if held >= self._per_peer:
            self.shutdown_request(request)
            self._log_refusal(f"{host} holds {held} connections, the limit for one peer")
            return
        if not self._slots.acquire(blocking=False):
            self._peer_done(host)
            self.shutdown_request(request)
            self._log_refusal(f"more than the connection limit open (last: {host})")
            return
        super().process_request(request, client_address)

    def _log_refusal(self, why):
        """One warning line a second at most: the accept thread that refuses a flood must stay
        quick for the peers behind it."""
        self._refused += 1
        now = time.monotonic()
        if now - self._last_refusal_log < 1.0:
            return
        logging.warning("REST API: closed %d new connections (%s)",
                        self._refused - self._refused_logged, why)
        self._refused_logged = self._refused
        self._last_refusal_log = now

    def _peer_done(self, host):
        with self._peer_lock:
            held = self._peer_count.get(host, 0) - 1
            if held > 0:
                self._peer_count[host] = held
            else:
                self._peer_count.pop(host, None)

    def process_request_thread(self, request, client_address):
        # socketserver's own version closes the socket last; here the slot is given back
        # first, so a client that saw the close and connects again finds it free (else a
        # burst of short requests could be refused by slots whose sockets were already closed)
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._slots.release()
            self._peer_done(client_address[0] if isinstance(client_address, tuple)
                            else client_address)
            self.shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    server_version = "mooncake-store-service"

    def setup(self):
        super().setup()
        self.server.request_started(self.connection)

    def handle_one_request(self):
        # the bound runs from the end of the previous response (or the accept, via setup())
        try:
            super().handle_one_request()
        finally:
            self.server.request_started(self.connection)

    def finish(self):
        self.server.request_ended(self.connection)
        super().finish()

    def log_message(self, fmt, *args):
        logging.debug("REST %s - %s", self.address_string(), fmt % args)

    # ---- plumbing ---------------------------------------------------------------------------

    def _send(self, status, body, content_type="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status, message):
        self._send(status, {"error": message})

    def _read_body(self):
        """The request body (bytes), or None after answering 411/413/400."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._error(411, "chunked bodies are not accepted; send Content-Length")
            return None
        length = self.headers.get("Content-Length")
        if length is None:
            if self.command in ("PUT", "POST"):
                self.close_connection = True
                self._error(411, "Content-Length required")
                return None
            return b""
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0:
            self.close_connection = True
            self._error(400, "invalid Content-Length")
            return None
        if n > MAX_BODY:
            self.close_connection = True  # the body is not read
            self._error(413, f"request body of {n} bytes is larger than {MAX_BODY}")
            return None
        body = self.rfile.read(n)
        if len(body) != n:  # the peer closed, or the watchdog cut the request: never act on it
            self.close_connection = True
            return None
        return body

    def _unauthorised(self):
        self.close_connection = True  # any body stays unread
        self._error(401, f"missing or invalid {AUTH_HEADER} proof of the cluster secret "
                         f"(GET /api/auth_challenge first; docs/security.md)")

    def _take_proof(self):
        """With a cluster secret: (nonce, mac) from a well-formed header whose nonce was issued,
        is unexpired and is now spent; else None after answering 401. Reads no body."""
        proof = self.headers.get(AUTH_HEADER, "")
        nonce_hex, _, mac_hex = proof.partition(".")
        if len(nonce_hex) != 64 or len(mac_hex) != 64:
            return self._unauthorised()
        try:
            nonce, mac = bytes.fromhex(nonce_hex), bytes.fromhex(mac_hex)
        except ValueError:
            return self._unauthorised()
        if not self.server.service.nonces.take(nonce):
            return self._unauthorised()
        return nonce, mac

    def _body_unread(self):
        """True when the request declares a body (it is then left unread)."""
        return bool(self.headers.get("Transfer-Encoding")
                    or self.headers.get("Content-Length", "0").strip() not in ("", "0"))

    def _dispatch(self):
        raw_path = urllib.parse.urlsplit(self.path).path
        service = self.server.service
        secret = service.secret
        if secret is None:  # as upstream: the body is read first
            body = self._read_body()
            if body is None:
                return None
        keep_alive = not self.close_connection
        if secret is not None and self._body_unread():
            # with a secret, nothing is read before the proof: answers below close the connection
            self.close_connection = True
        if raw_path == "/api/auth_challenge":
            if self.command != "GET":
                return self._error(405, "method not allowed")
            if secret is None:
                return self._error(404, "this service has no cluster secret")
            if self._body_unread():
                return self._error(400, "GET /api/auth_challenge takes no body")
            return self._send(200, {"nonce": service.nonces.issue().hex()})
        route, key = self._route(raw_path)
        if route is None:
            return self._error(404, f"no route {raw_path}")
        allowed = {"put": "PUT", "get": "GET", "exist": "GET", "remove": "DELETE",
                   "remove_all": "DELETE"}.get(route, "POST")
        if self.command != allowed:
            return self._error(405, f"{raw_path}: use {allowed}")
        if secret is not None:
            proof = self._take_proof()
            if proof is None:
                return None
            self.close_connection = not keep_alive
            body = self._read_body()
            if body is None:
                return None
            nonce, mac = proof
            if not hmac.compare_digest(mac, _mac(secret, self.command, raw_path, nonce, body)):
                return self._unauthorised()
        try:
            return getattr(service, "handle_" + route)(self, key, body)
        except Exception as e:  # noqa: BLE001 — the service answers 500 as upstream does
            logging.error("%s %s: %s", self.command, raw_path, e)
            return self._error(500, str(e))

    @staticmethod
    def _route(path):
        if path == "/api/put":
            return "put", None
        if path == "/api/remove_all":
            return "remove_all", None
        if path in MOUNT_ROUTES:
            return path[len("/api/"):], None
        for route in ("get", "exist", "remove"):
            prefix = f"/api/{route}/"
            if path.startswith(prefix) and len(path) > len(prefix):
                return route, urllib.parse.unquote(path[len(prefix):])
        return None, None

    def do_GET(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()


class MooncakeStoreService:
    """One store client and its REST API (upstream's class, synchronous here).

    MooncakeStoreService(config_path=None, cli_config=None): the configuration from the file,
    else load_from_env(); cli_config {field: value} overrides fields that exist.
    """

    def __init__(self, config_path=None, cli_config=None, cluster_secret_file=None):
        self.store = None
        self.httpd = None
        self.config = (MooncakeConfig.from_file(config_path) if config_path
                       else MooncakeConfig.load_from_env())
        for key, value in (cli_config or {}).items():
            if hasattr(self.config, key):
                setattr(self.config, key, value)
            else:
                logging.warning("Ignoring unknown config field %s", key)
        self.secret = load_cluster_secret(cluster_secret_file)
        if cluster_secret_file:
            # The store client of this service proves the same secret to the master and its
            # peers: the C library reads this variable when setup() names no secret.
            os.environ["MOONCAKE_CLUSTER_SECRET_FILE"] = os.path.abspath(cluster_secret_file)
        self.nonces = _Nonces()
        self._lock = threading.Lock()
        # /api/reconfigure's state (upstream's): the decode segments mounted from a path
        self._state_lock = threading.Lock()
        self.current_mode = "prefill"
        self.mounted_segment_ids = []
        self.last_mount_info = {}

    def setup_dict(self):
        """The dict given to setup(), as upstream builds it."""
        c = self.config
        return {"local_hostname": c.local_hostname, "metadata_server": c.metadata_server,
                "global_segment_size": c.global_segment_size,
                "local_buffer_size": c.local_buffer_size, "protocol": c.protocol,
                "rdma_devices": c.device_name or "", "master_server_addr": c.master_server_address,
                "enable_ssd_offload": c.enable_ssd_offload, "ssd_offload_path": c.ssd_offload_path,
                "tenant_id": c.tenant_id,
                "enable_client_http_server": c.enable_client_http_server,
                "client_http_port": c.client_http_port}

    def start_store_service(self, max_wait_time=60.0, stop_event=None):
        """setup() once a second until it answers 0 or max_wait_time seconds passed (or
        stop_event is set). True when the store is up."""
        from mooncake.store import MooncakeDistributedStore

        deadline = time.monotonic() + max_wait_time
        attempt = 0
        while True:
            attempt += 1
            store = MooncakeDistributedStore()
            try:
                ret = store.setup(self.setup_dict())
            except (TypeError, ValueError) as e:
                ret = str(e)
            if ret == 0:
                self.store = store
                logging.info("Store service started on %s", self.config.local_hostname)
                return True
            store.close()
            remaining = deadline - time.monotonic()
            logging.warning("Store setup failed (attempt %d): %s; %.1f s left", attempt, ret,
                            max(remaining, 0.0))
            if remaining <= 0:
                return False
            if stop_event is not None and stop_event.wait(min(1.0, remaining)):
                return False
            if stop_event is None:
                time.sleep(min(1.0, remaining))

    def start_http_service(self, port=8080, host="0.0.0.0", max_connections=16,
                           request_timeout=REQUEST_TIMEOUT_S):
        """Listens on host:port (OSError when it cannot) and serves on a thread; returns the
        port bound. request_timeout: seconds one request may take in all (our addition)."""
        self.httpd = _Server((host, port), _Handler, self, max_connections, request_timeout)
        if host.strip() in _WILDCARDS and self.secret is None:
            logging.warning("the REST API listens on all interfaces (port %d) with no cluster "
                            "secret: any host that can reach it can read, write and remove "
                            "objects. Set MOONCAKE_CLUSTER_SECRET_FILE (or "
                            "--cluster-secret-file), or bind a private address with --host "
                            "(docs/security.md)", self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, name="mooncake-rest",
                         daemon=True).start()
        return self.httpd.server_address[1]

    def stop(self):
        """Stops serving, then closes the store. Idempotent."""
        with self._lock:
            httpd, self.httpd = self.httpd, None
            store, self.store = self.store, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if store is not None:
            ret = store.close()
            logging.info("Mooncake store closed (%s)", ret)

    # ---- routes (called on the connection's thread) ------------------------------------------

    def handle_put(self, h, key, body):
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            return h._error(400, f"body is not JSON: {e}")
        if not isinstance(data, dict):
            return h._error(400, "body must be a JSON object {\"key\", \"value\"}")
        key, value = data.get("key"), data.get("value")
        if not key or value is None:
            return h._error(400, "Missing key or value")
        if not isinstance(key, str) or not isinstance(value, str):
            return h._error(400, "key and value must be strings")
        ret = self.store.put(key, value.encode())
        if ret != 0:
            return h._error(500, f"PUT operation failed ({ret})")
        return h._send(200, {"status": "success"})

    def handle_get(self, h, key, body):
        exists = self.store.is_exist(key)
        if exists == 0:
            return h._error(404, "Key not found")
        if exists < 0:
            return h._error(500, f"Exist check failed ({exists})")
        value = self.store.get(key)
        if value == b"":
            exists = self.store.is_exist(key)
            if exists == 0:
                return h._error(404, "Key not found")
            if exists < 0:
                return h._error(500, f"Exist check failed ({exists})")
            size = self.store.get_size(key)
            if size != 0:  # it exists with bytes, yet the read failed
                return h._error(500, f"GET operation failed ({size})")
        return h._send(200, value, "application/octet-stream")

    def handle_exist(self, h, key, body):
        exists = self.store.is_exist(key)
        if exists < 0:
            return h._error(500, f"Exist check failed ({exists})")
        return h._send(200, {"exists": exists > 0})

    def handle_remove(self, h, key, body):
        ret = self.store.remove(key)
        if ret != 0:
            return h._error(500, f"Remove operation failed ({ret})")
        return h._send(200, {"status": "success"})

    def handle_remove_all(self, h, key, body):
        ret = self.store.remove_all()
        if ret < 0:
            return h._error(500, f"RemoveAll operation failed ({ret})")
        return h._send(200, {"status": f"success removed {ret} keys"})

    # ---- segment routes (upstream's handle_mount & co.; state under _state_lock) --------

    @staticmethod
    def _json_object(body):
        """The body as a JSON object; ValueError otherwise (the route answers 500, as upstream's
        handlers do for a body request.json() refuses)."""
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("request body must be a JSON object")
        return data

    def handle_mount(self, h, key, body):
        data = self._json_object(body)
        size = data.get("size")
        protocol = data.get("protocol", self.config.protocol)
        location = data.get("location", "")
        if type(size) is not int or size <= 0:
            return h._error(400, "Invalid size, must be a positive integer")
        result = self.store.allocate_and_mount_segment(size, protocol, location)
        if result["ret"] != 0:
            return h._error(500, f"Allocate and mount failed, ret={result['ret']}")
        return h._send(200, {"status": "success", "segment_ids": list(result["segment_ids"]),
                             "allocated_size": result["allocated_size"]})

    @staticmethod
    def _segment_ids(data):
        ids = data.get("segment_ids", [])
        return [ids] if isinstance(ids, str) else ids

    def handle_unmount(self, h, key, body):
        data = self._json_object(body)
        ids = self._segment_ids(data)
        if not ids:
            return h._error(400, "Missing segment_ids")
        ret = self.store.unmount_and_free_segment(ids, data.get("grace_period_seconds", 0))
        if ret != 0:
            return h._error(500, f"Unmount and free failed, ret={ret}")
        return h._send(200, {"status": "success"})

    @staticmethod
    def _shm_path(name):
        """/dev/shm/<name> for a plain name (one leading '/' allowed), else None (upstream)."""
        if not isinstance(name, str) or not name:
            return None
        name = name[1:] if name.startswith("/") else name
        if not name or "/" in name or name in (".", ".."):
            return None
        return f"/dev/shm/{name}"

    def handle_mount_shm(self, h, key, body):
        data = self._json_object(body)
        path = self._shm_path(data.get("name"))
        size = data.get("size")
        if not path or size is None:
            return h._error(400, "Missing or invalid name or size")
        result = self.store.mount_segment(path, size, data.get("offset", 0),
                                          data.get("protocol", self.config.protocol),
                                          data.get("location", ""))
        if result["ret"] != 0:
            return h._error(500, f"Mount failed, ret={result['ret']}")
        return h._send(200, {"status": "success", "segment_ids": list(result["segment_ids"])})

    def handle_unmount_shm(self, h, key, body):
        data = self._json_object(body)
        ids = self._segment_ids(data)
        if not ids:
            return h._error(400, "Missing segment_ids")
        grace = data.get("grace_period_seconds", 0)
        failed = []
        with self._state_lock:
            for sid in ids:
                if self.store.unmount_segment([sid], grace) != 0:
                    failed.append(sid)
                elif sid in self.mounted_segment_ids:
                    self.mounted_segment_ids.remove(sid)
            if not self.mounted_segment_ids:
                self.current_mode = "prefill"
        if failed:
            return h._send(500, {"error": "Unmount failed for one or more segments",
                                 "failed_segment_ids": failed})
        return h._send(200, {"status": "success"})

    def handle_unmount_local_disk(self, h, key, body):
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return h._error(400, "Malformed JSON body")
        if not isinstance(data, dict):
            return h._error(400, "Request body must be a JSON object")
        grace = data.get("grace_period_seconds", 0)
        if type(grace) is not int or not 0 <= grace <= MAX_LOCAL_DISK_GRACE_S:
            return h._error(400, "Invalid grace_period_seconds, must be a non-negative integer "
                                 f"no greater than {MAX_LOCAL_DISK_GRACE_S}")
        ret = self.store.unmount_local_disk_segment(grace)
        if ret != 0:
            return h._error(500, f"Unmount local disk failed, ret={ret}")
        return h._send(200, {"status": "success"})

    def handle_reconfigure(self, h, key, body):
        """decode: mount `path` (make-before-break: the previous decode segments are unmounted
        only once the new one is mounted); prefill: unmount every decode segment."""
        data = self._json_object(body)
        mode = str(data.get("mode", "")).lower()
        if mode == "decode":
            path, size = data.get("path"), data.get("size")
            if not path or size is None:
                return h._error(400, "Missing path or size for decode mode")
            offset = data.get("offset", 0)
            protocol = data.get("protocol", self.config.protocol)
            location = data.get("location", "")
            with self._state_lock:
                previous = list(self.mounted_segment_ids)
                result = self.store.mount_segment(path, size, offset, protocol, location)
                if result["ret"] != 0:
                    if previous:
                        return h._send(500, {"error": f"Mount failed, ret={result['ret']}; "
                                                      "keeping previous decode segments",
                                             "mode": self.current_mode})
                    self.current_mode = "prefill"
                    self.mounted_segment_ids.clear()
                    self.last_mount_info.clear()
                    return h._send(500, {"error": f"Mount failed, ret={result['ret']}; "
                                                  "rolled back to prefill",
                                         "mode": self.current_mode})
                failed = [sid for sid in previous if self.store.unmount_segment([sid]) != 0]
                if failed:
                    logging.warning("Reconfigure decode: new mount succeeded but unmount of "
                                    "previous segments %s failed; keeping them tracked", failed)
                self.mounted_segment_ids = list(result["segment_ids"]) + failed
                self.current_mode = "decode"
                self.last_mount_info = {"path": path, "offset": offset, "size": size,
                                        "protocol": protocol, "location": location}
                ids = list(self.mounted_segment_ids)
            return h._send(200, {"status": "success", "mode": "decode", "segment_ids": ids})
        if mode == "prefill":
            with self._state_lock:
                if self.mounted_segment_ids:
                    ret = self.store.unmount_segment(self.mounted_segment_ids)
                    if ret != 0:
                        return h._error(500, f"Unmount failed, ret={ret}")
                    self.mounted_segment_ids.clear()
                self.current_mode = "prefill"
                self.last_mount_info.clear()
            return h._send(200, {"status": "success", "mode": "prefill"})
        return h._error(400, "Invalid mode. Use 'decode' or 'prefill'")


def parse_arguments(argv=None):
    p = argparse.ArgumentParser(description="Mooncake Store Service with REST API")
    p.add_argument("--config", type=str, help="Path to Mooncake config file")
    p.add_argument("-D", "--define", action="append", default=[],
                   help="Override configuration with key=value pairs (e.g. "
                        "-Dlocal_hostname=example.com)")
    p.add_argument("--port", type=int, default=8080, help="HTTP API port (default: 8080)")
    p.add_argument("--host", type=str, default="0.0.0.0",
                   help="address the HTTP API binds (default 0.0.0.0, as upstream)")
    p.add_argument("--max-wait-time", type=float, default=60,
                   help="Maximum total wait time in seconds (default: 60)")
    p.add_argument("--max-connections", type=int, default=16,
                   help="connections served at once (more are closed)")
    p.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT_S,
                   help="seconds one request may take, from its first byte to its response "
                        "(default 30; slower ones are cut)")
    p.add_argument("--cluster-secret-file", type=str, default=None,
                   help="cluster secret every request must prove (docs/security.md)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    cli_config = {}
    for item in args.define:
        if "=" in item:
            key, value = item.split("=", 1)
            cli_config[key] = value
        else:
            logging.warning("Ignoring invalid CLI config: %s", item)
    if args.max_connections < 1:
        logging.error("--max-connections must be at least 1")
        return 1
    if not args.request_timeout > 0:
        logging.error("--request-timeout must be above 0")
        return 1
    try:
        service = MooncakeStoreService(args.config, cli_config, args.cluster_secret_file)
    except (OSError, ValueError) as e:
        logging.error("Configuration load failed: %s", e)
        return 1
    stop = threading.Event()

    def on_signal(signum, frame):
        logging.info("Received signal %s, shutting down", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not service.start_store_service(args.max_wait_time, stop):
            if stop.is_set():
                return 0
            logging.error("Failed to start store service")
            return 1
        try:
            port = service.start_http_service(args.port, args.host, args.max_connections,
                                              args.request_timeout)
        except OSError as e:
            logging.error("Failed to start HTTP service on %s:%d: %s", args.host, args.port, e)
            return 1
        print(f"REST API started on {args.host}:{port}", flush=True)
        while not stop.wait(1.0):
            pass
        return 0
    finally:
        service.stop()


def sync_main():
    """Entry point of upstream's ``mc_store_rest_server`` console script."""
    return main()


if __name__ == "__main__":
    sys.exit(main())
