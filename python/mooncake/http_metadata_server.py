#!/usr/bin/env python3
"""mooncake.http_metadata_server — upstream's HTTP metadata server entry point, served by C.

Upstream Mooncake ships this module (console script ``mooncake_http_metadata_server``); SGLang's
README starts a cluster with ``python -m mooncake.http_metadata_server``. Same interface here:

    python -m mooncake.http_metadata_server [--port 8080] [--host 0.0.0.0] [--log-level INFO]
                                            [--cluster-secret-file PATH]   (ours, optional)

    server = KVBootstrapServer(port, host="0.0.0.0")
    server.run()      # serves in the background; returns the thread that watches it
    server.poll()     # KVPoll.Success while serving, KVPoll.Failed before run() / after close()
    server.close()    # stops serving

Behaviour: the requests are answered by mooncake-c's C metadata server
(include/mooncake/http_metadata.h, the same one ``mooncake_master --enable_http_metadata_server``
embeds), i.e. upstream's C++ server, not upstream's Python one. Where the two upstream servers
differ we follow the C++ one (documented in python/README.md):
  * re-PUT of an existing ``rpc_meta`` key with the identical body: 200 (upstream Python: 400);
    with a different body: 400 in both;
  * ``GET /health`` answers 200 "OK" (upstream Python: no such route); other paths: 404;
    other methods on /metadata: 405 in both;
  * limits on value size, key count and total bytes (413 / 507), and ``GET /metrics``: ours.
The cluster secret (docs/security.md) applies: with MOONCAKE_CLUSTER_SECRET_FILE /
MOONCAKE_CLUSTER_SECRET (or --cluster-secret-file), PUT and DELETE must carry a proof; without
one, writes are open as upstream and a wildcard --host logs one warning line.

Errors: run() raises OSError when the port cannot be bound (upstream only logs it in its thread
and poll() reports Failed); ValueError for a bad host or unreadable secret file.
"""
import argparse
import enum
import logging
import signal
import sys
import threading

from mooncake import _metadata_server

__all__ = ["KVBootstrapServer", "KVPoll", "main", "parse_args"]


class KVPoll(enum.Enum):
    """Status of the server (upstream's values)."""

    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class KVBootstrapServer:
    """The HTTP metadata server on host:port (port 0: any free port; see .port after run()).

    Thread-safe: run(), close() and poll() may be called from any thread.
    """

    def __init__(self, port: int, host: str = "0.0.0.0", cluster_secret_file=None):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, got {port!r}")
        self.port = port
        self.host = host
        self.thread = None
        self._secret_file = cluster_secret_file
        self._server = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def run(self):
        """Starts serving (the C server has its own thread) and returns a daemon thread that
        lives while it serves, as upstream's run() returns its server thread."""
        with self._lock:
            if self._server is not None:
                return self.thread
            self._server = _metadata_server.MetadataServer(
                self.host, self.port, cluster_secret_file=self._secret_file)
            self.port = self._server.port
            self._stopped.clear()
            self.thread = threading.Thread(target=self._stopped.wait, daemon=True,
                                           name="mooncake-metadata-server")
            self.thread.start()
        logging.info("HTTP Metadata Server started on %s:%d", self.host, self.port)
        return self.thread

    def close(self):
        """Stops serving and drops every key. Idempotent."""
        with self._lock:
            server, self._server = self._server, None
            if server is not None:
                server.stop()
            self._stopped.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2)

    def poll(self) -> KVPoll:
        """KVPoll.Success while serving, else KVPoll.Failed (upstream's two answers)."""
        server = self._server
        if self.thread is None or not self.thread.is_alive() or server is None:
            return KVPoll.Failed
        return KVPoll.Success if server.running else KVPoll.Failed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="HTTP Metadata Server for Mooncake (mooncake-c: the C server)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--port", type=int, default=8080, help="Port to listen on")
    parser.add_argument("--host", type=str, default="0.0.0.0", help="Host to bind to")
    parser.add_argument("--log-level", type=str, default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                        help="Logging level (of this module's lines)")
    parser.add_argument("--cluster-secret-file", type=str, default=None,
                        help="file holding the cluster secret writes must prove (mooncake-c; "
                             "default $MOONCAKE_CLUSTER_SECRET_FILE, docs/security.md)")
    return parser.parse_args(argv)


def main(argv=None):
    """Entry point of ``python -m mooncake.http_metadata_server``: serves until SIGINT/SIGTERM,
    then exits 0; exits 1 when the server cannot start."""
    args = parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    server = KVBootstrapServer(port=args.port, host=args.host,
                               cluster_secret_file=args.cluster_secret_file)
    stop = threading.Event()

    def on_signal(signum, frame):
        logging.info("Shutting down...")
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        server.run()
    except (OSError, ValueError) as e:
        logging.error("%s", e)
        return 1
    # one line with the port bound, so --port 0 is usable by scripts
    print(f"HTTP metadata server listening on {args.host}:{server.port}", flush=True)
    while not stop.wait(1.0):
        pass
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
