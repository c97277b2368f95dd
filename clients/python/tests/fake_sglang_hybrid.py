"""A stand-in for the parts of SGLang that drive a storage backend for hybrid models, standard library only.

Each class or function names the SGLang file and function it mirrors. SGLang's main branch as read in 2026
(sources, not a release; its code is read, not copied): ``sglang/srt/mem_cache/hicache_storage.py`` (the v2 types),
``mem_cache/hybrid_cache/hybrid_cache_controller.py`` (``HybridCacheController``), ``mem_cache/pool_host/mamba.py``
(``MambaPoolHost``), ``mem_cache/pool_host/dsa.py`` (``DSAIndexerPoolHost``). Sliding-window layers have no host pool
class of their own in SGLang: an ordinary KV host pool holds them (``fake_sglang.FakeMHATokenToKVPoolHost`` here).

Not knowable from SGLang's published code, and so chosen here: the Mamba state's exact byte sizes per model (the
shapes below are small and arbitrary; only their structure, one temporal and several conv buffers per slot, follows
``MambaPoolHost``), and how the controller sizes its batches (one batch here).
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import random
from typing import Any, Dict, List, Optional

try:
    from . import fake_sglang as fake
except ImportError:  # run with tests/ on the path
    import fake_sglang as fake  # type: ignore[no-redef]

PLACEHOLDER = "__placeholder__"
"""``HybridCacheController``'s key for a trailing pool's page before the hit is known (``prefetch``)."""


class PoolName(str, enum.Enum):
    """Mirrors ``PoolName`` (``hicache_storage.py``): a str enum, so results may be looked up by either."""

    KV = "kv"
    MAMBA = "mamba"
    SWA = "swa"
    INDEXER = "indexer"

    def __str__(self) -> str:
        return self.value


class PoolHitPolicy(str, enum.Enum):
    """Mirrors ``PoolHitPolicy`` (``hicache_storage.py``)."""

    ALL_PAGES = "all_pages"
    TRAILING_PAGES = "trailing_pages"


@dataclasses.dataclass
class PoolTransfer:
    """Mirrors ``PoolTransfer`` (``hicache_storage.py``): mutable, the controller rewrites keys and indices."""

    name: PoolName
    host_indices: Optional[fake.FakeIndices] = None
    device_indices: Optional[Any] = None
    keys: Optional[List[str]] = None
    hit_policy: PoolHitPolicy = PoolHitPolicy.ALL_PAGES
    nodes_to_load: Optional[list] = None
    indices_from_pool: Optional[PoolName] = None


def count_pool_hits(results: Dict[Any, List[bool]]) -> Dict[str, int]:
    """Mirrors ``count_pool_hits`` (``hicache_storage.py``): per pool, the length of its leading run of True."""
    hits = {}
    for name, oks in results.items():
        run = 0
        for ok in oks:
            if not ok:
                break
            run += 1
        hits[str(name)] = run
    return hits


class FakeMambaPoolHost:
    """Mirrors ``MambaPoolHost`` (``pool_host/mamba.py``): page size 1 (one slot is one state), layout page_first;
    per slot a temporal (SSM) buffer and ``len(conv_bytes)`` conv buffers, each ``(size, L, 1, *shape)``.
    ``get_page_buffer_meta`` gives per slot the temporal pointer, then each conv pointer, of ``L * bytes`` each;
    a flat page is the same buffers one after another."""

    def __init__(self, size: int = 16, layer_num: int = 2, temporal_bytes: int = 48, conv_bytes=(24, 8)):
        self.page_size = 1
        self.layout = "page_first"
        self.size = size
        self.layer_num = layer_num
        self.widths = [layer_num * temporal_bytes] + [layer_num * b for b in conv_bytes]
        self.buffers = [(ctypes.c_char * (size * w))() for w in self.widths]
        self.dtype = fake.FakeDtype("float32", 4)

    @property
    def slot_bytes(self) -> int:
        return sum(self.widths)

    def get_size_per_token(self) -> int:
        return self.slot_bytes

    def slot(self, slot: int) -> bytes:
        return b"".join(buf[slot * w:(slot + 1) * w] for buf, w in zip(self.buffers, self.widths))

    def fill_slot(self, slot: int, rng: random.Random) -> None:
        self.set_from_flat_data_page(slot, rng.randbytes(self.slot_bytes))

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for slot in indices.tolist():
            for buf, w in zip(self.buffers, self.widths):
                ptrs.append(ctypes.addressof(buf) + slot * w)
                sizes.append(w)
        return ptrs, sizes

    def get_data_page(self, index, flat: bool = True) -> fake.FakeTensor:
        data = self.slot(int(index))
        return fake.FakeTensor(len(data), 1, data)

    def get_dummy_flat_data_page(self) -> fake.FakeTensor:
        return fake.FakeTensor(self.slot_bytes, 1)

    def set_from_flat_data_page(self, index, data_page) -> None:
        data = data_page.tobytes() if hasattr(data_page, "tobytes") else bytes(data_page)
        assert len(data) == self.slot_bytes
        at = 0
        for buf, w in zip(self.buffers, self.widths):
            buf[int(index) * w:(int(index) + 1) * w] = data[at:at + w]
            at += w


class FakeDSAIndexerPoolHost:
    """Mirrors ``DSAIndexerPoolHost`` (``pool_host/dsa.py``): the anchor KV pool's page size and slot numbering, a
    uint8 buffer of ``(pages, L, 1, stride)`` (page_first), one pointer per KV page of ``L * stride`` bytes."""

    def __init__(self, size: int = 64, page_size: int = 4, layer_num: int = 3, stride: int = 20):
        self.page_size = page_size
        self.layout = "page_first"
        self.size = size
        self.page_bytes = layer_num * stride
        self.buffer = (ctypes.c_char * (size // page_size * self.page_bytes))()
        self.dtype = fake.UINT8

    def page(self, first_slot: int) -> bytes:
        p = first_slot // self.page_size
        return self.buffer[p * self.page_bytes:(p + 1) * self.page_bytes]

    def fill_page(self, first_slot: int, rng: random.Random) -> None:
        p = first_slot // self.page_size
        self.buffer[p * self.page_bytes:(p + 1) * self.page_bytes] = rng.randbytes(self.page_bytes)

    def get_page_buffer_meta(self, indices):
        values = indices.tolist()
        ptrs = [ctypes.addressof(self.buffer) + (v // self.page_size) * self.page_bytes
                for v in values[::self.page_size]]
        return ptrs, [self.page_bytes] * len(ptrs)

    def get_data_page(self, index, flat: bool = True) -> fake.FakeTensor:
        data = self.page(int(index))
        return fake.FakeTensor(len(data), 1, data)

    def get_dummy_flat_data_page(self) -> fake.FakeTensor:
        return fake.FakeTensor(self.page_bytes, 1)

    def set_from_flat_data_page(self, index, data_page) -> None:
        data = data_page.tobytes() if hasattr(data_page, "tobytes") else bytes(data_page)
        p = int(index) // self.page_size
        self.buffer[p * self.page_bytes:(p + 1) * self.page_bytes] = data


class FakeHostPoolGroup:
    """Mirrors what ``HostPoolGroup`` (``pool_host/group.py``) passes on of its anchor KV pool, in the versions that
    pass on little: layout, page size, size and the flat-page calls, no ``get_page_buffer_meta`` and no dtype.
    Whether ``attach_storage_backend`` gives ``register_mem_pool_host`` the group or its anchor differs between
    the SGLang versions read; the backend takes the KV pool from ``register_mem_host_pool_v2`` either way."""

    def __init__(self, anchor):
        self.anchor = anchor
        self.layout = anchor.layout
        self.page_size = anchor.page_size
        self.size = anchor.size

    def get_data_page(self, index, flat: bool = True):
        return self.anchor.get_data_page(index, flat)

    def get_dummy_flat_data_page(self):
        return self.anchor.get_dummy_flat_data_page()

    def set_from_flat_data_page(self, index, data_page) -> None:
        self.anchor.set_from_flat_data_page(index, data_page)


class FakeHybridController:
    """The backend calls of ``HybridCacheController`` (``hybrid_cache_controller.py``) for one TP rank: pools
    registered as ``attach_storage_backend`` does, the storage hit query of ``_storage_hit_query``, the backup of
    ``_page_backup`` (side pools first through ``batch_set_v2``, then the KV through ``batch_set_v1``), and the
    prefetch of ``_page_transfer`` / ``_page_transfer_sidecar`` (KV and KV-derived pools per batch, then, only when
    every KV page came, the trailing pools with their keys set to the hit's last pages: ``_sync_trailing_keys``)."""

    def __init__(self, backend, kv_pool, swa_pool=None, mamba_pool=None, indexer_pool=None, swa_window_pages=2):
        self.backend = backend
        self.kv = kv_pool
        self.pools = {PoolName.KV: kv_pool, PoolName.SWA: swa_pool, PoolName.MAMBA: mamba_pool,
                      PoolName.INDEXER: indexer_pool}
        self.swa_window_pages = swa_window_pages
        backend.register_mem_pool_host(kv_pool)
        for name, pool in self.pools.items():
            if pool is not None:
                backend.register_mem_host_pool_v2(pool, name)

    def _kv_slots(self, pages: List[int]) -> fake.FakeIndices:
        ps = self.kv.page_size
        return fake.FakeIndices(p * ps + t for p in pages for t in range(ps))

    def query_transfers(self) -> List[PoolTransfer]:
        """What the tree's components build for a prefetch (``build_hicache_transfers(PREFETCH)``): placeholders."""
        out = []
        if self.pools[PoolName.MAMBA] is not None:
            out.append(PoolTransfer(PoolName.MAMBA, keys=[PLACEHOLDER], hit_policy=PoolHitPolicy.TRAILING_PAGES))
        if self.pools[PoolName.SWA] is not None:
            out.append(PoolTransfer(PoolName.SWA, keys=[PLACEHOLDER] * self.swa_window_pages,
                                    hit_policy=PoolHitPolicy.TRAILING_PAGES))
        if self.pools[PoolName.INDEXER] is not None:
            out.append(PoolTransfer(PoolName.INDEXER, indices_from_pool=PoolName.KV))
        return out

    def storage_hit_query(self, hashes: List[str]) -> int:
        """Mirrors ``_storage_hit_query``: one ``batch_exists_v2`` over the whole chain; the pages every pool can
        restore."""
        result = self.backend.batch_exists_v2(hashes, self.query_transfers())
        return int(result.kv_hit_pages)

    def backup(self, hashes: List[str], kv_pages: List[int], mamba_slot: Optional[int],
               swa_pages: Optional[List[int]]) -> Dict[str, int]:
        """Mirrors ``_page_backup`` for one node: side pools (``batch_set_v2``) then the KV (``batch_set_v1``).
        The Mamba state is keyed by the node's last page hash, the SWA pages by the node's trailing hashes."""
        transfers = []
        if mamba_slot is not None:
            transfers.append(PoolTransfer(PoolName.MAMBA, host_indices=fake.FakeIndices([mamba_slot]),
                                          keys=[hashes[-1]], hit_policy=PoolHitPolicy.TRAILING_PAGES))
        if swa_pages is not None:
            transfers.append(PoolTransfer(PoolName.SWA, host_indices=self._kv_slots(swa_pages),
                                          keys=hashes[-len(swa_pages):], hit_policy=PoolHitPolicy.TRAILING_PAGES))
        if self.pools[PoolName.INDEXER] is not None:  # KV-derived: the KV's indices and keys
            transfers.append(PoolTransfer(PoolName.INDEXER, host_indices=self._kv_slots(kv_pages), keys=list(hashes),
                                          indices_from_pool=PoolName.KV))
        hits = count_pool_hits(self.backend.batch_set_v2(transfers)) if transfers else {}
        kv_ok = self.backend.batch_set_v1(list(hashes), self._kv_slots(kv_pages))
        hits["kv"] = count_pool_hits({"kv": kv_ok})["kv"]
        return hits

    def prefetch(self, hashes: List[str], kv_pages: List[int], mamba_slot: Optional[int],
                 swa_pages: Optional[List[int]]) -> Dict[str, int]:
        """Mirrors ``_page_transfer`` then ``_page_transfer_sidecar`` for ``hashes`` (the hit): per pool, the
        leading pages that came (0 for the trailing pools when not every KV page came)."""
        kv_ok = self.backend.batch_get_v1(list(hashes), self._kv_slots(kv_pages))
        hits = {"kv": count_pool_hits({"kv": kv_ok})["kv"]}
        if self.pools[PoolName.INDEXER] is not None:
            got = self.backend.batch_get_v2([PoolTransfer(PoolName.INDEXER, host_indices=self._kv_slots(kv_pages),
                                                          keys=list(hashes), indices_from_pool=PoolName.KV)])
            hits.update(count_pool_hits(got))
        if hits["kv"] < len(hashes):
            return hits  # the sidecar transfer runs only when every KV page came
        trailing = []
        for transfer in self.query_transfers():
            if transfer.hit_policy != PoolHitPolicy.TRAILING_PAGES:
                continue
            window = len(transfer.keys)
            transfer.keys = list(hashes[-window:])  # _sync_trailing_keys: the hit's last pages
            if transfer.name == PoolName.MAMBA:
                transfer.host_indices = fake.FakeIndices([mamba_slot])
            else:
                transfer.host_indices = self._kv_slots(swa_pages[-window:])
            trailing.append(transfer)
        if trailing:
            hits.update(count_pool_hits(self.backend.batch_get_v2(trailing)))
        return hits
