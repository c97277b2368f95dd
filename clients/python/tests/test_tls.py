"""TLS from Python (docs/security.md): the client round-trips pages with a daemon that serves TLS, trusting its
authority; a client trusting another authority, and a plaintext client, are refused; a client certificate whose
common name is a tenant's reaches that tenant's pages and no other's; the SGLang backend speaks TLS from its
extra_config. Certificates are made with openssl (skipped where it is missing)."""

import os
import random
import shutil
import subprocess
import tempfile
import unittest

from hicache import HiCacheClient, Namespace, Status, tls_context
from hicache.errors import HiCacheConnectionError, HiCacheError

from .daemon_process import DaemonProcess, missing_daemon

RNG = random.Random(7)
ALICE = "alice-token-0123456789"


def openssl(folder: str, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def authority(folder: str, name: str) -> None:
    openssl(folder, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem")


def signed(folder: str, ca: str, name: str, cn: str, extension: str) -> None:
    with open(os.path.join(folder, f"{name}.ext"), "w") as f:
        f.write(extension + "\n")
    openssl(folder, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={cn}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
    openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


class TlsTest(unittest.TestCase):
    folder: str
    daemon: DaemonProcess

    @classmethod
    def setUpClass(cls):
        why = missing_daemon()
        if why:
            raise unittest.SkipTest(why)
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("openssl is not installed: it makes the test's certificates")
        cls.folder = tempfile.mkdtemp(prefix="hicache-tls-test-")
        try:
            authority(cls.folder, "ca")
            signed(cls.folder, "ca", "server", "daemon", "subjectAltName=IP:127.0.0.1,DNS:localhost")
            signed(cls.folder, "ca", "alice", "alice", "extendedKeyUsage=clientAuth")
            authority(cls.folder, "other")
            with open(os.path.join(cls.folder, "tenants"), "w") as f:
                f.write(f"alice {ALICE}\n")
            cls.daemon = DaemonProcess("--server.tls-cert", cls.path("server.pem"), "--server.tls-key",
                                       cls.path("server.key"), "--server.tls-client-ca", cls.path("ca.pem"),
                                       "--server.tenants-file", cls.path("tenants")).start()
        except BaseException:
            shutil.rmtree(cls.folder, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.folder, ignore_errors=True)

    @classmethod
    def path(cls, name: str) -> str:
        return os.path.join(cls.folder, name)

    def alice(self, token: str = "") -> HiCacheClient:
        context = tls_context(self.path("ca.pem"), self.path("alice.pem"), self.path("alice.key"))
        client = HiCacheClient("127.0.0.1", self.daemon.port, token=token, tls=context, timeout_s=5)
        self.addCleanup(client.close)
        return client

    def test_pages_round_trip_over_tls_as_the_certificates_tenant(self):
        client = self.alice()
        self.assertIsNone(client.local_slab_path, "no same-host path over TLS")
        ns = Namespace("tls-model", "bf16")
        keys = [RNG.randbytes(32) for _ in range(3)]
        pages = [bytearray(RNG.randbytes(100_000)) for _ in keys]
        self.assertEqual([Status.OK] * 3, client.put(ns, keys, pages))
        back = [bytearray(100_000) for _ in keys]
        self.assertEqual([Status.OK] * 3, client.get(ns, keys, back))
        self.assertEqual(pages, back)
        self.assertEqual(3, client.prefix_hits(ns, keys).slab)
        self.assertEqual(3, self.alice(ALICE).leading_hits(ns, keys), "alice's token and certificate are one tenant")
        with self.assertRaises(HiCacheError):  # a namespace of another tenant
            client.leading_hits(Namespace("tls-model", "bf16", tenant="bob"), keys)

    def test_a_client_of_another_authority_or_without_tls_is_refused(self):
        other = HiCacheClient("127.0.0.1", self.daemon.port, tls=tls_context(self.path("other.pem")), timeout_s=5)
        self.addCleanup(other.close)
        with self.assertRaisesRegex(HiCacheConnectionError, "TLS handshake"):
            other.health()
        no_certificate = HiCacheClient("127.0.0.1", self.daemon.port, tls=tls_context(self.path("ca.pem")),
                                       timeout_s=5)
        self.addCleanup(no_certificate.close)
        with self.assertRaises(HiCacheError):
            no_certificate.health()
        plaintext = HiCacheClient("127.0.0.1", self.daemon.port, timeout_s=3)
        self.addCleanup(plaintext.close)
        with self.assertRaises(HiCacheError):
            plaintext.health()

    def test_the_sglang_backend_reads_its_tls_settings(self):
        from hicache.sglang.config import BackendSettings
        s = BackendSettings.from_extra_config({"tls_ca": "ca.pem", "tls_cert": "c.pem", "tls_key": "c.key"})
        self.assertEqual((True, "ca.pem", "c.pem", "c.key"), (s.tls, s.tls_ca, s.tls_cert, s.tls_key))
        self.assertFalse(BackendSettings.from_extra_config({}).tls)


if __name__ == "__main__":
    unittest.main()
