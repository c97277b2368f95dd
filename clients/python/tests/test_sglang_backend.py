"""Tests of the SGLang storage backend (``hicache.sglang.HiCacheDaemonStorage``) against a real daemon, with fake
SGLang host pools (``fake_sglang``). Standard library only; SGLang and torch are not needed.

Run from the repository root::

    python3 -m unittest discover -s clients/python/tests -t clients/python -p 'test_sglang_backend.py'

The daemon is started as the client's tests start it (``daemon_process.py``: ``$HICACHE_DAEMON_CMD``, else
``./hicache serve`` with ``HICACHE_SKIP_BUILD=1``).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # clients/python

from hicache import HiCacheClient, Status  # noqa: E402
from hicache.namespace import LAYER_MAJOR, TOKEN_MAJOR  # noqa: E402
from hicache.sglang import HiCacheDaemonStorage, _compat  # noqa: E402
from hicache.sglang.config import BackendSettings, build_namespace, canonical_dtype, page_hash  # noqa: E402

try:
    from . import fake_sglang as fake
    from .daemon_process import DaemonProcess
except ImportError:  # run as a script, or with tests/ on the path
    import fake_sglang as fake  # type: ignore[no-redef]
    from daemon_process import DaemonProcess  # type: ignore[no-redef]

TIMEOUT_S = 5.0
DAEMON: DaemonProcess | None = None
RNG = random.Random(20250917)


def setUpModule():
    global DAEMON
    logging.getLogger("hicache.sglang").setLevel(logging.CRITICAL)  # the failures below are on purpose
    logging.getLogger("hicache.client").setLevel(logging.CRITICAL)  # and the client's warning about them
    DAEMON = DaemonProcess().start()


def tearDownModule():
    logging.getLogger("hicache.sglang").setLevel(logging.NOTSET)
    logging.getLogger("hicache.client").setLevel(logging.NOTSET)
    if DAEMON is not None:
        DAEMON.stop()


def random_keys(n: int) -> list:
    return [RNG.randbytes(32).hex() for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def java_row_offset(order: int, part: int, layer: int, token: int, layers: int, page_tokens: int, row_bytes: int):
    """io.hicache.core.page.PageFormat.rowOffset, transcribed."""
    if order == LAYER_MAJOR:
        row = (part * layers + layer) * page_tokens + token
    else:
        row = (part * page_tokens + token) * layers + layer
    return row * row_bytes


def java_page(pool, first: int, order: int) -> bytes:
    """The page at host slot ``first`` as a Java engine lays it out (PageFormat) for ``order``."""
    page = bytearray(pool.page_bytes)
    for (part, layer, token), data in pool.page_rows(first).items():
        offset = java_row_offset(order, part, layer, token, pool.layer_num, pool.page_size, pool.row_bytes)
        page[offset:offset + pool.row_bytes] = data
    return bytes(page)


def slots(first_pages: list, page_size: int) -> fake.FakeIndices:
    """Host indices for pages starting at the given page numbers."""
    return fake.FakeIndices(p * page_size + t for p in first_pages for t in range(page_size))


class BackendTestCase(unittest.TestCase):
    def setUp(self):
        self.backends = []

    def tearDown(self):
        for backend in self.backends:
            backend.close()

    def backend(self, pool=None, port=None, **config) -> HiCacheDaemonStorage:
        extra = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheDaemonStorage",
                 "interface_v1": 1, "port": DAEMON.port if port is None else port, "timeout_s": TIMEOUT_S}
        extra.update(config.pop("extra_config", {}))
        backend = HiCacheDaemonStorage(fake.storage_config(extra_config=extra, **config), {})
        self.backends.append(backend)
        if pool is not None:
            backend.register_mem_pool_host(pool)
        return backend

    def raw_page(self, backend, key: str, length: int):
        with HiCacheClient(port=DAEMON.port, local=False) as client:
            target = bytearray(length)
            (status,) = client.get(backend.namespace, [key], [target])
        return status, bytes(target)


# ------------------------------------------------------------------------------------------------ without a daemon


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        s = BackendSettings.from_extra_config({"backend_name": "hicache", "interface_v1": 1})
        self.assertEqual(("127.0.0.1", 7370, "", 10.0, 4, None, None, None, ""),
                         (s.host, s.port, s.token, s.timeout_s, s.pool_size, s.local, s.model, s.dtype, s.extra))
        self.assertTrue(s.interface_v1)
        self.assertEqual((), s.unknown_keys)

    def test_values_and_mistakes(self):
        s = BackendSettings.from_extra_config({"host": "10.0.0.1", "port": "7000", "token": "t", "timeout_s": "2.5",
                                               "pool_size": 8, "local": "false", "model": "m", "dtype": "BF16",
                                               "extra": "lora-a", "hots": 1})
        self.assertEqual(("10.0.0.1", 7000, "t", 2.5, 8, False, "m", "bfloat16", "lora-a", ("hots",)),
                         (s.host, s.port, s.token, s.timeout_s, s.pool_size, s.local, s.model, s.dtype, s.extra,
                          s.unknown_keys))
        self.assertIsNone(BackendSettings.from_extra_config({"local": "auto"}).local)
        self.assertTrue(BackendSettings.from_extra_config({"local": True}).local)
        for bad in ({"port": 0}, {"port": "x"}, {"timeout_s": 0}, {"pool_size": 0}, {"dtype": "int8"},
                    {"local": "maybe"}, {"model": ""}):
            with self.assertRaises(ValueError, msg=bad):
                BackendSettings.from_extra_config(bad)

    def test_dtypes(self):
        self.assertEqual("bfloat16", canonical_dtype(fake.BFLOAT16))
        self.assertEqual("fp8_e4m3", canonical_dtype(fake.FLOAT8_E4M3FN))
        self.assertEqual("fp8_e5m2", canonical_dtype("float8_e5m2"))
        self.assertEqual("float16", canonical_dtype("half"))
        self.assertIsNone(canonical_dtype(fake.UINT8))

    def test_namespaces(self):
        ns = build_namespace("m", "bfloat16", TOKEN_MAJOR, 1, 2, False)
        self.assertEqual(("m", "bfloat16", 1, 1, 2, ""), (ns.model, ns.dtype, ns.order, ns.tp_rank, ns.tp_size,
                                                          ns.extra))
        mla = build_namespace("m", "bfloat16", LAYER_MAJOR, 3, 4, True)
        self.assertEqual((0, 1), (mla.tp_rank, mla.tp_size))
        self.assertEqual("pp1", build_namespace("m", "bf16", 0, 0, 1, False, "", 1, 2).extra)
        self.assertEqual("salt/pp0/cp1", build_namespace("m", "bf16", 0, 0, 1, False, "salt", 0, 2, 1, 2).extra)
        self.assertEqual("salt", build_namespace("m", "bf16", 0, 0, 1, False, "salt", 0, 1, 0, 1).extra)

    def test_keys(self):
        key = "ab" * 32
        self.assertEqual(bytes.fromhex(key), page_hash(key))
        self.assertEqual(b"\x01" * 32, page_hash(b"\x01" * 32))
        self.assertIsNone(page_hash("xyz"))
        self.assertIsNone(page_hash("zz" * 32))


class RegistrationTest(BackendTestCase):
    """Pools and namespaces; a daemon that is not there is fine for these."""

    def setUp(self):
        super().setUp()
        self.port = free_port()

    def test_namespace_from_config_and_pool(self):
        b = self.backend(port=self.port, tp_rank=1, tp_size=2, model_name="org/model-7b",
                         extra_config={"extra": "lora-a"}, pp_rank=1, pp_size=2)
        self.assertEqual(("org/model-7b", "bfloat16", LAYER_MAJOR, 1, 2, "lora-a/pp1"),
                         (b.namespace.model, b.namespace.dtype, b.namespace.order, b.namespace.tp_rank,
                          b.namespace.tp_size, b.namespace.extra))
        b.register_mem_pool_host(fake.FakeMHATokenToKVPoolHost("page_first", dtype=fake.FLOAT16))
        self.assertEqual((TOKEN_MAJOR, "float16"), (b.namespace.order, b.namespace.dtype))
        for layout, order in (("layer_first", LAYER_MAJOR), ("page_first_direct", LAYER_MAJOR),
                              ("page_first", TOKEN_MAJOR)):
            self.assertEqual(order, self.backend(fake.FakeMHATokenToKVPoolHost(layout), port=self.port)
                             .namespace.order, layout)
            self.assertEqual(order, self.backend(fake.FakeMLATokenToKVPoolHost(layout), port=self.port,
                                                 is_mla_model=True).namespace.order, layout)

    def test_model_override_and_mla_rank(self):
        b = self.backend(fake.FakeMLATokenToKVPoolHost("page_first"), port=self.port, tp_rank=3, tp_size=4,
                         is_mla_model=True, extra_config={"model": "deepseek-v3"})
        self.assertEqual(("deepseek-v3", 0, 1), (b.namespace.model, b.namespace.tp_rank, b.namespace.tp_size))
        self.assertFalse(b.writes)
        self.assertTrue(self.backend(fake.FakeMLATokenToKVPoolHost("page_first"), port=self.port, tp_rank=0,
                                     tp_size=4, is_mla_model=True).writes)
        # an MLA pool makes the backend MLA even if the config did not say so
        self.assertFalse(self.backend(fake.FakeMLATokenToKVPoolHost("page_first"), port=self.port, tp_rank=1,
                                      tp_size=2).writes)

    def test_dtype_of_fp8_pools(self):
        pool = fake.FakeMHATokenToKVPoolHost("page_first", dtype=fake.FLOAT8_E4M3FN, store_dtype=fake.UINT8)
        self.assertEqual("fp8_e4m3", self.backend(pool, port=self.port).namespace.dtype)
        pool.device_pool = None  # only uint8 left: the format is unknown
        with self.assertRaisesRegex(ValueError, "dtype"):
            self.backend(pool, port=self.port)
        self.assertEqual("fp8_e5m2", self.backend(pool, port=self.port, extra_config={"dtype": "fp8_e5m2"})
                         .namespace.dtype)

    def test_refused_layouts_and_models(self):
        pool = fake.FakeMHATokenToKVPoolHost("page_first")
        pool.layout = "page_head"
        with self.assertRaisesRegex(ValueError, "page_head"):
            self.backend(pool, port=self.port)
        with self.assertRaisesRegex(ValueError, "model"):
            self.backend(port=self.port, model_name=None)

    def test_calls_before_registration_fail_softly(self):
        b = self.backend(port=self.port)
        self.assertEqual([False, False], b.batch_get_v1(random_keys(2), fake.FakeIndices(range(8))))
        self.assertEqual([False], b.batch_set_v1(random_keys(1), fake.FakeIndices(range(4))))


# ---------------------------------------------------------------------------------------------- with the daemon


def mha(layout, **kw):
    return fake.FakeMHATokenToKVPoolHost(layout, **kw)


def mla(layout, **kw):
    return fake.FakeMLATokenToKVPoolHost(layout, **kw)


class RoundTripTest(BackendTestCase):
    """batch_set_v1 from some slots, batch_get_v1 into other slots (of another pool: another engine), every byte."""

    def round_trip(self, make_pool, is_mla=False, local=None, pages=5, expect_zero_copy=True):
        writer_pool, reader_pool = make_pool(), make_pool()
        extra = {} if local is None else {"local": local}
        writer = self.backend(writer_pool, is_mla_model=is_mla, extra_config=extra)
        reader = self.backend(reader_pool, is_mla_model=is_mla, extra_config=extra)
        ps = writer_pool.page_size
        source_pages, target_pages = [1, 7, 3, 12, 4][:pages], [15, 0, 9, 2, 8][:pages]
        for p in source_pages:
            writer_pool.fill_page(p * ps, RNG)
        keys = random_keys(pages)
        reader_before = reader_pool.snapshot()

        self.assertEqual([True] * pages, writer.batch_set_v1(keys, slots(source_pages, ps)))
        self.assertEqual(expect_zero_copy, writer_pool is not None and writer._pool.zero_copy)
        # on the wire: the page as a Java engine of the same layout lays it out
        for key, p in zip(keys, source_pages):
            status, data = self.raw_page(writer, key, writer_pool.page_bytes)
            self.assertEqual(Status.OK, status)
            self.assertEqual(java_page(writer_pool, p * ps, writer.namespace.order), data)

        self.assertEqual(pages, reader.batch_exists(keys))
        self.assertEqual(pages, reader.batch_exists(keys + random_keys(1)))
        self.assertEqual(2, reader.batch_exists(keys[:2] + random_keys(1) + keys[2:]))
        self.assertEqual(0, reader.batch_exists(random_keys(1) + keys))
        self.assertEqual([True] * pages, reader.batch_get_v1(keys, slots(target_pages, ps)))
        for s, t in zip(source_pages, target_pages):
            self.assertEqual(writer_pool.page_rows(s * ps), reader_pool.page_rows(t * ps))
        # nothing but the target pages changed
        after = reader_pool.snapshot()
        touched = {reader_pool.row_offset(p, l, t * ps + i) for t in target_pages for p in range(reader_pool.parts)
                   for l in range(reader_pool.layer_num) for i in range(ps)}
        for offset in range(0, len(after), reader_pool.row_bytes):
            if offset not in touched:
                self.assertEqual(reader_before[offset:offset + reader_pool.row_bytes],
                                 after[offset:offset + reader_pool.row_bytes], offset)

        # a second backup sends nothing: the leading-hits query finds every page
        before = writer.counters().get("set_pages_present", 0)
        self.assertEqual([True] * pages, writer.batch_set_v1(keys, slots(source_pages, ps)))
        self.assertEqual(before + pages, writer.counters()["set_pages_present"])
        # a batch with a miss in the middle: pages up to it, then nothing
        mixed = keys[:2] + random_keys(1) + keys[2:]
        result = reader.batch_get_v1(mixed, slots([5, 6, 10, 11, 13, 14][:len(mixed)], ps))
        self.assertEqual([True, True, False] + [True] * (pages - 2), result)
        return writer, reader

    def test_mha_page_first(self):
        self.round_trip(lambda: mha("page_first"))

    def test_mha_page_first_over_tcp(self):
        self.round_trip(lambda: mha("page_first"), local=False)

    def test_mha_page_first_direct(self):
        self.round_trip(lambda: mha("page_first_direct"), local=True)

    def test_mha_layer_first_zero_copy(self):
        self.round_trip(lambda: mha("layer_first", layer_num=4))

    def test_mha_layer_first_copying(self):
        self.round_trip(lambda: mha("layer_first", layer_first_meta=False), expect_zero_copy=False)

    def test_mla_page_first(self):
        self.round_trip(lambda: mla("page_first"), is_mla=True)

    def test_mla_page_first_direct(self):
        self.round_trip(lambda: mla("page_first_direct"), is_mla=True, local=False)

    def test_mla_layer_first_copying(self):
        self.round_trip(lambda: mla("layer_first"), is_mla=True, expect_zero_copy=False)

    def test_mla_layer_first_zero_copy(self):
        self.round_trip(lambda: mla("layer_first", layer_first_meta=True), is_mla=True)

    def test_layer_major_layouts_share_pages(self):
        """layer_first and page_first_direct flatten a page alike: one writes, the other reads the same rows;
        page_first (token-major) is another namespace."""
        first, direct, token = mha("layer_first"), mha("page_first_direct"), mha("page_first")
        a, b, c = self.backend(first), self.backend(direct), self.backend(token)
        self.assertEqual(a.namespace, b.namespace)
        self.assertNotEqual(a.namespace, c.namespace)
        first.fill_page(8, RNG)
        first.fill_page(20, RNG)
        keys = random_keys(2)
        self.assertEqual([True, True], a.batch_set_v1(keys, slots([2, 5], 4)))
        self.assertEqual([True, True], b.batch_get_v1(keys, slots([0, 9], 4)))
        self.assertEqual(first.page_rows(8), direct.page_rows(0))
        self.assertEqual(first.page_rows(20), direct.page_rows(36))
        self.assertEqual(0, c.batch_exists(keys))
        self.assertEqual([False, False], c.batch_get_v1(keys, slots([0, 1], 4)))

    def test_other_geometry_is_a_failed_page(self):
        """Same namespace, pages of another size: SIZE_MISMATCH, a False page, nothing written into the slots."""
        small, big = mha("page_first", head_num=2), mha("page_first", head_num=4)
        writer, reader = self.backend(small), self.backend(big)
        small.fill_page(0, RNG)
        keys = random_keys(1)
        self.assertEqual([True], writer.batch_set_v1(keys, slots([0], 4)))
        before = big.snapshot()
        self.assertEqual([False], reader.batch_get_v1(keys, slots([3], 4)))
        self.assertEqual(before, big.snapshot())
        self.assertEqual(1, reader.counters().get("get_pages_size_mismatch"))

    def asymmetric_round_trip(self, layout: str, local=None):
        """K and V head dims differ (SGLang's AsymmetricMHATokenToKVPoolHost): zero copy of the K and the V blob
        of each page, which have different sizes."""
        extra = {} if local is None else {"local": local}
        writer_pool = fake.FakeAsymmetricMHATokenToKVPoolHost(layout, head_dim=24, v_head_dim=16)
        reader_pool = fake.FakeAsymmetricMHATokenToKVPoolHost(layout, head_dim=24, v_head_dim=16)
        writer = self.backend(writer_pool, extra_config=extra)
        reader = self.backend(reader_pool, extra_config=extra)
        for p in (2, 9):
            writer_pool.fill_page(p * 4, RNG)
        keys = random_keys(2)
        before = {(p, l, s): reader_pool.row(p, l, s) for p in range(2) for l in range(reader_pool.layer_num)
                  for s in range(reader_pool.size)}
        self.assertEqual([True, True], writer.batch_set_v1(keys, slots([2, 9], 4)))
        self.assertTrue(writer._pool.zero_copy)
        for key, p in zip(keys, (2, 9)):
            status, data = self.raw_page(writer, key, writer_pool.page_bytes)
            self.assertEqual((Status.OK, writer_pool.wire_page(p * 4)), (status, data))
        self.assertEqual([True, True, False], reader.batch_get_v1(keys + random_keys(1), slots([5, 0, 7], 4)))
        self.assertEqual(writer_pool.page_rows(8), reader_pool.page_rows(20))
        self.assertEqual(writer_pool.page_rows(36), reader_pool.page_rows(0))
        for (p, l, s), row in before.items():  # nothing but the target pages changed
            if s // 4 not in (5, 0):
                self.assertEqual(row, reader_pool.row(p, l, s), (p, l, s))

    def test_mha_asymmetric_page_first(self):
        self.asymmetric_round_trip("page_first")

    def test_mha_asymmetric_page_first_direct_over_tcp(self):
        self.asymmetric_round_trip("page_first_direct", local=False)


class SharingTest(BackendTestCase):
    """Which other ranks and engines see a rank's pages."""

    def write(self, backend, pool, pages=3) -> list:
        for p in range(pages):
            pool.fill_page(p * pool.page_size, RNG)
        keys = random_keys(pages)
        self.assertEqual([True] * pages, backend.batch_set_v1(keys, slots(range(pages), pool.page_size)))
        return keys

    def test_mha_ranks(self):
        pool = mha("page_first")
        rank0 = self.backend(pool, tp_rank=0, tp_size=2)
        keys = self.write(rank0, pool)
        self.assertEqual(3, self.backend(mha("page_first"), tp_rank=0, tp_size=2).batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first"), tp_rank=1, tp_size=2).batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first"), tp_rank=0, tp_size=1).batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first"), tp_rank=0, tp_size=2, model_name="other")
                         .batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first", dtype=fake.FLOAT16), tp_rank=0, tp_size=2)
                         .batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first"), tp_rank=0, tp_size=2, extra_config={"extra": "salt"})
                         .batch_exists(keys))
        self.assertEqual(0, self.backend(mha("page_first"), tp_rank=0, tp_size=2, pp_rank=0, pp_size=2)
                         .batch_exists(keys))
        self.assertEqual(3, self.backend(mha("page_first"), tp_rank=0, tp_size=2,
                                         extra_config={"model": "test/model"}).batch_exists(keys))

    def test_mla_ranks_share_and_only_rank0_writes(self):
        pool0, pool1 = mla("page_first"), mla("page_first")
        rank0 = self.backend(pool0, tp_rank=0, tp_size=2, is_mla_model=True)
        rank1 = self.backend(pool1, tp_rank=1, tp_size=2, is_mla_model=True)
        keys = self.write(rank0, pool0)
        self.assertEqual(3, rank1.batch_exists(keys))
        self.assertEqual([True] * 3, rank1.batch_get_v1(keys, slots([4, 5, 6], 4)))
        for p in range(3):
            self.assertEqual(pool0.page_rows(p * 4), pool1.page_rows((4 + p) * 4))
        # rank 1 answers True without writing
        pool1.fill_page(0, RNG)
        own = random_keys(1)
        self.assertEqual([True], rank1.batch_set_v1(own, slots([0], 4)))
        self.assertTrue(rank1.batch_set([own[0]], [bytearray(pool1.page_bytes)]))
        self.assertEqual(0, rank0.batch_exists(own))
        self.assertEqual(2, rank1.counters()["set_pages_skipped_rank"])
        # another TP size of the same MLA model shares too
        self.assertEqual(3, self.backend(mla("page_first"), tp_rank=5, tp_size=8, is_mla_model=True)
                         .batch_exists(keys))

    def test_clear_removes_only_the_namespace(self):
        pool = mha("page_first")
        mine, other = self.backend(pool, extra_config={"extra": "clear-me"}), self.backend(pool)
        mine_keys, other_keys = self.write(mine, pool), self.write(other, pool)
        mine.clear()
        self.assertEqual(0, mine.batch_exists(mine_keys))
        self.assertEqual(3, other.batch_exists(other_keys))


class CopyingInterfaceTest(BackendTestCase):
    """The non-v1 calls, with flat buffers."""

    def test_set_get_exists(self):
        pool = mha("layer_first")
        b = self.backend(pool)
        keys = random_keys(3)
        values = [bytearray(RNG.randbytes(pool.page_bytes)) for _ in keys]
        self.assertTrue(b.batch_set(keys, values))
        self.assertTrue(b.batch_set(keys, values))  # already stored: still True
        targets = [bytearray(pool.page_bytes) for _ in keys]
        self.assertEqual(targets, b.batch_get(keys, targets))
        self.assertEqual(values, targets)
        self.assertTrue(b.exists(keys[1]))
        self.assertFalse(b.exists(random_keys(1)[0]))
        self.assertEqual(3, b.batch_exists(keys))
        # no targets: flat pages of the pool, ready for set_from_flat_data_page
        pages = b.batch_get(keys + random_keys(1))
        self.assertEqual([bytes(v) for v in values], [p.tobytes() for p in pages[:3]])
        self.assertIsNone(pages[3])
        one = random_keys(1)[0]
        value = bytearray(RNG.randbytes(pool.page_bytes))
        self.assertTrue(b.set(one, value))
        target = bytearray(pool.page_bytes)
        self.assertIs(target, b.get(one, target))
        self.assertEqual(value, target)
        self.assertIsNone(b.get(random_keys(1)[0], bytearray(pool.page_bytes)))
        # a flat page from the copying interface is the page batch_get_v1 reads
        self.assertEqual([True], b.batch_get_v1([one], slots([3], 4)))
        self.assertEqual(bytes(value), pool.get_data_page(12).tobytes())

    def test_generic_path_shares_with_zero_copy(self):
        """SGLang without interface_v1 (get_data_page / batch_set) and with it store the same bytes."""
        pool = mha("page_first")
        b = self.backend(pool)
        pool.fill_page(0, RNG)
        keys = random_keys(1)
        self.assertTrue(b.batch_set(keys, [pool.get_data_page(0)]))
        self.assertEqual([True], b.batch_get_v1(keys, slots([5], 4)))
        self.assertEqual(pool.page_rows(0), pool.page_rows(20))

    def test_stats(self):
        pool = mha("page_first")
        b = self.backend(pool)
        pool.fill_page(0, RNG)
        keys = random_keys(1)
        b.batch_set_v1(keys, slots([0], 4))
        b.batch_get_v1(keys + random_keys(1), slots([1, 2], 4))
        stats = b.get_stats()
        self.assertEqual([1], list(stats.backup_pgs))
        self.assertEqual([1], list(stats.prefetch_pgs))
        self.assertEqual(1, stats.counters["set_pages_ok"])
        self.assertEqual(1, stats.counters["get_pages_ok"])
        self.assertEqual(1, stats.counters["get_pages_miss"])
        self.assertEqual([], list(b.get_stats().backup_pgs))  # drained

    def test_stats_reach_sglang_collector(self):
        """Under --enable-metrics SGLang hands get_stats() to StorageMetricsCollector.log_storage_metrics, which
        asserts its own StorageMetrics class (fake.installed_metrics_modules)."""
        _compat.storage_metrics_class.cache_clear()
        self.addCleanup(_compat.storage_metrics_class.cache_clear)
        pool = mha("page_first")
        b = self.backend(pool)
        pool.fill_page(0, RNG)
        keys = random_keys(2)
        with fake.installed_metrics_modules() as modules:
            collector = modules[fake.METRICS_MODULE].StorageMetricsCollector({"storage_backend": "dynamic"})
            b.batch_set_v1(keys, slots([0, 1], 4))
            b.batch_get_v1(keys[:1], slots([2], 4))
            collector.log_storage_metrics(b.get_stats())
            collector.log_storage_metrics(b.get_stats())  # drained: nothing more
        self.assertEqual(([2], [1]), (collector.histograms["backup_pgs"], collector.histograms["prefetch_pgs"]))
        self.assertEqual(1, len(collector.histograms["prefetch_bandwidth"]))


class DraftPagesTest(BackendTestCase):
    """Speculative decoding's draft KV, which SGLang stores as ``"<hash>.draft"`` pages through the copying calls
    (``fake.draft_page_set_generic`` / ``draft_page_get_generic``): served like any page, without warnings."""

    def test_draft_pages_round_trip(self):
        target, draft = mha("page_first"), mha("page_first", layer_num=1, head_num=4)
        other_draft = mha("page_first", layer_num=1, head_num=4)
        b = self.backend(target)
        reader = self.backend(mha("page_first"))
        for p in (1, 6):
            target.fill_page(p * 4, RNG)
            draft.fill_page(p * 4, RNG)
        hashes = random_keys(2)
        with self.assertNoLogs("hicache.sglang.storage", logging.WARNING):
            self.assertEqual([True, True], b.batch_set_v1(hashes, slots([1, 6], 4)))  # the target pages
            fake.draft_page_set_generic(b, draft, hashes, slots([1, 6], 4))
            fake.draft_page_get_generic(reader, other_draft, hashes + random_keys(1), slots([3, 8, 10], 4))
        self.assertEqual(draft.page_rows(4), other_draft.page_rows(12))
        self.assertEqual(draft.page_rows(24), other_draft.page_rows(32))
        self.assertEqual(bytes(other_draft.page_bytes), b"".join(other_draft.page_rows(40).values()))
        # the draft pages are pages of their own: the target pages under the bare hashes are unchanged
        self.assertEqual(2, reader.batch_exists(hashes))
        self.assertEqual(2, reader.counters()["get_pages_ok"])
        self.assertEqual(1, reader.counters()["get_pages_miss"])


class DaemonSettingsTest(BackendTestCase):
    """A daemon with a token and a small largest page."""

    def test_token_and_page_limit(self):
        daemon = DaemonProcess("--server.max-page-bytes", "4KiB", token="s3cret").start()
        try:
            with self.assertRaisesRegex(ValueError, "token"):
                self.backend(port=daemon.port, extra_config={"token": "wrong"})
            pool = mha("page_first", head_dim=64)  # pages of 6 KiB
            b = self.backend(pool, port=daemon.port, extra_config={"token": "s3cret"})
            pool.fill_page(0, RNG)
            keys = random_keys(2)
            self.assertEqual([False, False], b.batch_set_v1(keys, slots([0, 1], 4)))
            self.assertEqual(2, b.counters()["set_pages_rejected"])
            small = mha("page_first", head_dim=8)
            c = self.backend(small, port=daemon.port, extra_config={"token": "s3cret"})
            small.fill_page(0, RNG)
            self.assertEqual([True], c.batch_set_v1(keys[:1], slots([0], 4)))
            self.assertEqual([True], c.batch_get_v1(keys[:1], slots([1], 4)))
            self.assertEqual(small.page_rows(0), small.page_rows(4))
        finally:
            daemon.stop()


class DaemonDownTest(BackendTestCase):
    """Failures become False pages within the deadline, never exceptions."""

    def check_soft_failures(self, b, pool, budget_s: float):
        keys = random_keys(3)
        for call in (lambda: b.batch_exists(keys), lambda: b.batch_get_v1(keys, slots([0, 1, 2], 4)),
                     lambda: b.batch_set_v1(keys, slots([0, 1, 2], 4)), lambda: b.batch_get(keys),
                     lambda: b.batch_set(keys, [bytearray(pool.page_bytes)] * 3), lambda: b.exists(keys[0]),
                     lambda: b.clear()):
            started = time.monotonic()
            result = call()
            self.assertLess(time.monotonic() - started, budget_s)
            self.assertIn(result, (0, [False] * 3, [None] * 3, False, None))
        counters = b.get_stats().counters
        self.assertGreaterEqual(counters.get("get_failed_pages", 0), 6)
        self.assertGreaterEqual(counters.get("set_failed_pages", 0), 6)
        self.assertGreaterEqual(counters.get("exists_failed_calls", 0), 2, counters)

    def test_nothing_listening(self):
        pool = mha("page_first")
        b = self.backend(pool, port=free_port(), extra_config={"timeout_s": 1})
        self.check_soft_failures(b, pool, 1.5)

    def test_daemon_killed_and_paused(self):
        daemon = DaemonProcess().start()
        try:
            pool = mha("page_first_direct")
            b = self.backend(pool, port=daemon.port, extra_config={"timeout_s": 1})
            pool.fill_page(0, RNG)
            keys = random_keys(1)
            self.assertEqual([True], b.batch_set_v1(keys, slots([0], 4)))
            daemon.pause()  # answers nothing: each call ends at its deadline
            try:
                self.check_soft_failures(b, pool, 1 + 0.5 + 1.0)
            finally:
                daemon.resume()
            self.assertEqual(1, b.batch_exists(keys))  # back once the daemon answers
            daemon.kill()
            self.check_soft_failures(b, pool, 1.5)
        finally:
            daemon.stop()


if __name__ == "__main__":
    unittest.main()
