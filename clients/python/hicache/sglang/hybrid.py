"""SGLang's hybrid models on the daemon: the v2 storage interface (``register_mem_host_pool_v2``,
``batch_exists_v2``, ``batch_get_v2``, ``batch_set_v2``) that SGLang's ``HybridCacheController``
(``sglang/srt/mem_cache/hybrid_cache/hybrid_cache_controller.py``, 2026) calls for the pools beside the KV.

Each pool is stored under a namespace of its own, the KV namespace with ``part=<pool>`` added to its extra key
(``"part=mamba"``, ``"lora-a/part=swa"``), so one page hash names every part of a prefix: the KV page, the sliding
window page, the Mamba state checkpointed at that page, the DSA indexer keys of that page. The pools:

=========================  ===================  ================================================================
pool (SGLang ``PoolName``)  hit policy           what one object holds (key: the KV page hash it belongs to)
=========================  ===================  ================================================================
``kv``                     (the anchor)         the KV page (v1 path, :class:`~hicache.sglang.pool.HostPool`)
``swa``, ``draft_swa``     trailing pages       a sliding-window KV page (a KV-shaped host pool)
``mamba``                  trailing pages (1)   the recurrent state (temporal + conv buffers) after that page
``indexer`` and the rest   all pages            the pool's page, in the order its ``get_page_buffer_meta`` gives
=========================  ===================  ================================================================

``batch_exists_v2`` answers the longest prefix that **every** pool can restore: the greatest page count ``e`` such
that KV holds pages ``[0, e)``, each all-pages pool holds ``[0, e)``, and each trailing pool of window ``W`` holds
``[e - W, e)``. It is not the minimum of each pool's own longest prefix: with trailing pools that differs when their
pages have gaps (SGLang issue #39147). A write that fails part-way therefore never makes a hit that restores wrong
state: the missing part makes that endpoint illegal.

Pools are rank-sharded like the KV, except on MLA models, where every pool but ``mamba`` is the same on every TP rank
(rank 0 writes it; the Mamba state stays per rank).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

from ..namespace import Namespace
from .pool import HostPool, ZeroCopyUnavailable, split_meta, to_int_list

KV = "kv"
ALL_PAGES = "all_pages"
TRAILING_PAGES = "trailing_pages"
KV_SHAPED = frozenset({"kv", "swa", "draft", "draft_swa"})
"""Pools that are KV host pools (MHA or MLA, a layout): their pages go in the KV wire order of ``pool.py``."""
PER_RANK_UNDER_MLA = frozenset({"mamba"})


def pool_name(name: Any) -> str:
    """A pool's name as text: SGLang's ``PoolName`` is a str enum (``PoolName.MAMBA`` is ``"mamba"``)."""
    return str(getattr(name, "value", name))


def hit_policy(transfer: Any) -> str:
    """The transfer's ``PoolHitPolicy`` as text; ALL_PAGES when it has none (SGLang's default)."""
    policy = getattr(transfer, "hit_policy", None)
    return str(getattr(policy, "value", policy)) if policy is not None else ALL_PAGES


def part_extra(extra: str, part: str) -> str:
    """The extra key of a part's namespace: ``part=<pool>`` after the KV's own (joined with ``/``)."""
    return f"{extra}/part={part}" if extra else f"part={part}"


def restorable_pages(kv_pages: int, all_pages_bounds: Sequence[int],
                     trailing: Sequence[tuple[int, Callable[[int, int], int]]]) -> int:
    """The greatest endpoint ``e <= kv_pages`` (in pages) that every pool can restore.

    ``all_pages_bounds``: per all-pages pool, how many leading pages it holds. ``trailing``: per trailing pool its
    window ``W`` and ``present(lo, hi)``, how many pages from ``lo`` on (of ``[lo, hi)``) it holds. ``e`` is legal
    for a trailing pool when it holds ``[max(0, e - W), e)``; a missing page ``m`` rules out every endpoint in
    ``(m, m + W]``, so the search jumps to ``m``: one query per missing page met, not per page."""
    e = min([kv_pages, *all_pages_bounds])
    while e > 0:
        for window, present in trailing:
            lo = max(0, e - max(1, window))
            held = present(lo, e)
            if held < e - lo:
                e = lo + held  # the first missing page: the greatest endpoint whose window leaves it out
                break
        else:
            return e
    return 0


class SidePool:
    """A host pool registered through ``register_mem_host_pool_v2``, with its page addressing. Page ``i`` of a
    transfer is the pool's slot ``host_indices[i * page_size]``; its bytes are where ``get_page_buffer_meta``
    says (zero copy), else a flat page (``get_data_page`` / ``set_from_flat_data_page``). Thread-safe after
    construction, as :class:`HostPool`."""

    def __init__(self, name: str, pool: Any):
        self.name = name
        self.pool = pool
        # A KV-shaped pool's MHA or MLA shape is its own (an MLA model's sliding window may be either); whether the
        # ranks share it is the model's (PartNamespaces).
        self.kv_shaped: Optional[HostPool] = HostPool(pool, False) if name in KV_SHAPED else None
        page_size = getattr(pool, "page_size", None)
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"the {name} host pool's page_size is {page_size!r}")
        self.page_size: int = page_size

    def describe(self) -> str:
        if self.kv_shaped is not None:
            return f"{self.name}: {self.kv_shaped.describe()}"
        return f"{self.name}: {type(self.pool).__name__}, page {self.page_size}"

    def slots(self, host_indices: Any, pages: int) -> list[int]:
        values = to_int_list(host_indices)
        if len(values) != pages * self.page_size:
            raise ValueError(f"{self.name}: {len(values)} host indices for {pages} pages of {self.page_size} slots")
        return values[::self.page_size]

    def parts(self, host_indices: Any, pages: int) -> Optional[list[list[tuple[int, int]]]]:
        """Per page its ``(address, length)`` parts, or None when the pool gives no usable addresses."""
        if self.kv_shaped is not None:
            try:
                return self.kv_shaped.zero_copy_pages(host_indices, pages)
            except ZeroCopyUnavailable:
                return None
        getter = getattr(self.pool, "get_page_buffer_meta", None)
        if not callable(getter) or not pages:
            return None
        try:
            ptrs, sizes = split_meta(getter(host_indices))
        except Exception:  # no meta for this pool or these indices (ZeroCopyUnavailable included): copy instead
            return None
        if len(ptrs) % pages:
            return None
        per_page = len(ptrs) // pages
        return [[(ptrs[p * per_page + i], sizes[p * per_page + i]) for i in range(per_page)] for p in range(pages)]

    def flat_page(self, slot: int) -> Any:
        return self.pool.get_data_page(slot, True)

    def staging_page(self) -> Any:
        return self.pool.get_dummy_flat_data_page()

    def store_flat_page(self, slot: int, flat: Any) -> None:
        self.pool.set_from_flat_data_page(slot, flat)


@dataclasses.dataclass(frozen=True)
class PartNamespaces:
    """The namespaces of a backend's parts, from its KV namespace and its TP rank."""

    kv: Namespace
    tp_rank: int
    tp_size: int
    is_mla: bool

    def per_rank(self, part: str, override: Optional[bool] = None) -> bool:
        """Whether each TP rank has its own ``part``: always on MHA models; on MLA models only the Mamba state, or
        a pool whose own shape says so (``override``: an MHA-shaped pool beside an MLA model)."""
        if override is not None:
            return override
        return not self.is_mla or part in PER_RANK_UNDER_MLA

    def of(self, part: str, per_rank: Optional[bool] = None) -> Namespace:
        if part == KV:
            return self.kv
        own = self.per_rank(part, per_rank)
        return dataclasses.replace(self.kv, tp_rank=self.tp_rank if own else 0, tp_size=self.tp_size if own else 1,
                                   extra=part_extra(self.kv.extra, part))

    def writes(self, part: str, per_rank: Optional[bool] = None) -> bool:
        """Whether this rank stores ``part``: always, but for a part every MLA rank shares (rank 0 writes it)."""
        return self.per_rank(part, per_rank) or self.tp_rank == 0


__all__ = ["ALL_PAGES", "KV", "PartNamespaces", "SidePool", "TRAILING_PAGES", "hit_policy", "part_extra",
           "pool_name", "restorable_pages"]
