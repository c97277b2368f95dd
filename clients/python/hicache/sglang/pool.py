"""SGLang's host KV pool (``HostKVCache``) as the backend sees it: layout, page byte order, and where a page's
bytes lie.

Byte order of a page on the wire, per layout (a row is one token's ``heads * head_dim`` elements of one layer and
one part, K or V; MLA pages have K only). It is the order of SGLang's own flat page (``get_data_page``), and the
order ``io.hicache.core.page.HostLayout`` gives the same layout in Java (``PageFormat.rowOffset``):

=====================  =================================  ===============================  ==================
layout                 host buffer (MHA; MLA without 2)   page on the wire                 namespace ``order``
=====================  =================================  ===============================  ==================
``layer_first``        [2, L, N, H, D]                    [part][layer][token]             0 (layer-major)
``page_first``         [2, N, L, H, D]                    [part][token][layer]             1 (token-major)
``page_first_direct``  [2, P, L, page, H, D]              [part][layer][token]             0 (layer-major)
=====================  =================================  ===============================  ==================

Zero copy uses ``get_page_buffer_meta(indices)``, which SGLang returns as ``(ptr_list, size_list)``:

* ``page_first`` and ``page_first_direct``: per page K then V (MHA), one blob each, or one blob (MLA). The parts
  are sent as they are. A pool whose K and V head dims differ (``AsymmetricMHATokenToKVPoolHost``) gives the same
  two blobs, of different sizes; it has no flat pages, so it needs SGLang's ``interface_v1``.
* ``layer_first`` (SGLang versions that have it): per page and layer, K then V: ``K0 V0 K1 V1 ...`` (MHA) or
  ``K0 K1 ...`` (MLA). The backend sends all K parts, then all V parts, which is the layer-major page.

When the pool has no such meta (older SGLang for ``layer_first``, or a meta of an unexpected shape), pages are
copied through ``get_data_page`` / ``get_dummy_flat_data_page`` / ``set_from_flat_data_page`` instead, the path
SGLang's own non-zero-copy backends take.
"""

from __future__ import annotations

from typing import Any, Optional

from .config import LAYOUT_ORDERS, canonical_dtype


class ZeroCopyUnavailable(Exception):
    """The pool gives no usable page addresses: the copying path must be used."""


def to_int_list(indices: Any) -> list[int]:
    """Host indices (a torch tensor, a numpy array, a list...) as a list of ints."""
    if hasattr(indices, "tolist"):
        values = indices.tolist()
        return values if isinstance(values, list) else [values]
    return [int(i) for i in indices]


def buffer_spec(obj: Any) -> Any:
    """A page buffer as the client takes it: a CPU torch tensor becomes ``(data_ptr, nbytes)``; anything with the
    buffer protocol (bytearray, numpy array, ctypes array, memoryview) is passed as it is."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size") and hasattr(obj, "numel"):
        device = getattr(obj, "device", None)
        if device is not None and getattr(device, "type", str(device)) != "cpu":
            raise ValueError(f"a page buffer on {device}; the backend reads and writes host memory only")
        if hasattr(obj, "is_contiguous") and not obj.is_contiguous():
            raise ValueError("a page buffer that is not contiguous")
        return (int(obj.data_ptr()), int(obj.numel()) * int(obj.element_size()))
    return obj


def _looks_mla(pool: Any) -> bool:
    return hasattr(pool, "kv_lora_rank") or "MLA" in type(pool).__name__


def _head_dims(pool: Any) -> tuple[Optional[int], Optional[int]]:
    """(K head dim, V head dim) of an MHA pool; V is None when the pool has one head dim for both."""
    k_dim, v_dim = getattr(pool, "head_dim", None), getattr(pool, "v_head_dim", None)
    return (k_dim if isinstance(k_dim, int) else None), (v_dim if isinstance(v_dim, int) else None)


def pool_dtype(pool: Any) -> tuple[Optional[str], Optional[str]]:
    """(canonical KV dtype, what the pool said). SGLang keeps fp8 caches as ``uint8`` in the host pool
    (``store_dtype``), so the device pool's ``dtype`` is asked first."""
    said = None
    for owner in (getattr(pool, "device_pool", None), pool):
        value = getattr(owner, "dtype", None) if owner is not None else None
        if value is None:
            continue
        said = said or str(value)
        canonical = canonical_dtype(value)
        if canonical is not None:
            return canonical, str(value)
    return None, said


class HostPool:
    """The registered host pool, checked, with the page addressing of its layout. Thread-safe after
    construction (the zero-copy decision is a single attribute written once)."""

    def __init__(self, pool: Any, is_mla: bool):
        layout = getattr(pool, "layout", None)
        if layout not in LAYOUT_ORDERS:
            raise ValueError(f"the HiCache daemon backend supports the host layouts {', '.join(LAYOUT_ORDERS)}; "
                             f"this host pool's layout is {layout!r} (--hicache-mem-layout)")
        if hasattr(pool, "index_head_dim") or any(tag in type(pool).__name__ for tag in ("NSA", "DSA")):
            raise ValueError("the HiCache daemon backend does not take a KV host pool that carries DeepSeek sparse "
                             f"attention's indexer keys ({type(pool).__name__}); SGLang's HybridCacheController "
                             "registers the indexer as a pool of its own (register_mem_host_pool_v2), which the "
                             "backend stores")
        page_size = getattr(pool, "page_size", None)
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"the host pool's page_size is {page_size!r}")
        self.pool = pool
        self.layout: str = layout
        self.order: int = LAYOUT_ORDERS[layout]
        self.page_size: int = page_size
        self.is_mla: bool = bool(is_mla) or _looks_mla(pool)
        self.parts: int = 1 if self.is_mla else 2
        # SGLang's AsymmetricMHATokenToKVPoolHost (head_dim != v_head_dim, e.g. MiMo-V2): K and V in two buffers,
        # page_first or page_first_direct only, and no flat pages (get_data_page raises NotImplementedError).
        k_dim, v_dim = _head_dims(pool)
        self.head_dims: tuple[Optional[int], Optional[int]] = (k_dim, v_dim)
        self.asymmetric: bool = (not self.is_mla and (
            "Asymmetric" in type(pool).__name__ or (k_dim is not None and v_dim is not None and k_dim != v_dim)))
        layer_num = getattr(pool, "layer_num", None)
        self.layer_num: Optional[int] = layer_num if isinstance(layer_num, int) and layer_num > 0 else None
        self.page_bytes: Optional[int] = self._page_bytes()
        self.dtype, self.dtype_said = pool_dtype(pool)
        self.has_dtype = self.dtype_said is not None
        # None: not tried yet; True: get_page_buffer_meta works; False: copy through flat pages.
        self.zero_copy: Optional[bool] = None
        self.zero_copy_reason = ""

    def _page_bytes(self) -> Optional[int]:
        per_token = None
        getter = getattr(self.pool, "get_size_per_token", None)
        if callable(getter):
            try:
                per_token = int(getter())
            except Exception:
                per_token = None
        if per_token is None:
            value = getattr(self.pool, "size_per_token", None)
            per_token = value if isinstance(value, int) else None
        return per_token * self.page_size if per_token else None

    def describe(self) -> str:
        return (f"{'MLA' if self.is_mla else 'MHA'} {self.layout}, page {self.page_size} tokens"
                + (f", K/V head dims {self.head_dims[0]}/{self.head_dims[1]}" if self.asymmetric else "")
                + (f", {self.page_bytes} bytes" if self.page_bytes else "")
                + (f", {self.layer_num} layers" if self.layer_num else ""))

    # ------------------------------------------------------------------------------------------------- indices

    def page_starts(self, host_indices: Any, pages: int) -> list[int]:
        """The first host slot of each of ``pages`` pages; raises ValueError if ``host_indices`` do not hold
        exactly ``pages * page_size`` slots."""
        slots = to_int_list(host_indices)
        if len(slots) != pages * self.page_size:
            raise ValueError(f"{len(slots)} host indices for {pages} pages of {self.page_size} tokens")
        return slots[::self.page_size]

    # ----------------------------------------------------------------------------------------------- zero copy

    def zero_copy_pages(self, host_indices: Any, pages: int) -> list[list[tuple[int, int]]]:
        """Per page, its parts as ``(address, length)`` tuples in wire order. Raises ZeroCopyUnavailable when
        the pool gives no usable addresses."""
        getter = getattr(self.pool, "get_page_buffer_meta", None)
        if not callable(getter):
            raise ZeroCopyUnavailable("the host pool has no get_page_buffer_meta")
        try:
            meta = getter(host_indices)
        except Exception as e:  # SGLang raises ValueError for layouts it has no meta for
            raise ZeroCopyUnavailable(f"get_page_buffer_meta failed: {type(e).__name__}: {e}") from None
        ptrs, sizes = split_meta(meta)
        if not pages or len(ptrs) % pages:
            raise ZeroCopyUnavailable(f"get_page_buffer_meta gave {len(ptrs)} buffers for {pages} pages")
        per_page = len(ptrs) // pages
        reorder = self._reorder(per_page)
        result = []
        for page in range(pages):
            first = page * per_page
            parts = [(int(ptrs[first + i]), int(sizes[first + i])) for i in reorder]
            total = sum(length for _, length in parts)
            if self.page_bytes is not None and total != self.page_bytes:
                raise ZeroCopyUnavailable(f"get_page_buffer_meta gave {total} bytes for a page of "
                                          f"{self.page_bytes}")
            result.append(_merge_adjacent(parts))
        return result

    def _reorder(self, per_page: int) -> list[int]:
        """Indices of a page's meta buffers in wire order."""
        if per_page == self.parts:  # K, V (MHA) or the latent (MLA): page_first, page_first_direct, one layer
            if self.layout == "layer_first" and self.layer_num not in (None, 1):
                raise ZeroCopyUnavailable(f"{per_page} buffers per layer_first page of {self.layer_num} layers")
            return list(range(per_page))
        if self.layout == "layer_first" and self.layer_num and per_page == self.parts * self.layer_num:
            if self.is_mla:
                return list(range(per_page))  # K0 K1 ... already layer-major
            return list(range(0, per_page, 2)) + list(range(1, per_page, 2))  # K0 V0 K1 V1 ... -> K0 K1 ... V0 V1 ...
        raise ZeroCopyUnavailable(f"get_page_buffer_meta gave {per_page} buffers per page for a "
                                  f"{'MLA' if self.is_mla else 'MHA'} {self.layout} pool")

    # -------------------------------------------------------------------------------------------- copying path

    def flat_page(self, start: int) -> Any:
        """A flat copy of the page at host slot ``start`` (``get_data_page``), in wire order; keep it alive while
        it is used."""
        return self.pool.get_data_page(start, True)

    def staging_page(self) -> Any:
        """An empty flat page to read one into (``get_dummy_flat_data_page``)."""
        return self.pool.get_dummy_flat_data_page()

    def store_flat_page(self, start: int, flat: Any) -> None:
        """Copies a flat page into the host slots from ``start`` (``set_from_flat_data_page``)."""
        self.pool.set_from_flat_data_page(start, flat)


def split_meta(meta: Any) -> tuple[list[int], list[int]]:
    """``get_page_buffer_meta``'s answer as (pointers, sizes); raises ZeroCopyUnavailable for one of another shape."""
    if meta is None:
        raise ZeroCopyUnavailable("get_page_buffer_meta returned None")
    if isinstance(meta, tuple) and len(meta) == 2 and not isinstance(meta[0], (int, tuple)):
        ptrs = to_int_list(meta[0])
        sizes = meta[1]
        sizes = [int(sizes)] * len(ptrs) if isinstance(sizes, int) else to_int_list(sizes)
    else:  # a list of (ptr, size) pairs
        try:
            pairs = [(int(p), int(s)) for p, s in meta]
        except (TypeError, ValueError):
            raise ZeroCopyUnavailable(f"get_page_buffer_meta returned {type(meta).__name__}, not "
                                      "(pointers, sizes)") from None
        ptrs = [p for p, _ in pairs]
        sizes = [s for _, s in pairs]
    if len(ptrs) != len(sizes):
        raise ZeroCopyUnavailable(f"get_page_buffer_meta gave {len(ptrs)} pointers and {len(sizes)} sizes")
    if any(p <= 0 for p in ptrs) or any(s <= 0 for s in sizes):
        raise ZeroCopyUnavailable("get_page_buffer_meta gave a null pointer or an empty buffer")
    return ptrs, sizes


def _merge_adjacent(parts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Joins parts that follow each other in memory (fewer iovecs); the bytes and their order are unchanged."""
    merged = [parts[0]]
    for address, length in parts[1:]:
        last_address, last_length = merged[-1]
        if last_address + last_length == address:
            merged[-1] = (last_address, last_length + length)
        else:
            merged.append((address, length))
    return merged
