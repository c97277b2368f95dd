"""Retention through the Python client and the SGLang backend (docs/protocol.md RETAIN, docs/routing.md): a real
daemon with a small slab evicts demoted pages first and keeps pages of a priority while it holds; PREFIX_HITS says
what each tier holds without touching it; the SGLang backend sends the chain (SGLang's prefix keys, then the pages it
stored) with SGLang's priority where extra_info carries one, its configured priority otherwise."""

import random
import types
import unittest

from hicache import HiCacheClient, Namespace, Status
from hicache.errors import HiCacheProtocolError
from hicache.sglang import HiCacheDaemonStorage

from . import fake_sglang as fake
from .daemon_process import DaemonProcess, missing_daemon

PAGE = 64 * 1024
RNG = random.Random(4242)


class RetentionTest(unittest.TestCase):
    daemon: DaemonProcess

    @classmethod
    def setUpClass(cls):
        why = missing_daemon()
        if why:
            raise unittest.SkipTest(why)
        cls.daemon = DaemonProcess("--server.max-page-bytes", "64KiB", "--server.min-block-bytes", "64KiB",
                                   host_size="4MiB").start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def setUp(self):
        self.client = HiCacheClient("127.0.0.1", self.daemon.port, local=False)
        self.addCleanup(self.client.close)
        self.ns = Namespace(f"retention-{RNG.getrandbits(32)}", "bf16")
        self.body = bytearray(RNG.randbytes(PAGE))

    def put(self, n: int) -> list[bytes]:
        keys = [RNG.randbytes(32) for _ in range(n)]
        self.assertEqual([Status.OK] * n, self.client.put(self.ns, keys, [self.body] * n))
        return keys

    def held(self, keys: list[bytes]) -> list[bool]:
        return [self.client.prefix_hits(self.ns, [k]).slab == 1 for k in keys]

    def test_statuses_name_the_pages_the_slab_holds(self):
        keys = self.put(3)
        missing = RNG.randbytes(32)
        self.assertEqual([Status.OK, Status.OK, Status.MISS, Status.OK],
                         self.client.retain(self.ns, keys[:2] + [missing] + keys[2:], 50, 60.0))
        self.assertEqual([Status.OK, Status.MISS], self.client.demote(self.ns, [keys[0], missing]))
        for bad in (-1, 100):
            with self.assertRaises(ValueError):
                self.client.retain(self.ns, keys, bad, 1.0)
        with self.assertRaises(ValueError):
            self.client.retain(self.ns, keys, 1, -1.0)

    def test_demoted_pages_go_first_and_a_priority_keeps_its_pages(self):
        kept = self.put(2)
        demoted = self.put(2)
        self.client.retain(self.ns, kept, 90, 3600.0)
        self.client.demote(self.ns, demoted)
        self.put(3)  # the slab was not full yet: the next puts fill it
        newest = self.put(1)
        for _ in range(70):  # 4.4 MiB more through a 4 MiB slab
            self.put(1)
        self.assertEqual([True, True], self.held(kept))
        self.assertEqual([False, False], self.held(demoted))
        self.assertEqual([False], self.held(newest), "an unprotected page older than the last 70 went")

    def test_prefix_hits_change_no_recency(self):
        first = self.put(4)
        for _ in range(20):
            self.assertEqual(4, self.client.prefix_hits(self.ns, first).slab)
        for _ in range(64):
            self.put(1)
        self.assertEqual(0, self.client.prefix_hits(self.ns, first).slab, "asking kept nothing in the slab")

    def test_version_2_connections_are_told_what_they_lack(self):
        with HiCacheClient("127.0.0.1", self.daemon.port, local=False, max_version=2) as old:
            with self.assertRaisesRegex(HiCacheProtocolError, "needs protocol version 3"):
                old.prefix_hits(self.ns, [RNG.randbytes(32)])


class _Recording:
    """A client that records RETAINs and otherwise is the real one."""

    def __init__(self, client: HiCacheClient):
        self.client = client
        self.retains: list[tuple] = []

    def retain(self, ns, chain, priority, retention_s, timeout_s=None):
        self.retains.append((list(chain), priority, retention_s))
        return self.client.retain(ns, chain, priority, retention_s, timeout_s=timeout_s)

    def __getattr__(self, name):
        return getattr(self.client, name)


class SglangRetainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = missing_daemon()
        if why:
            raise unittest.SkipTest(why)
        cls.daemon = DaemonProcess().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def backend(self, extra: dict):
        config = {"backend_name": "hicache", "interface_v1": 1, "port": self.daemon.port}
        config.update(extra)
        real = HiCacheClient("127.0.0.1", self.daemon.port, local=False)
        self.addCleanup(real.close)
        recording = _Recording(real)
        backend = HiCacheDaemonStorage(fake.storage_config(extra_config=config), {}, client=recording)  # type: ignore
        self.addCleanup(backend.close)
        pool = fake.FakeMHATokenToKVPoolHost("layer_first")
        backend.register_mem_pool_host(pool)
        for p in range(4):
            pool.fill_page(p * pool.page_size, RNG)
        return backend, recording, pool

    def slots(self, pool, pages):
        return fake.FakeIndices(p * pool.page_size + t for p in pages for t in range(pool.page_size))

    def test_prefix_keys_and_priorities_reach_the_daemon_as_one_chain(self):
        backend, recording, pool = self.backend({"retention_priority": 20, "retention_s": 30})
        prefix = [RNG.randbytes(32).hex() for _ in range(2)]
        keys = [RNG.randbytes(32).hex() for _ in range(2)]
        info = types.SimpleNamespace(prefix_keys=prefix, extra_info={"priority": 70})
        self.assertEqual([True, True], backend.batch_set_v1(keys, self.slots(pool, [0, 1]), info))
        chain, priority, retention = recording.retains[-1]
        self.assertEqual([bytes.fromhex(k) for k in prefix + keys], chain)
        self.assertEqual((70, 30.0), (priority, retention), "SGLang's priority wins over the configured one")
        more = [RNG.randbytes(32).hex() for _ in range(2)]
        backend.batch_set_v1(more, self.slots(pool, [2, 3]), types.SimpleNamespace(prefix_keys=None, extra_info=None))
        self.assertEqual(([bytes.fromhex(k) for k in more], 20, 30.0), recording.retains[-1])

    def test_no_prefix_keys_and_no_priority_send_no_retain(self):
        backend, recording, pool = self.backend({})
        backend.batch_set_v1([RNG.randbytes(32).hex()], self.slots(pool, [0]))
        self.assertEqual([], recording.retains)

    def test_bad_retention_settings_are_refused(self):
        from hicache.sglang.config import BackendSettings
        for bad in ({"retention_priority": 100}, {"retention_s": -1}, {"tls_cert": "c.pem"}, {"tls": "yes"}):
            with self.assertRaises(ValueError, msg=str(bad)):
                BackendSettings.from_extra_config(bad)


if __name__ == "__main__":
    unittest.main()
