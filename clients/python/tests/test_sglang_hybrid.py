"""SGLang's hybrid models on the backend (the v2 interface, ``hicache.sglang.hybrid``): each pool kind round trip
through a real daemon, driven as SGLang's ``HybridCacheController`` drives it (``fake_sglang_hybrid``), the rule
that a hit is what every pool can restore, and partial writes that must not become hits.

    python3 -m unittest discover -s clients/python/tests -t clients/python -p 'test_sglang_hybrid.py'
"""

from __future__ import annotations

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # clients/python

from hicache import HiCacheClient  # noqa: E402
from hicache.sglang.hybrid import part_extra, restorable_pages  # noqa: E402

try:
    from . import fake_sglang as fake
    from . import fake_sglang_hybrid as hybrid
    from .test_sglang_backend import BackendTestCase, random_keys, setUpModule, tearDownModule  # noqa: F401
except ImportError:  # run with tests/ on the path
    import fake_sglang as fake  # type: ignore[no-redef]
    import fake_sglang_hybrid as hybrid  # type: ignore[no-redef]
    from test_sglang_backend import BackendTestCase, random_keys, setUpModule, tearDownModule  # type: ignore  # noqa

RNG = random.Random(20261127)


def held(pages: set[int]):
    """``present(lo, hi)`` of a pool holding ``pages``: how many pages from ``lo`` on it holds."""
    def present(lo: int, hi: int) -> int:
        n = 0
        while lo + n < hi and lo + n in pages:
            n += 1
        return n
    return present


class RestorablePagesTest(unittest.TestCase):
    """The endpoint rule alone, with SGLang issue #39147's cases (3 KV pages; trailing pools of window 1)."""

    def test_the_greatest_common_endpoint_not_the_minimum(self):
        # SWA can restore only endpoint 3 (its page 2), Mamba only endpoint 2 (its page 1): nothing in common
        self.assertEqual(0, restorable_pages(3, [], [(1, held({2})), (1, held({1}))]))
        # SWA endpoints {1, 3}, Mamba {1, 2}: 1, though each alone reaches 3 and 2
        self.assertEqual(1, restorable_pages(3, [], [(1, held({0, 2})), (1, held({0, 1}))]))
        self.assertEqual(3, restorable_pages(3, [], [(1, held({2}))]))

    def test_windows_and_all_pages_pools(self):
        self.assertEqual(5, restorable_pages(6, [], [(2, held({0, 1, 3, 4}))]), "[3, 5) is the last full window")
        self.assertEqual(2, restorable_pages(6, [], [(3, held({0, 1, 3, 4}))]), "a window at the root may be short")
        self.assertEqual(3, restorable_pages(6, [3], [(2, held({0, 1, 2, 3, 4, 5}))]), "an all-pages pool bounds it")
        self.assertEqual(0, restorable_pages(0, [], [(1, held({0}))]))
        self.assertEqual(4, restorable_pages(4, [9], []))

    def test_part_namespaces_are_named_as_java_names_them(self):
        # io.hicache.core.key.Namespace.forPart (HybridHitsTest checks the same strings on the Java side)
        self.assertEqual("part=mamba", part_extra("", "mamba"))
        self.assertEqual("lora-a/part=swa", part_extra("lora-a", "swa"))


class HybridBackendTest(BackendTestCase):
    PAGE = 4

    def engine(self, mla=False, tp_rank=0, tp_size=1, with_indexer=False, meta=True):
        """A backend with an MHA (or MLA) KV pool, an SWA pool, a Mamba pool and optionally a DSA indexer pool,
        registered as the hybrid controller registers them."""
        kv = (fake.FakeMLATokenToKVPoolHost if mla else fake.FakeMHATokenToKVPoolHost)("page_first",
                                                                                      page_size=self.PAGE)
        swa = (fake.FakeMLATokenToKVPoolHost if mla else fake.FakeMHATokenToKVPoolHost)("page_first", layer_num=1,
                                                                                       page_size=self.PAGE)
        mamba = hybrid.FakeMambaPoolHost()
        indexer = hybrid.FakeDSAIndexerPoolHost(page_size=self.PAGE) if with_indexer else None
        if indexer is not None and not meta:
            indexer.get_page_buffer_meta = None  # an older pool without addresses: flat pages instead
        backend = self.backend(is_mla_model=mla, tp_rank=tp_rank, tp_size=tp_size)
        return hybrid.FakeHybridController(backend, kv, swa, mamba, indexer, swa_window_pages=2)

    def fill(self, ctl, pages, mamba_slot, swa_pages):
        for p in pages:
            ctl.kv.fill_page(p * self.PAGE, RNG)
        for p in swa_pages:
            ctl.pools[hybrid.PoolName.SWA].fill_page(p * self.PAGE, RNG)
        ctl.pools[hybrid.PoolName.MAMBA].fill_slot(mamba_slot, RNG)
        if ctl.pools[hybrid.PoolName.INDEXER] is not None:
            for p in pages:
                ctl.pools[hybrid.PoolName.INDEXER].fill_page(p * self.PAGE, RNG)

    def kv_bytes(self, ctl, pages):
        return [ctl.kv.get_data_page(p * self.PAGE).tobytes() for p in pages]

    def swa_bytes(self, ctl, pages):
        return [ctl.pools[hybrid.PoolName.SWA].get_data_page(p * self.PAGE).tobytes() for p in pages]

    def round_trip(self, with_indexer, meta=True):
        writer, reader = self.engine(with_indexer=with_indexer, meta=meta), self.engine(with_indexer=with_indexer,
                                                                                        meta=meta)
        hashes = random_keys(4)
        self.fill(writer, [0, 1, 2, 3], 5, [2, 3])
        hits = writer.backup(hashes, [0, 1, 2, 3], 5, [2, 3])
        self.assertEqual({"kv": 4, "mamba": 1, "swa": 2, **({"indexer": 4} if with_indexer else {})}, hits)
        self.assertEqual(4, reader.storage_hit_query(hashes + random_keys(2)), "the hit ends where the state was kept")
        got = reader.prefetch(hashes, [4, 5, 6, 7], 9, [6, 7])
        self.assertEqual({"kv": 4, "mamba": 1, "swa": 2, **({"indexer": 4} if with_indexer else {})}, got)
        self.assertEqual(self.kv_bytes(writer, [0, 1, 2, 3]), self.kv_bytes(reader, [4, 5, 6, 7]))
        self.assertEqual(self.swa_bytes(writer, [2, 3]), self.swa_bytes(reader, [6, 7]))
        self.assertEqual(writer.pools[hybrid.PoolName.MAMBA].slot(5), reader.pools[hybrid.PoolName.MAMBA].slot(9))
        if with_indexer:
            w, r = writer.pools[hybrid.PoolName.INDEXER], reader.pools[hybrid.PoolName.INDEXER]
            self.assertEqual([w.page(p * self.PAGE) for p in range(4)], [r.page((4 + p) * self.PAGE) for p in range(4)])

    def test_kv_swa_and_mamba_round_trip(self):
        self.round_trip(with_indexer=False)

    def test_dsa_indexer_round_trip(self):
        self.round_trip(with_indexer=True)

    def test_a_pool_without_addresses_is_copied_through_flat_pages(self):
        self.round_trip(with_indexer=True, meta=False)

    def test_each_part_has_a_namespace_of_its_own(self):
        ctl = self.engine()
        hashes = random_keys(2)
        self.fill(ctl, [0, 1], 0, [0, 1])
        ctl.backup(hashes, [0, 1], 0, [0, 1])
        with HiCacheClient(port=ctl.backend.settings.port, local=False) as client:
            kv = ctl.backend.namespace
            self.assertEqual(2, client.leading_hits(kv, [bytes.fromhex(h) for h in hashes]))
            mamba = ctl.backend._parts().of("mamba")
            self.assertEqual(part_extra("", "mamba"), mamba.extra)
            self.assertEqual(0, client.leading_hits(mamba, [bytes.fromhex(hashes[0])]), "state only at the node's end")
            self.assertEqual(1, client.leading_hits(mamba, [bytes.fromhex(hashes[1])]))

    def test_a_hit_needs_every_pool(self):
        ctl = self.engine()
        hashes = random_keys(6)
        self.fill(ctl, range(6), 1, range(6))
        ctl.backup(hashes[:2], [0, 1], 1, [0, 1])  # a node of 2 pages: state at its end
        ctl.backup(hashes[:6], list(range(6)), 1, [4, 5])  # extends it to 6 pages: state at 6, window [4, 6)
        self.assertEqual(6, ctl.storage_hit_query(hashes))
        self.assertEqual(2, ctl.storage_hit_query(hashes[:5]), "no state at 5 or 4, nor at 3: back to 2")
        self.assertEqual(0, ctl.storage_hit_query(hashes[:1]))
        self.assertEqual(5, ctl.backend.batch_exists(hashes[:5]), "the KV alone holds more")

    def test_sglang_issue_39147_through_the_daemon(self):
        ctl = self.engine()
        hashes = random_keys(3)
        self.fill(ctl, [0, 1, 2], 0, [1, 2])
        ctl.backup(hashes[:2], [0, 1], 0, None)  # a state at endpoint 2, no window kept
        ctl.backup(hashes, [0, 1, 2], None, [1, 2])  # the window [1, 3), no state at 3
        result = ctl.backend.batch_exists_v2(hashes, ctl.query_transfers())
        self.assertEqual({"kv": 3, "mamba": 2, "swa": 3}, dict(result.extra_pool_hit_pages), "each pool alone")
        self.assertEqual(0, result.kv_hit_pages, "no endpoint both can restore: not min(2, 3)")

    def test_a_partial_backup_is_no_hit(self):
        ctl = self.engine()
        hashes = random_keys(3)
        self.fill(ctl, [0, 1, 2], 0, [1, 2])
        del ctl.backend._side_pools["mamba"]  # its state cannot be written: the backup of that part fails
        hits = ctl.backup(hashes, [0, 1, 2], 0, [1, 2])
        self.assertEqual(0, hits["mamba"])
        self.assertEqual(3, hits["kv"])
        self.assertEqual(0, ctl.storage_hit_query(hashes), "KV and SWA without the state restore nothing")

    def test_a_prefetch_past_the_stored_prefix_gets_the_stored_kv_pages_only(self):
        # (That the window and state are then not read is the fake controller's rule, SGLang's, not the backend's.)
        writer, reader = self.engine(), self.engine()
        hashes = random_keys(3)
        self.fill(writer, [0, 1, 2], 0, [1, 2])
        writer.backup(hashes, [0, 1, 2], 0, [1, 2])
        got = reader.prefetch(hashes + random_keys(1), [4, 5, 6, 7], 2, [6, 7])
        self.assertEqual({"kv": 3}, got, "the fourth KV page is missing: three come, in order")

    def test_mla_ranks_share_all_but_the_state(self):
        rank0, rank1 = self.engine(mla=True, tp_rank=0, tp_size=2), self.engine(mla=True, tp_rank=1, tp_size=2)
        hashes = random_keys(2)
        for ctl in (rank0, rank1):
            self.fill(ctl, [0, 1], 3, [0, 1])
        self.assertEqual({"mamba": 1, "swa": 2, "kv": 2}, rank1.backup(hashes, [0, 1], 3, [0, 1]),
                         "rank 1 answers True for the parts rank 0 writes")
        self.assertEqual(0, rank1.storage_hit_query(hashes), "rank 1 wrote its state only: no KV yet")
        rank0.backup(hashes, [0, 1], 3, [0, 1])
        self.assertEqual(2, rank1.storage_hit_query(hashes), "rank 0's KV and window, rank 1's own state")
        self.assertNotEqual(rank0.backend._part_namespace("mamba"), rank1.backend._part_namespace("mamba"))
        self.assertEqual(rank0.backend._part_namespace("swa"), rank1.backend._part_namespace("swa"))
        reader = self.engine(mla=True, tp_rank=1, tp_size=2)
        reader.prefetch(hashes, [2, 3], 7, [2, 3])
        self.assertEqual(rank1.pools[hybrid.PoolName.MAMBA].slot(3), reader.pools[hybrid.PoolName.MAMBA].slot(7))
        self.assertEqual(self.kv_bytes(rank0, [0, 1]), self.kv_bytes(reader, [2, 3]))

    def test_the_kv_pool_registered_through_v2_is_the_one_used(self):
        kv = fake.FakeMHATokenToKVPoolHost("page_first", page_size=self.PAGE, dtype=fake.FLOAT8_E4M3FN)
        backend = self.backend(pool=hybrid.FakeHostPoolGroup(kv))  # no page addresses, no dtype
        self.assertEqual("bfloat16", backend.namespace.dtype, "the group alone says nothing of fp8")
        backend.register_mem_host_pool_v2(kv, hybrid.PoolName.KV)
        self.assertEqual("fp8_e4m3", backend.namespace.dtype)
        kv.fill_page(0, RNG)
        self.assertEqual([True], backend.batch_set_v1(random_keys(1), fake.FakeIndices(range(self.PAGE))))
        self.assertIs(True, backend._pool.zero_copy, "pages moved straight from the KV pool's memory")

    def test_an_mha_pool_beside_an_mla_model_is_per_rank(self):
        ctl = self.engine(mla=True, tp_rank=1, tp_size=2)
        swa = ctl.backend._part_namespace("swa")
        self.assertEqual((0, 1), (swa.tp_rank, swa.tp_size), "an MLA-shaped window: the same on every rank")
        self.assertEqual(1, ctl.backend._part_namespace("mamba").tp_rank)
        transfer = hybrid.PoolTransfer(hybrid.PoolName.SWA, host_indices=fake.FakeIndices(range(self.PAGE)),
                                       keys=random_keys(1), hit_policy=hybrid.PoolHitPolicy.TRAILING_PAGES)
        self.assertEqual({hybrid.PoolName.SWA: [True]}, ctl.backend.batch_set_v2([transfer]),
                         "rank 1 does not write a part every rank shares: True without sending")
        self.assertEqual({hybrid.PoolName.SWA: [False]}, ctl.backend.batch_get_v2([transfer]), "nothing was sent")
        mha_window = fake.FakeMHATokenToKVPoolHost("page_first", layer_num=1, page_size=self.PAGE)
        ctl.backend.register_mem_host_pool_v2(mha_window, hybrid.PoolName.SWA)
        self.assertEqual(1, ctl.backend._part_namespace("swa").tp_rank, "an MHA-shaped window splits heads by rank")
        self.assertEqual({hybrid.PoolName.SWA: [True]}, ctl.backend.batch_set_v2([transfer]))
        self.assertEqual({hybrid.PoolName.SWA: [True]}, ctl.backend.batch_get_v2([transfer]), "written by rank 1")

    def test_a_state_pool_without_addresses_is_copied_through_flat_pages(self):
        writer, reader = self.engine(), self.engine()
        for ctl in (writer, reader):
            ctl.pools[hybrid.PoolName.MAMBA].get_page_buffer_meta = None
        hashes = random_keys(2)
        self.fill(writer, [0, 1], 4, [0, 1])
        self.assertEqual(1, writer.backup(hashes, [0, 1], 4, [0, 1])["mamba"])
        self.assertEqual(1, reader.prefetch(hashes, [2, 3], 6, [2, 3])["mamba"])
        self.assertEqual(writer.pools[hybrid.PoolName.MAMBA].slot(4), reader.pools[hybrid.PoolName.MAMBA].slot(6))

    def test_registration_refuses_a_kv_shaped_pool_it_cannot_address(self):
        backend = self.backend(pool=fake.FakeMHATokenToKVPoolHost("page_first", page_size=self.PAGE))
        with self.assertRaisesRegex(ValueError, "layout"):
            backend.register_mem_host_pool_v2(fake.FakeMHATokenToKVPoolHost("page_head", page_size=self.PAGE),
                                              hybrid.PoolName.SWA)

    def test_failures_are_false_not_raised(self):
        ctl = self.engine()
        transfer = hybrid.PoolTransfer(hybrid.PoolName.MAMBA, host_indices=fake.FakeIndices([0, 1]),
                                       keys=random_keys(1), hit_policy=hybrid.PoolHitPolicy.TRAILING_PAGES)
        self.assertEqual({hybrid.PoolName.MAMBA: [False]}, ctl.backend.batch_get_v2([transfer]),
                         "two slots for one state: refused, as a failed page")


if __name__ == "__main__":
    unittest.main()
