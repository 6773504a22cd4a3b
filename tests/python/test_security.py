"""test_security.py — setup(cluster_secret=...) against a real cluster that has a secret.

A mooncake_master and a mooncake_client started with --cluster_secret_file; stores in this
process set up with the secret (keyword, dict form, environment) put and get exact bytes; without
it, or with a wrong one, setup returns -601 (ILLEGAL_CLIENT) and the objects stay intact.
"""
import os
import subprocess
import tempfile
import unittest

from test_store import BUILD, Cluster, free_port, mcs, wait_port

SECRET = "python-test-cluster-secret"
ILLEGAL_CLIENT = -601
MiB = 1 << 20


class SecretCluster(Cluster):
    """Cluster's master and holder, both given the secret in a file."""

    def __init__(self, secret_file):  # noqa: super().__init__ starts an open cluster
        self.logdir = tempfile.TemporaryDirectory(prefix="mc_pysec_")
        self.procs = []
        self.logs = []
        flag = f"--cluster_secret_file={secret_file}"
        self.rpc_port = free_port()
        self.master_addr = f"127.0.0.1:{self.rpc_port}"
        master = self._spawn("master", [
            os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
            f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
            "--metrics_host=127.0.0.1", flag])
        wait_port(self.rpc_port, master)
        client = self._spawn("client", [
            os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=64MB",
            "--host=127.0.0.1", f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={self.master_addr}", flag], stdout=subprocess.PIPE)
        self.client_segment = self._wait_ready(client)


class TestClusterSecret(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="mc_pysec_secret_")
        cls.secret_file = os.path.join(cls.dir.name, "secret")
        with open(cls.secret_file, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(cls.secret_file, 0o600)
        cls.cluster = SecretCluster(cls.secret_file)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.dir.cleanup()

    def setup_store(self, **kw):
        s = mcs.MooncakeDistributedStore()
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                     self.cluster.master_addr, **kw)
        return s, rc

    def test_keyword_secret_puts_and_gets(self):
        s, rc = self.setup_store(cluster_secret=SECRET)
        self.assertEqual(rc, 0)
        value = os.urandom(256 * 1024)
        self.assertEqual(s.put("pysec/a", value), 0)
        self.assertEqual(s.get("pysec/a"), value)
        s.close()

    def test_dict_and_environment_forms(self):
        s = mcs.MooncakeDistributedStore()
        rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                      "global_segment_size": 0, "master_server_addr": self.cluster.master_addr,
                      "cluster_secret": SECRET})
        self.assertEqual(rc, 0)
        s.close()
        os.environ["MOONCAKE_CLUSTER_SECRET_FILE"] = self.secret_file
        try:
            s, rc = self.setup_store()
            self.assertEqual(rc, 0)
            s.close()
        finally:
            del os.environ["MOONCAKE_CLUSTER_SECRET_FILE"]

    def test_missing_or_wrong_secret_refused(self):
        writer, rc = self.setup_store(cluster_secret=SECRET)
        self.assertEqual(rc, 0)
        value = b"\x5a" * 4096
        self.assertEqual(writer.put("pysec/keep", value), 0)
        for kw in ({}, {"cluster_secret": "wrong"}):
            s, rc = self.setup_store(**kw)
            self.assertEqual(rc, ILLEGAL_CLIENT, kw)
            self.assertEqual(s.get("pysec/keep"), b"")  # not set up: nothing readable
            s.close()
        self.assertEqual(writer.get("pysec/keep"), value)
        writer.close()


if __name__ == "__main__":
    unittest.main()
