"""How the SGLang backend meets SGLang's own code, without a daemon: what ``get_stats`` returns to SGLang's metrics
collector, how ``interface_v1`` is read, ``"<hash>.draft"`` keys, and host pools whose K and V head dims differ.

Each test runs the backend against the piece of ``fake_sglang`` that mirrors the SGLang function involved (named
there). The daemon is not needed: the backend is pointed at a port where nothing listens, which it tolerates.
Standard library only::

    python3 -m unittest discover -s clients/python/tests -t clients/python -p 'test_sglang_compat.py'
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # clients/python

from hicache.sglang import HiCacheDaemonStorage, _compat, config  # noqa: E402
from hicache.sglang.pool import HostPool  # noqa: E402

try:
    from . import fake_sglang as fake
except ImportError:  # run as a script, or with tests/ on the path
    import fake_sglang as fake  # type: ignore[no-redef]

LOGGER = "hicache.sglang.storage"
KEY = "ab" * 32


def setUpModule():
    logging.getLogger("hicache.sglang").setLevel(logging.CRITICAL)  # no daemon on purpose: its warnings are noise
    logging.getLogger("hicache.client").setLevel(logging.CRITICAL)  # and the client's warning about them


def tearDownModule():
    logging.getLogger("hicache.sglang").setLevel(logging.NOTSET)
    logging.getLogger("hicache.client").setLevel(logging.NOTSET)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NoDaemonTestCase(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        self.backends = []

    def tearDown(self):
        for backend in self.backends:
            backend.close()

    def backend(self, pool=None, **extra) -> HiCacheDaemonStorage:
        extra_config = {"backend_name": "hicache", "module_path": "hicache.sglang",
                        "class_name": "HiCacheDaemonStorage", "interface_v1": 1, "port": self.port, "timeout_s": 1}
        extra_config.update(extra)
        backend = HiCacheDaemonStorage(fake.storage_config(extra_config=extra_config), {})
        self.backends.append(backend)
        if pool is not None:
            backend.register_mem_pool_host(pool)
        return backend

    def messages(self, logs, level=logging.DEBUG) -> list:
        return [record.getMessage() for record in logs.records if record.levelno >= level]


class StorageMetricsTest(NoDaemonTestCase):
    """``get_stats`` feeds SGLang's ``StorageMetricsCollector.log_storage_metrics``, which asserts SGLang's own
    ``StorageMetrics`` class (``fake.installed_metrics_modules``)."""

    def setUp(self):
        super().setUp()
        _compat.storage_metrics_class.cache_clear()
        self.addCleanup(_compat.storage_metrics_class.cache_clear)

    def check_collector_accepts(self, module):
        stats = self.backend().get_stats()
        collector = module.StorageMetricsCollector({"storage_backend": "dynamic"})
        collector.log_storage_metrics(stats)  # SGLang's assert: raises AssertionError on a stand-in
        self.assertIs(module.StorageMetrics, type(stats))
        self.assertEqual({}, stats.prefetch_stats)
        self.assertIsInstance(stats.counters, dict)
        return stats

    def test_current_module(self):
        """SGLang since early 2026: ``sglang.srt.observability.metrics_collector``."""
        with fake.installed_metrics_modules(new=True, old=False) as modules:
            self.check_collector_accepts(modules[fake.METRICS_MODULE])

    def test_older_module(self):
        """SGLang before the move: ``sglang.srt.metrics.collector``."""
        with fake.installed_metrics_modules(new=False, old=True) as modules:
            self.check_collector_accepts(modules[fake.OLD_METRICS_MODULE])

    def test_current_module_first(self):
        with fake.installed_metrics_modules(new=True, old=True) as modules:
            self.check_collector_accepts(modules[fake.METRICS_MODULE])

    def test_stand_in_without_sglang(self):
        """Without SGLang the stand-in has the fields SGLang reads; SGLang's collector would refuse it, which is
        why the real class must be found when SGLang is there."""
        with fake.installed_metrics_modules(new=False, old=False):
            stats = self.backend().get_stats()
        self.assertIs(_compat._StandInStorageMetrics, type(stats))
        self.assertEqual(([], [], [], [], {}), (stats.prefetch_pgs, stats.backup_pgs, stats.prefetch_bandwidth,
                                                stats.backup_bandwidth, stats.prefetch_stats))
        with fake.installed_metrics_modules(new=True) as modules:
            with self.assertRaises(AssertionError):
                modules[fake.METRICS_MODULE].StorageMetricsCollector().log_storage_metrics(stats)


class InterfaceV1Test(NoDaemonTestCase):
    """``interface_v1`` is read exactly as ``HiCacheController`` reads it (``fake.zero_copy_selected``)."""

    VALUES = (1, 0, True, False, None, "1", "0", "true", "false", "", "yes", 2)

    def test_read_as_sglang_reads_it(self):
        for value in self.VALUES:
            extra_config = {"backend_name": "hicache", "interface_v1": value}
            self.assertEqual(fake.zero_copy_selected("dynamic", extra_config),
                             config.BackendSettings.from_extra_config(extra_config).interface_v1, repr(value))
        self.assertFalse(config.BackendSettings.from_extra_config({"backend_name": "hicache"}).interface_v1)
        self.assertFalse(fake.zero_copy_selected("dynamic", {"backend_name": "hicache"}))

    def test_false_looking_string_is_said_once_at_start(self):
        for value in ("0", "false", " False "):
            with self.assertLogs(LOGGER, logging.DEBUG) as logs:
                b = self.backend(interface_v1=value)
            self.assertTrue(b.settings.interface_v1)
            said = [m for m in self.messages(logs, logging.WARNING) if "interface_v1" in m]
            self.assertEqual(1, len(said), self.messages(logs))
            self.assertIn(repr(value), said[0])
            self.assertIn("bool()", said[0])
            # the copying path is not announced: SGLang takes the zero-copy one
            self.assertFalse([m for m in self.messages(logs) if "flat copies" in m])

    def test_plain_values_say_nothing_more(self):
        for value, copies in ((1, False), (0, True), (True, False), (False, True), ("1", False)):
            with self.assertLogs(LOGGER, logging.DEBUG) as logs:
                self.backend(interface_v1=value)
            self.assertFalse([m for m in self.messages(logs, logging.WARNING) if "interface_v1" in m], value)
            self.assertEqual(copies, any("flat copies" in m for m in self.messages(logs)), value)


class DraftKeyTest(NoDaemonTestCase):
    """Speculative decoding's ``"<hash>.draft"`` keys (``fake.draft_page_set_generic``) are normal input."""

    def test_component_keys(self):
        self.assertEqual("draft", config.component_key(KEY + ".draft"))
        self.assertEqual("draft_swa", config.component_key(KEY + ".draft_swa"))
        for other in (KEY, KEY + ".", KEY + "draft", "zz" * 32 + ".draft", "xyz.draft", KEY + ".a/b", None, 7):
            self.assertIsNone(config.component_key(other), other)
        # stored under SHA-256 of the key, as before: pages written by earlier versions are still found
        self.assertIsNone(config.page_hash(KEY + ".draft"))
        self.assertNotEqual(config.fallback_hash(KEY + ".draft"), bytes.fromhex(KEY))

    def test_no_warning_for_draft_keys(self):
        draft_pool = fake.FakeMHATokenToKVPoolHost("page_first", layer_num=1)
        b = self.backend(fake.FakeMHATokenToKVPoolHost("page_first"))
        indices = fake.FakeIndices(range(8))
        with self.assertLogs(LOGGER, logging.DEBUG) as logs:
            fake.draft_page_set_generic(b, draft_pool, [KEY, "cd" * 32], indices)
            fake.draft_page_get_generic(b, draft_pool, [KEY, "cd" * 32], indices)
            fake.draft_page_get_generic(b, draft_pool, ["ef" * 32], indices)
        self.assertFalse([m for m in self.messages(logs) if "not a 64-hex page hash" in m], self.messages(logs))
        said = [m for m in self.messages(logs, logging.INFO) if "'draft'" in m]
        self.assertEqual(1, len(said), self.messages(logs))
        self.assertIn("draft model", said[0])

    def test_other_keys_still_warn(self):
        b = self.backend(fake.FakeMHATokenToKVPoolHost("page_first"))
        with self.assertLogs(LOGGER, logging.WARNING) as logs:
            b.batch_get(["not-a-hash"], [bytearray(16)])
        self.assertTrue([m for m in self.messages(logs) if "not a 64-hex page hash" in m])


class AsymmetricPoolTest(NoDaemonTestCase):
    """Host pools whose K and V head dims differ (``fake.FakeAsymmetricMHATokenToKVPoolHost``)."""

    def test_needs_interface_v1(self):
        for layout in ("page_first", "page_first_direct"):
            pool = fake.FakeAsymmetricMHATokenToKVPoolHost(layout)
            with self.assertRaisesRegex(ValueError, "interface_v1"):
                self.backend(pool, interface_v1=0)
            # SGLang's copying path is what would fail, in its own prefetch thread
            with self.assertRaises(NotImplementedError):
                fake.generic_page_get(self.backend(interface_v1=0), pool, [KEY], fake.FakeIndices(range(4)))
            b = self.backend(pool, interface_v1=1)
            self.assertEqual(pool.page_bytes, b._pool.page_bytes)

    def test_zero_copy_parts(self):
        for layout in ("page_first", "page_first_direct"):
            pool = fake.FakeAsymmetricMHATokenToKVPoolHost(layout, head_dim=12, v_head_dim=8)
            host = HostPool(pool, False)
            self.assertTrue(host.asymmetric)
            self.assertIn("K/V head dims 12/8", host.describe())
            parts = host.zero_copy_pages(fake.FakeIndices(range(8, 16)), 2)
            k_bytes, v_bytes = 3 * 4 * 2 * 12 * 2, 3 * 4 * 2 * 8 * 2  # layers * tokens * heads * dim * bf16
            self.assertEqual([[k_bytes, v_bytes]] * 2, [[length for _, length in page] for page in parts])
        self.assertFalse(HostPool(fake.FakeMHATokenToKVPoolHost("page_first"), False).asymmetric)
        self.assertFalse(HostPool(fake.FakeMLATokenToKVPoolHost("page_first"), True).asymmetric)


if __name__ == "__main__":
    unittest.main()
