"""SGLang's storage interface when SGLang is installed, small stand-ins with the same names when it is not.

SGLang's ``dynamic`` storage backend refuses a class that does not subclass its ``HiCacheStorage``
(``StorageBackendFactory._load_backend_class``), so with SGLang installed the backend must derive from the real
one. Without SGLang (tests, tools) the stand-ins below have the methods of SGLang's interface
(``sglang/srt/mem_cache/hicache_storage.py`` as of 2026: v1, and v2 for hybrid models), so the backend is the same
code either way.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:
    # mypy checks the backend against the stand-ins below, which have the methods of SGLang's interface; SGLang
    # itself (optional here, and without type information) is not looked at.
    SGLANG_AVAILABLE: bool
else:
    try:  # pragma: no cover - depends on the environment
        from sglang.srt.mem_cache.hicache_storage import (
            HiCacheStorage,
            HiCacheStorageConfig,
            HiCacheStorageExtraInfo,
        )

        SGLANG_AVAILABLE = True
    except Exception:  # ImportError, or SGLang present but broken (no torch, no GPU libraries...)
        SGLANG_AVAILABLE = False

if TYPE_CHECKING or not SGLANG_AVAILABLE:
    @dataclasses.dataclass
    class HiCacheStorageConfig:
        """Stand-in for SGLang's ``HiCacheStorageConfig`` (the fields the backend reads; later ones defaulted)."""

        tp_rank: int = 0
        tp_size: int = 1
        is_mla_model: bool = False
        is_page_first_layout: bool = False
        model_name: Optional[str] = None
        extra_config: Optional[Dict[str, Any]] = None
        pp_rank: int = 0
        pp_size: int = 1
        attn_cp_rank: int = 0
        attn_cp_size: int = 1
        enable_storage_metrics: bool = False
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False

    @dataclasses.dataclass
    class HiCacheStorageExtraInfo:
        """Stand-in for SGLang's ``HiCacheStorageExtraInfo``."""

        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[Dict[str, Any]] = None

    class HiCacheStorage:
        """Stand-in for SGLang's ``HiCacheStorage`` ABC: the same method names and defaults (§2.1)."""

        def register_mem_pool_host(self, mem_pool_host: Any) -> None:
            self.mem_pool_host = mem_pool_host

        def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
            """SGLang's default: keeps the pool under its name (a ``PoolName``, a str enum) in
            ``registered_pools``."""
            pools: Dict[str, Any] = getattr(self, "registered_pools", None) or {}
            pools[str(getattr(host_pool_name, "value", host_pool_name))] = host_pool
            self.registered_pools = pools

        def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None,
                            extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Any:
            raise NotImplementedError()

        def batch_get_v2(self, transfers: List[Any],
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Dict[str, List[bool]]:
            raise NotImplementedError()

        def batch_set_v2(self, transfers: List[Any],
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Dict[str, List[bool]]:
            raise NotImplementedError()

        def batch_get_v1(self, keys: List[str], host_indices: Any,
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
            raise NotImplementedError()

        def batch_set_v1(self, keys: List[str], host_indices: Any,
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
            raise NotImplementedError()

        def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> Any:
            raise NotImplementedError()

        def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                      target_sizes: Optional[Any] = None) -> List[Any]:
            raise NotImplementedError()

        def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
                target_sizes: Optional[Any] = None) -> bool:
            raise NotImplementedError()

        def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                      target_sizes: Optional[Any] = None) -> bool:
            raise NotImplementedError()

        def exists(self, key: str) -> bool:
            raise NotImplementedError()

        def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
            for i, key in enumerate(keys):
                if not self.exists(key):
                    return i
            return len(keys)

        def clear(self) -> None:
            pass

        def get_stats(self) -> Any:
            return None


# Where SGLang keeps ``StorageMetrics``, newest first: ``observability/metrics_collector.py`` since early 2026,
# ``metrics/collector.py`` before. Its ``StorageMetricsCollector.log_storage_metrics`` asserts
# ``isinstance(..., StorageMetrics)`` against its own class, so ``get_stats`` must return that class, whichever
# module holds it; a stand-in makes SGLang's scheduler raise AssertionError under ``--enable-metrics``.
STORAGE_METRICS_MODULES = ("sglang.srt.observability.metrics_collector", "sglang.srt.metrics.collector")


@dataclasses.dataclass
class _StandInStorageMetrics:
    """Stand-in for SGLang's ``StorageMetrics`` when SGLang is not installed: the fields SGLang reads
    (``StorageMetricsCollector.log_storage_metrics``: the four lists; ``prefetch_stats`` in 2026 versions)."""

    prefetch_pgs: List[int] = dataclasses.field(default_factory=list)
    backup_pgs: List[int] = dataclasses.field(default_factory=list)
    prefetch_bandwidth: List[float] = dataclasses.field(default_factory=list)
    backup_bandwidth: List[float] = dataclasses.field(default_factory=list)
    prefetch_stats: Dict[str, float] = dataclasses.field(default_factory=dict)


@functools.lru_cache(maxsize=None)
def storage_metrics_class() -> type:
    """SGLang's ``StorageMetrics`` class from the first of :data:`STORAGE_METRICS_MODULES` that imports, else the
    stand-in. Resolved once: ``get_stats`` runs on every scheduler step when metrics are on."""
    for module_name in STORAGE_METRICS_MODULES:
        try:
            module = importlib.import_module(module_name)
            found: type = getattr(module, "StorageMetrics")
            return found
        except Exception:  # absent (ImportError), moved, or SGLang present but broken
            continue
    return _StandInStorageMetrics


def new_storage_metrics() -> Any:
    """An empty ``StorageMetrics`` of :func:`storage_metrics_class`. Either way it has the four lists and accepts
    extra attributes."""
    return storage_metrics_class()()


@dataclasses.dataclass
class _StandInPoolTransferResult:
    """Stand-in for SGLang's ``PoolTransferResult`` (``hicache_storage.py``, 2026): ``kv_hit_pages`` is the prefix
    every pool can restore; ``extra_pool_hit_pages`` what each pool alone could (``"kv"`` included)."""

    kv_hit_pages: int = 0
    extra_pool_hit_pages: Dict[str, int] = dataclasses.field(default_factory=dict)


@functools.lru_cache(maxsize=None)
def pool_transfer_result_class() -> type:
    """SGLang's ``PoolTransferResult`` when SGLang has it (its hybrid controller reads the fields by name), else the
    stand-in."""
    try:
        module = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
        found: type = getattr(module, "PoolTransferResult")
        return found
    except Exception:
        return _StandInPoolTransferResult


def new_pool_transfer_result(kv_hit_pages: int, extra_pool_hit_pages: Dict[str, int]) -> Any:
    """A ``PoolTransferResult`` of :func:`pool_transfer_result_class`, built by keyword."""
    return pool_transfer_result_class()(kv_hit_pages=kv_hit_pages, extra_pool_hit_pages=extra_pool_hit_pages)


__all__ = ["HiCacheStorage", "HiCacheStorageConfig", "HiCacheStorageExtraInfo", "SGLANG_AVAILABLE",
           "STORAGE_METRICS_MODULES", "new_pool_transfer_result", "new_storage_metrics", "pool_transfer_result_class",
           "storage_metrics_class"]
