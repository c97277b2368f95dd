"""A stand-in for SGLang's host KV pools (``MHATokenToKVPoolHost``, ``MLATokenToKVPoolHost``), standard library only.

The host buffer is one ``ctypes`` array shaped as SGLang shapes it (N slots, P = N / page pages, L layers,
H heads, D head dim; MLA: no leading 2, H = 1, D = kv_lora_rank + qk_rope_head_dim):

====================  ========================  ========================
layout                MHA                       MLA
====================  ========================  ========================
layer_first           [2, L, N, H, D]           [L, N, 1, d]
page_first            [2, N, L, H, D]           [N, L, 1, d]
page_first_direct     [2, P, L, page, H, D]     [P, L, page, 1, d]
====================  ========================  ========================

``get_page_buffer_meta``, ``get_data_page``, ``get_dummy_flat_data_page`` and ``set_from_flat_data_page`` follow
SGLang's ``memory_pool_host.py``: the meta's pointer arithmetic is SGLang's own formulas (not derived from the
shapes above, so a mismatch between the two shows), and flat pages are the row-major flattening of the same
slices SGLang takes (``kv_buffer[:, :, i:i+page]`` for layer_first, ``kv_buffer[:, i:i+page]`` for page_first,
``kv_buffer[:, i // page]`` for page_first_direct). Tensors are imitated by :class:`FakeTensor` (``data_ptr``,
``numel``, ``element_size``, ``tolist``), so the backend takes the same code path as with torch.

Beyond the pools, the pieces of SGLang that call the backend or read what it returns, each naming the SGLang file
and function it stands for (SGLang main as of mid-2026; its code is read, not copied):

* :class:`FakeAsymmetricMHATokenToKVPoolHost`: the host pool of models whose K and V head dims differ.
* :func:`zero_copy_selected`: how ``HiCacheController`` reads ``interface_v1``.
* :func:`draft_page_set_generic` / :func:`draft_page_get_generic`: the ``"<hash>.draft"`` pages of speculative
  decoding.
* :func:`generic_page_get`: SGLang's copying read path.
* :func:`installed_metrics_modules`: ``StorageMetrics`` and ``StorageMetricsCollector`` under either module path.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import random
import sys
import types
from typing import Dict, List, Optional

CPU = types.SimpleNamespace(type="cpu")


class FakeDtype:
    """What SGLang's pools expose of a ``torch.dtype`` and the backend reads: ``str()`` and ``itemsize``."""

    def __init__(self, name: str, itemsize: int):
        self.name = name
        self.itemsize = itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__


BFLOAT16 = FakeDtype("bfloat16", 2)
FLOAT16 = FakeDtype("float16", 2)
UINT8 = FakeDtype("uint8", 1)
FLOAT8_E4M3FN = FakeDtype("float8_e4m3fn", 1)


class FakeIndices:
    """A 1-D int64 CPU ``torch.Tensor`` of host indices, as ``HiCacheController`` passes them (``tolist``,
    ``len``, slicing)."""

    def __init__(self, values):
        self._values = [int(v) for v in values]

    def tolist(self) -> list:
        return list(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return FakeIndices(self._values[item])
        return self._values[item]

    def __iter__(self):
        return iter(self._values)


class FakeTensor:
    """A flat, contiguous CPU ``torch.Tensor`` of ``nbytes`` bytes (owned ctypes memory), as SGLang's
    ``get_data_page`` returns (``data_ptr``, ``numel``, ``element_size``)."""

    def __init__(self, nbytes: int, itemsize: int = 1, data: bytes = b""):
        self._itemsize = itemsize
        self._memory = (ctypes.c_char * nbytes)()
        self.device = CPU
        if data:
            ctypes.memmove(self._memory, data, len(data))

    def data_ptr(self) -> int:
        return ctypes.addressof(self._memory)

    def numel(self) -> int:
        return len(self._memory) // self._itemsize

    def element_size(self) -> int:
        return self._itemsize

    def is_contiguous(self) -> bool:
        return True

    def tobytes(self) -> bytes:
        return bytes(self._memory.raw)


class FakeDevicePool:
    """Mirrors what a host pool keeps of its device pool (``MHATokenToKVPool`` in
    ``sglang/srt/mem_cache/memory_pool.py``): its ``dtype`` (fp8 caches keep ``uint8`` as ``store_dtype`` in the host)."""

    def __init__(self, dtype: FakeDtype):
        self.dtype = dtype


class _FakeHostPool:
    """Mirrors ``HostKVCache`` (``sglang/srt/mem_cache/pool_host/base.py`` since the 2026 split into
    ``pool_host/``; ``memory_pool_host.py`` before): common part of the MHA (parts = 2: K, V) and MLA (parts = 1)
    pools. The backend imports neither module (it reads attributes), so both SGLang layouts work alike."""

    LAYOUTS = ("layer_first", "page_first", "page_first_direct")

    def __init__(self, parts: int, layout: str, layer_num: int, head_num: int, head_dim: int, size: int,
                 page_size: int, dtype: FakeDtype, layer_first_meta: bool, store_dtype: FakeDtype = None):
        if layout not in self.LAYOUTS and layout != "page_head":
            raise ValueError(layout)
        assert size % page_size == 0
        self.parts = parts
        self.layout = layout
        self.layer_num = layer_num
        self.head_num = head_num
        self.head_dim = head_dim
        self.size = size
        self.page_size = page_size
        self.page_num = size // page_size
        self.device_pool = FakeDevicePool(dtype)
        self.dtype = store_dtype or dtype  # SGLang: the host pool's dtype is the device pool's store_dtype
        self.layer_first_meta = layer_first_meta
        self.row_bytes = head_num * head_dim * self.dtype.itemsize
        self.kv_buffer = (ctypes.c_char * (parts * layer_num * size * self.row_bytes))()
        self.base = ctypes.addressof(self.kv_buffer)

    # ---------------------------------------------------------------- the shape (independent of SGLang's formulas)

    def row_offset(self, part: int, layer: int, slot: int) -> int:
        """Byte offset of one row (token ``slot``, ``layer``, ``part``) in the host buffer, from its shape."""
        L, N, ps = self.layer_num, self.size, self.page_size
        if self.layout == "layer_first":
            row = (part * L + layer) * N + slot
        elif self.layout == "page_first":
            row = (part * N + slot) * L + layer
        else:  # page_first_direct
            row = ((part * self.page_num + slot // ps) * L + layer) * ps + slot % ps
        return row * self.row_bytes

    def row(self, part: int, layer: int, slot: int) -> bytes:
        offset = self.row_offset(part, layer, slot)
        return self.kv_buffer[offset:offset + self.row_bytes]

    def set_row(self, part: int, layer: int, slot: int, data: bytes) -> None:
        offset = self.row_offset(part, layer, slot)
        self.kv_buffer[offset:offset + self.row_bytes] = data

    def page_rows(self, first: int) -> dict:
        """Every row of the page at slot ``first``: (part, layer, token) -> bytes."""
        return {(p, l, t): self.row(p, l, first + t) for p in range(self.parts) for l in range(self.layer_num)
                for t in range(self.page_size)}

    def fill_page(self, first: int, rng: random.Random) -> None:
        for p in range(self.parts):
            for l in range(self.layer_num):
                for t in range(self.page_size):
                    self.set_row(p, l, first + t, rng.randbytes(self.row_bytes))

    def snapshot(self) -> bytes:
        return self.kv_buffer.raw

    # ------------------------------------------------------------------------------------------- SGLang's API

    @property
    def page_bytes(self) -> int:
        return self.get_size_per_token() * self.page_size

    def get_size_per_token(self) -> int:
        return self.parts * self.layer_num * self.head_num * self.head_dim * self.dtype.itemsize

    def get_ksize_per_token(self) -> int:
        return self.layer_num * self.head_num * self.head_dim * self.dtype.itemsize

    def get_page_buffer_meta(self, indices):
        """SGLang's formulas: ``(ptr_list, element_size_list)``."""
        assert len(indices) % self.page_size == 0
        indices = indices.tolist()
        item = self.dtype.itemsize
        L, N, H, D, ps = self.layer_num, self.size, self.head_num, self.head_dim, self.page_size
        ptr_list = []
        if self.layout == "layer_first":
            if not self.layer_first_meta:
                raise ValueError(f"Unsupported layout: {self.layout}")
            v_offset = L * N * H * D * item
            for index in range(0, len(indices), ps):
                for layer_id in range(L):
                    k_ptr = self.base + indices[index] * H * D * item + layer_id * N * H * D * item
                    ptr_list.append(k_ptr)
                    if self.parts == 2:
                        ptr_list.append(k_ptr + v_offset)
            element_size = item * ps * H * D
        elif self.layout in ("page_first", "page_first_direct"):
            v_offset = L * N * H * D * item
            for index in range(0, len(indices), ps):
                k_ptr = self.base + indices[index] * L * H * D * item
                ptr_list.append(k_ptr)
                if self.parts == 2:
                    ptr_list.append(k_ptr + v_offset)
            element_size = L * item * ps * H * D
        else:
            raise ValueError(f"Unsupported layout: {self.layout}")
        return ptr_list, [element_size] * len(ptr_list)

    def _flat_order(self):
        """(part, layer, token) in the row-major order of SGLang's flat page for this layout."""
        P, L, T = range(self.parts), range(self.layer_num), range(self.page_size)
        if self.layout == "page_first":  # kv_buffer[:, i:i+page] -> [2, page, L, H, D]
            return [(p, l, t) for p in P for t in T for l in L]
        # layer_first: kv_buffer[:, :, i:i+page] -> [2, L, page, H, D]; page_first_direct: [2, 1, L, page, H, D]
        return [(p, l, t) for p in P for l in L for t in T]

    def get_data_page(self, index, flat: bool = True) -> FakeTensor:
        index = int(index)
        data = b"".join(self.row(p, l, index + t) for p, l, t in self._flat_order())
        return FakeTensor(len(data), self.dtype.itemsize, data)

    def get_dummy_flat_data_page(self) -> FakeTensor:
        return FakeTensor(self.page_bytes, self.dtype.itemsize)

    def set_from_flat_data_page(self, index, data_page) -> None:
        index = int(index)
        data = data_page.tobytes() if hasattr(data_page, "tobytes") else bytes(data_page)
        assert len(data) == self.page_bytes, (len(data), self.page_bytes)
        for i, (p, l, t) in enumerate(self._flat_order()):
            self.set_row(p, l, index + t, data[i * self.row_bytes:(i + 1) * self.row_bytes])


class FakeMHATokenToKVPoolHost(_FakeHostPool):
    """Mirrors ``MHATokenToKVPoolHost`` (``pool_host/mha.py``; ``memory_pool_host.py`` before 2026)."""
    def __init__(self, layout: str, layer_num: int = 3, head_num: int = 2, head_dim: int = 8, size: int = 64,
                 page_size: int = 4, dtype: FakeDtype = BFLOAT16, layer_first_meta: bool = True,
                 store_dtype: FakeDtype = None):
        super().__init__(2, layout, layer_num, head_num, head_dim, size, page_size, dtype, layer_first_meta,
                         store_dtype)


class FakeMLATokenToKVPoolHost(_FakeHostPool):
    """Mirrors ``MLATokenToKVPoolHost`` (``pool_host/mla.py``; ``memory_pool_host.py`` before 2026)."""
    def __init__(self, layout: str, layer_num: int = 3, kv_lora_rank: int = 12, qk_rope_head_dim: int = 4,
                 size: int = 64, page_size: int = 4, dtype: FakeDtype = BFLOAT16, layer_first_meta: bool = False,
                 store_dtype: FakeDtype = None):
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim
        super().__init__(1, layout, layer_num, 1, kv_lora_rank + qk_rope_head_dim, size, page_size, dtype,
                         layer_first_meta, store_dtype)


def storage_config(tp_rank: int = 0, tp_size: int = 1, is_mla_model: bool = False, model_name: str = "test/model",
                   extra_config: dict = None, is_page_first_layout: bool = False, pp_rank: int = 0, pp_size: int = 1,
                   attn_cp_rank: int = 0, attn_cp_size: int = 1):
    """Mirrors ``HiCacheStorageConfig`` (``sglang/srt/mem_cache/hicache_storage.py``, 2026: with the pipeline,
    context-parallel and data-parallel fields): an object with its fields."""
    return types.SimpleNamespace(tp_rank=tp_rank, tp_size=tp_size, is_mla_model=is_mla_model, model_name=model_name,
                                 extra_config=extra_config, is_page_first_layout=is_page_first_layout,
                                 pp_rank=pp_rank, pp_size=pp_size, attn_cp_rank=attn_cp_rank,
                                 attn_cp_size=attn_cp_size, enable_storage_metrics=False, dp_rank=0, dp_size=1,
                                 tp_lcm_size=None, should_split_heads=False)


class FakeAsymmetricMHATokenToKVPoolHost:
    """Mirrors ``AsymmetricMHATokenToKVPoolHost`` (``sglang/srt/mem_cache/pool_host/mha.py``; before the 2026 split,
    ``memory_pool_host.py``), the pool SGLang's ``get_mha_host_pool_cls`` picks when ``head_dim != v_head_dim``
    (e.g. MiMo-V2). K and V live in two buffers of their own widths, only ``page_first`` ([N, L, H, Dk] and
    [N, L, H, Dv]) and ``page_first_direct`` ([P, L, page, H, Dk] and [P, L, page, H, Dv]) exist (SGLang's
    ``init_kv_buffer`` raises for the others), ``get_page_buffer_meta`` gives per page a K and a V pointer with
    their own sizes, and the flat-page methods raise ``NotImplementedError`` as SGLang's do."""

    LAYOUTS = ("page_first", "page_first_direct")

    def __init__(self, layout: str, layer_num: int = 3, head_num: int = 2, head_dim: int = 12, v_head_dim: int = 8,
                 size: int = 64, page_size: int = 4, dtype: FakeDtype = BFLOAT16):
        if layout not in self.LAYOUTS:
            raise ValueError(f"Unsupported layout for models with head_dim != v_head_dim: {layout}; expected "
                             "'page_first' or 'page_first_direct'.")
        assert size % page_size == 0
        self.parts = 2
        self.layout = layout
        self.layer_num = layer_num
        self.head_num = head_num
        self.head_dim = head_dim
        self.v_head_dim = v_head_dim
        self.size = size
        self.page_size = page_size
        self.page_num = size // page_size
        self.device_pool = FakeDevicePool(dtype)
        self.dtype = dtype
        self.part_row_bytes = (head_num * head_dim * dtype.itemsize, head_num * v_head_dim * dtype.itemsize)
        self.k_buffer = (ctypes.c_char * (layer_num * size * self.part_row_bytes[0]))()
        self.v_buffer = (ctypes.c_char * (layer_num * size * self.part_row_bytes[1]))()
        self.buffers = (self.k_buffer, self.v_buffer)

    # ---------------------------------------------------------------- the shape (independent of SGLang's formulas)

    def _row(self, part: int, layer: int, slot: int) -> tuple:
        L, ps = self.layer_num, self.page_size
        if self.layout == "page_first":
            row = slot * L + layer
        else:  # page_first_direct
            row = ((slot // ps) * L + layer) * ps + slot % ps
        width = self.part_row_bytes[part]
        return self.buffers[part], row * width, width

    def row(self, part: int, layer: int, slot: int) -> bytes:
        buffer, offset, width = self._row(part, layer, slot)
        return buffer[offset:offset + width]

    def set_row(self, part: int, layer: int, slot: int, data: bytes) -> None:
        buffer, offset, width = self._row(part, layer, slot)
        buffer[offset:offset + width] = data

    def page_rows(self, first: int) -> dict:
        return {(p, l, t): self.row(p, l, first + t) for p in range(2) for l in range(self.layer_num)
                for t in range(self.page_size)}

    def fill_page(self, first: int, rng: random.Random) -> None:
        for (p, l, t) in self.page_rows(first):
            self.set_row(p, l, first + t, rng.randbytes(self.part_row_bytes[p]))

    def wire_page(self, first: int) -> bytes:
        """The page as it goes on the wire: the K blob, then the V blob, each in the buffer's own row order
        ([token][layer] for page_first, [layer][token] for page_first_direct)."""
        if self.layout == "page_first":
            order = [(l, t) for t in range(self.page_size) for l in range(self.layer_num)]
        else:
            order = [(l, t) for l in range(self.layer_num) for t in range(self.page_size)]
        return b"".join(self.row(p, l, first + t) for p in range(2) for l, t in order)

    def snapshot(self) -> bytes:
        return self.k_buffer.raw + self.v_buffer.raw

    # ------------------------------------------------------------------------------------------- SGLang's API

    @property
    def page_bytes(self) -> int:
        return self.get_size_per_token() * self.page_size

    def get_size_per_token(self) -> int:
        return (self.head_dim + self.v_head_dim) * self.head_num * self.layer_num * self.dtype.itemsize

    def get_ksize_per_token(self) -> int:
        return self.head_dim * self.head_num * self.layer_num * self.dtype.itemsize

    def get_page_buffer_meta(self, indices):
        """SGLang's formulas: per page ``[k_ptr, v_ptr]`` and ``[k_size, v_size]``."""
        assert len(indices) % self.page_size == 0
        indices = indices.tolist()
        item, L, H, ps = self.dtype.itemsize, self.layer_num, self.head_num, self.page_size
        k_size, v_size = L * item * ps * H * self.head_dim, L * item * ps * H * self.v_head_dim
        if self.layout == "page_first_direct":
            k_stride, v_stride = L * ps * H * self.head_dim, L * ps * H * self.v_head_dim
        else:
            k_stride, v_stride = L * H * self.head_dim, L * H * self.v_head_dim
        ptr_list, size_list = [], []
        for index in range(0, len(indices), ps):
            buffer_index = indices[index] // ps if self.layout == "page_first_direct" else indices[index]
            ptr_list += [ctypes.addressof(self.k_buffer) + buffer_index * k_stride * item,
                         ctypes.addressof(self.v_buffer) + buffer_index * v_stride * item]
            size_list += [k_size, v_size]
        return ptr_list, size_list

    @staticmethod
    def _flat_page_unsupported() -> NotImplementedError:
        return NotImplementedError("Models with head_dim != v_head_dim do not support the flat-page interface")

    def get_data_page(self, index, flat: bool = True):
        raise self._flat_page_unsupported()

    def get_dummy_flat_data_page(self):
        raise self._flat_page_unsupported()

    def set_from_flat_data_page(self, index, data_page) -> None:
        raise self._flat_page_unsupported()


# --------------------------------------------------------------------------- SGLang's callers of the backend

ZERO_COPY_BACKENDS = ("hf3fs", "mooncake", "eic", "nixl", "simm", "mori")


def zero_copy_selected(storage_backend_type: str, extra_config: dict) -> bool:
    """Mirrors ``HiCacheController.attach_storage_backend`` (``sglang/srt/managers/cache_controller.py``): the
    zero-copy page functions (``batch_get_v1`` / ``batch_set_v1``) for the built-in zero-copy backends, and for
    ``dynamic`` when ``bool(extra_config.get("interface_v1", 0))``; the copying ones otherwise."""
    return storage_backend_type in ZERO_COPY_BACKENDS or (
        storage_backend_type == "dynamic" and bool(extra_config.get("interface_v1", 0)))


def generic_page_get(backend, host_pool, hash_values: list, host_indices: FakeIndices) -> int:
    """Mirrors ``HiCacheController._generic_page_get`` (``cache_controller.py``), SGLang's read path without
    ``interface_v1``: dummy flat pages of the host pool, ``batch_get``, then ``set_from_flat_data_page`` per page up
    to the first miss. Returns the pages read."""
    page_size = host_pool.page_size
    dummy_page_dst = [host_pool.get_dummy_flat_data_page() for _ in hash_values]
    page_data = backend.batch_get(hash_values, dummy_page_dst)
    if page_data is None:
        return 0
    count = 0
    for i in range(len(hash_values)):
        if page_data[i] is None:
            break
        host_pool.set_from_flat_data_page(host_indices[i * page_size], page_data[i])
        count += 1
    return count


def draft_page_set_generic(backend, draft_pool, hash_values: list, host_indices: FakeIndices) -> None:
    """Mirrors ``HiCacheController._draft_page_set_generic`` (``cache_controller.py``, SGLang PR #21125, March to
    July 2026): after each backup batch, the draft model's pages of the same slots go to any backend without a
    draft path of its own (``dynamic`` included) through ``batch_set``, keyed ``"<hash>.draft"``."""
    draft_keys = [f"{h}.draft" for h in hash_values]
    draft_data = [draft_pool.get_data_page(host_indices[i * draft_pool.page_size]) for i in range(len(draft_keys))]
    backend.batch_set(draft_keys, draft_data)


def draft_page_get_generic(backend, draft_pool, hash_values: list, host_indices: FakeIndices) -> None:
    """Mirrors ``HiCacheController._draft_page_get_generic``: before each prefetch batch, ``batch_get`` of the
    ``"<hash>.draft"`` pages into dummy flat pages of the draft pool, then ``set_from_flat_data_page`` for each one
    found (best effort: a missing draft page is skipped)."""
    draft_keys = [f"{h}.draft" for h in hash_values]
    draft_dummy = [draft_pool.get_dummy_flat_data_page() for _ in draft_keys]
    draft_pages = backend.batch_get(draft_keys, draft_dummy)
    if draft_pages is None:
        return
    for i, page in enumerate(draft_pages):
        if page is not None:
            draft_pool.set_from_flat_data_page(host_indices[i * draft_pool.page_size], page)


# ------------------------------------------------------------------------------------------- SGLang's metrics

METRICS_MODULE = "sglang.srt.observability.metrics_collector"
"""Where SGLang keeps ``StorageMetrics`` since early 2026."""
OLD_METRICS_MODULE = "sglang.srt.metrics.collector"
"""Where it kept it before."""


def _metrics_module(name: str) -> types.ModuleType:
    """A module with SGLang's ``StorageMetrics`` and ``StorageMetricsCollector``, as in
    ``sglang/srt/observability/metrics_collector.py`` (and, before, ``sglang/srt/metrics/collector.py``)."""
    module = types.ModuleType(name)

    @dataclasses.dataclass
    class StorageMetrics:
        """Mirrors SGLang's ``StorageMetrics`` dataclass: per-batch pages and GB/s (``prefetch_stats`` is 2026's;
        the older module's class has the four lists only)."""

        prefetch_pgs: List[int] = dataclasses.field(default_factory=list)
        backup_pgs: List[int] = dataclasses.field(default_factory=list)
        prefetch_bandwidth: List[float] = dataclasses.field(default_factory=list)
        backup_bandwidth: List[float] = dataclasses.field(default_factory=list)
        prefetch_stats: Dict[str, float] = dataclasses.field(default_factory=dict)

    class StorageMetricsCollector:
        """Mirrors SGLang's ``StorageMetricsCollector``; histograms are lists here instead of Prometheus ones."""

        def __init__(self, labels: Optional[dict] = None):
            self.labels = labels or {}
            self.histograms: Dict[str, list] = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [],
                                                "backup_bandwidth": []}

        def log_storage_metrics(self, storage_metrics=None):
            """Mirrors ``StorageMetricsCollector.log_storage_metrics``, which HiRadixCache's
            ``check_hicache_events`` calls with ``storage_backend.get_stats()`` under ``--enable-metrics``: None is
            skipped, anything else must be SGLang's own class (SGLang asserts it), then each list is observed."""
            if storage_metrics is None:
                return
            assert isinstance(storage_metrics, StorageMetrics)
            for name, observed in self.histograms.items():
                observed.extend(getattr(storage_metrics, name))

    StorageMetrics.__module__ = StorageMetricsCollector.__module__ = name
    StorageMetrics.__qualname__, StorageMetricsCollector.__qualname__ = "StorageMetrics", "StorageMetricsCollector"
    module.StorageMetrics = StorageMetrics
    module.StorageMetricsCollector = StorageMetricsCollector
    return module


@contextlib.contextmanager
def installed_metrics_modules(new: bool = True, old: bool = False):
    """Puts fake SGLang metrics modules in ``sys.modules`` for the ``with`` block: the 2026 one (``new``), the
    older one (``old``); a module not asked for is made unimportable (``None`` in ``sys.modules``), so a real SGLang
    cannot stand in. Yields ``{module name: module or None}``; restores ``sys.modules`` after."""
    wanted = {METRICS_MODULE: _metrics_module(METRICS_MODULE) if new else None,
              OLD_METRICS_MODULE: _metrics_module(OLD_METRICS_MODULE) if old else None}
    names = ["sglang", "sglang.srt", "sglang.srt.observability", "sglang.srt.metrics", *wanted]
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    try:
        for package in names[:4]:
            if package not in sys.modules:
                module = types.ModuleType(package)
                module.__path__ = []  # a package, so its submodules resolve
                sys.modules[package] = module
        sys.modules.update(wanted)
        yield wanted
    finally:
        for name in names:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)
