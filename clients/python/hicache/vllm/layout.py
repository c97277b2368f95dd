"""vLLM's paged KV cache tensors as HiCache pages: one page per vLLM block, every layer of this rank in it.

vLLM hands the worker one tensor per attention layer (``register_kv_caches``), each a *logical* view whose strides
may permute the memory (the ``HND`` layout of ``get_kv_cache_stride_order``):

==========================  ==========================================  ===============
backend                     per-layer tensor                            parts of a block
==========================  ==========================================  ===============
FlashAttention (and most)   ``[2, num_blocks, block_size, H, D]``       K, V
FlashInfer                  ``[num_blocks, 2, block_size, H, D]``       K, V
MLA backends                ``[num_blocks, block_size, D]``             the latent
split K/V (some platforms)  ``(K, V)``, each ``[num_blocks, block_size, H, D]``  K, V
==========================  ==========================================  ===============

A page is the block's parts in the daemon's layer-major order (namespace order 0, as SGLang's and Java's
layer-major pages): for each part (K, then V; or the one MLA latent), for each layer in order, the block's
``block_size x H x D`` elements in logical row-major order (token, head, dim). The bytes are therefore the same
whatever the backend and memory layout (NHD or HND), and the layers are ordered by the numbers in their names
(``model.layers.2...`` before ``model.layers.10...``), not by the order of the dict vLLM passes.

KV caches in host memory (vLLM's CPU backend, tests) move without a copy: each page is a list of ``(address,
length)`` parts straight into the cache tensors, which the client fills from or sends out of (through the daemon's
slab on the same host). KV caches on a GPU move through pinned host staging (:class:`DeviceMover`, torch imported
only then): a gather of the blocks on the GPU and one copy each way.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
import re
from typing import Any, Mapping, Optional, Sequence

MAX_RUNS_PER_BLOCK = 4096
"""A host cache whose block of one layer and part falls into more contiguous pieces than this is refused."""

_DIGITS = re.compile(r"(\d+)")


def layer_order(name: str) -> tuple[tuple[int, Any], ...]:
    """Sort key of a layer name: its numbers compare as numbers (``layers.2`` before ``layers.10``)."""
    return tuple((0, int(chunk)) if chunk.isdigit() else (1, chunk) for chunk in _DIGITS.split(name) if chunk)


def _device_type(tensor: Any) -> str:
    device = getattr(tensor, "device", None)
    return str(getattr(device, "type", device or "cpu"))


@dataclasses.dataclass(frozen=True)
class Part:
    """One part (K, V, or the MLA latent) of one layer's cache: a strided view ``[num_blocks, block_size, ...]``."""

    source: Any
    """The tensor it is a view of (vLLM's per-layer tensor, or K or V of a split pair)."""
    select: Optional[tuple[int, int]]
    """``(dim, index)`` that selects the part from ``source`` (``source.select(dim, index)``), or None for all of it."""
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    """In elements, as torch gives them."""
    itemsize: int

    @property
    def block_bytes(self) -> int:
        return math.prod(self.shape[1:]) * self.itemsize

    def runs(self) -> list[tuple[int, int]]:
        """The block's bytes in logical row-major order as ``(offset from the block's first byte, length)`` runs,
        adjacent runs merged."""
        inner, strides, size = self.shape[1:], self.strides[1:], self.itemsize
        if any(n > 1 and step <= 0 for n, step in zip(self.shape, self.strides)):
            raise ValueError(f"a KV cache with strides {self.strides} (not all positive) is not supported")
        run, cut = size, len(inner)
        while cut > 0 and (inner[cut - 1] == 1 or strides[cut - 1] * size == run):
            run *= inner[cut - 1]
            cut -= 1
        outer = [(inner[d], strides[d] * size) for d in range(cut)]
        count = math.prod(n for n, _ in outer)
        if count > MAX_RUNS_PER_BLOCK:
            raise ValueError(f"a block of this KV cache (shape {self.shape}, strides {self.strides}) is {count} "
                             f"pieces of {run} bytes in host memory; at most {MAX_RUNS_PER_BLOCK} are supported")
        runs: list[tuple[int, int]] = []
        for index in itertools.product(*(range(n) for n, _ in outer)):
            offset = sum(i * step for i, (_, step) in zip(index, outer))
            if runs and runs[-1][0] + runs[-1][1] == offset:
                runs[-1] = (runs[-1][0], runs[-1][1] + run)
            else:
                runs.append((offset, run))
        return runs


def _strided(tensor: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    try:
        return (int(tensor.data_ptr()), tuple(int(n) for n in tensor.shape), tuple(int(s) for s in tensor.stride()),
                int(tensor.element_size()))
    except AttributeError as e:
        raise TypeError(f"a KV cache must be a tensor (data_ptr, shape, stride, element_size), was "
                        f"{type(tensor).__name__}") from e


def split_layer(name: str, value: Any, block_size: int) -> list[Part]:
    """The parts of one layer's cache (see the module documentation); ValueError for a shape that is none of those
    vLLM's backends make."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"layer {name}: a split KV cache is (K, V), was {len(value)} tensors")
        parts = []
        for tensor in value:
            ptr, shape, strides, size = _strided(tensor)
            if len(shape) != 4 or shape[1] != block_size:
                raise ValueError(f"layer {name}: K and V must be [num_blocks, {block_size}, heads, dim], were {shape}")
            parts.append(Part(tensor, None, ptr, shape, strides, size))
        return parts
    ptr, shape, strides, size = _strided(value)
    # Only the exact shapes vLLM's backends make: a page's bytes must mean the same in every engine of a namespace.
    if len(shape) == 5 and shape[0] == 2 and shape[2] == block_size:  # [2, N, B, H, D]
        return [Part(value, (0, i), ptr + i * strides[0] * size, shape[1:], strides[1:], size) for i in range(2)]
    if len(shape) == 5 and shape[1] == 2 and shape[2] == block_size:  # [N, 2, B, H, D]
        return [Part(value, (1, i), ptr + i * strides[1] * size, (shape[0],) + shape[2:],
                     (strides[0],) + strides[2:], size) for i in range(2)]
    if len(shape) == 3 and shape[1] == block_size:  # MLA: [N, B, D]
        return [Part(value, None, ptr, shape, strides, size)]
    raise ValueError(f"layer {name}: KV cache shape {shape} is none of [2, num_blocks, {block_size}, heads, dim] "
                     f"(FlashAttention), [num_blocks, 2, {block_size}, heads, dim] (FlashInfer), "
                     f"[num_blocks, {block_size}, dim] (MLA) or a (K, V) pair")


class KVLayout:
    """The KV caches of one worker and the page of each block. Read-only after construction, hence thread-safe."""

    def __init__(self, kv_caches: Mapping[str, Any], block_size: int) -> None:
        if not kv_caches:
            raise ValueError("vLLM registered no KV caches")
        self.layer_names = sorted(kv_caches, key=layer_order)
        by_layer = [split_layer(name, kv_caches[name], block_size) for name in self.layer_names]
        first = by_layer[0][0]
        self.num_parts = len(by_layer[0])
        self.num_blocks = first.shape[0]
        self.block_shape = first.shape[1:]
        self.itemsize = first.itemsize
        for name, parts in zip(self.layer_names, by_layer):
            for part in parts:
                if (len(parts), part.shape[0], part.shape[1:], part.itemsize) != (
                        self.num_parts, self.num_blocks, self.block_shape, self.itemsize):
                    raise ValueError(f"layer {name}: its cache ({len(parts)} parts of {part.shape}, "
                                     f"{part.itemsize}-byte elements) differs from layer {self.layer_names[0]}'s "
                                     f"({self.num_parts} parts of {first.shape}, {first.itemsize}-byte elements); "
                                     "one page per block needs alike layers")
        # parts[p][l]: part p (K, V / latent) of layer l
        self.parts: list[list[Part]] = [[layer[p] for layer in by_layer] for p in range(self.num_parts)]
        self.block_size = block_size
        self.block_bytes = first.block_bytes
        """Bytes of one part of one block of one layer."""
        self.page_bytes = self.block_bytes * self.num_parts * len(self.layer_names)
        devices = {_device_type(part.source) for layer in by_layer for part in layer}
        if len(devices) != 1:
            raise ValueError(f"the KV caches are on several kinds of device: {sorted(devices)}")
        self.device_type = devices.pop()
        self.dtype = str(getattr(first.source, "dtype", ""))
        self._runs: Optional[list[list[list[tuple[int, int]]]]] = None

    @property
    def is_mla(self) -> bool:
        return self.num_parts == 1

    @property
    def on_host(self) -> bool:
        return self.device_type == "cpu"

    def describe(self) -> str:
        kind = "MLA latent" if self.is_mla else "K and V"
        return (f"{len(self.layer_names)} layers x {kind} of {self.num_blocks} blocks x {list(self.block_shape)} "
                f"({self.dtype or f'{self.itemsize}-byte elements'}, {self.device_type}): {self.page_bytes} bytes "
                "a page")

    def _host_runs(self) -> list[list[list[tuple[int, int]]]]:
        if self._runs is None:
            self._runs = [[part.runs() for part in layers] for layers in self.parts]
        return self._runs

    def check_host(self) -> None:
        """Raises ValueError now if the host caches cannot be moved without a copy."""
        self._host_runs()

    def host_page(self, block_id: int) -> list[tuple[int, int]]:
        """Block ``block_id``'s page as ``(address, length)`` parts into the host caches, in page order."""
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block {block_id} is outside the cache's {self.num_blocks} blocks")
        page: list[tuple[int, int]] = []
        for layers, layer_runs in zip(self.parts, self._host_runs()):
            for part, runs in zip(layers, layer_runs):
                base = part.ptr + block_id * part.strides[0] * part.itemsize
                for offset, length in runs:
                    address = base + offset
                    if page and page[-1][0] + page[-1][1] == address:
                        page[-1] = (page[-1][0], page[-1][1] + length)
                    else:
                        page.append((address, length))
        return page


class DeviceMover:
    """Pages of a KV cache on a GPU, through pinned host staging. Imports torch. Not thread-safe: the worker calls it
    from vLLM's forward pass (one thread); a save buffer may be read by one background put meanwhile, which the
    worker waits for before staging into it again.

    A staging buffer is ``uint8 [parts, layers, capacity, block_bytes]``: row ``j`` of ``[p, l]`` is part ``p`` of
    layer ``l`` of the ``j``-th block of a batch, so each ``[p, l]`` slab is contiguous (one copy per layer and part)
    and a page is ``parts x layers`` pieces of ``block_bytes`` in page order."""

    def __init__(self, layout: KVLayout, staging_bytes: int, pin: Optional[bool] = None) -> None:
        self.torch: Any = importlib.import_module("torch")
        self.layout = layout
        self.capacity = max(1, staging_bytes // layout.page_bytes)
        """Most blocks one staging buffer holds."""
        self.pin = bool(self.torch.cuda.is_available()) if pin is None else pin
        self.views: list[list[Any]] = [[part.source if part.select is None else part.source.select(*part.select)
                                         for part in layers] for layers in layout.parts]
        self.device = self.views[0][0].device
        self.dtype = self.views[0][0].dtype
        self._buffers: dict[str, Any] = {}

    def buffer(self, which: str, blocks: int) -> Any:
        """The staging buffer ``which`` (``"load"`` or ``"save"``) with room for ``min(blocks, capacity)`` blocks."""
        need = min(max(1, blocks), self.capacity)
        current = self._buffers.get(which)
        if current is None or current.shape[2] < need:
            size = min(self.capacity, 1 << (need - 1).bit_length())
            current = self.torch.empty((self.layout.num_parts, len(self.layout.layer_names), size,
                                        self.layout.block_bytes), dtype=self.torch.uint8, pin_memory=self.pin)
            self._buffers[which] = current
        return current

    def page(self, buffer: Any, row: int) -> list[tuple[int, int]]:
        """The ``(address, length)`` parts of the page staged in ``row`` of ``buffer``."""
        parts, layers, capacity, size = (int(n) for n in buffer.shape)
        base = int(buffer.data_ptr())
        return [(base + ((p * layers + l) * capacity + row) * size, size) for p in range(parts) for l in range(layers)]

    def block_ids(self, ids: Sequence[int]) -> Any:
        return self.torch.tensor(list(ids), dtype=self.torch.int64, device=self.device)

    def stage_out(self, buffer: Any, layer: int, ids: Any) -> None:
        """Copies layer ``layer`` of blocks ``ids`` (a tensor on the cache's device) into rows ``0..n`` of
        ``buffer``, asynchronously on the current stream (see :meth:`synchronize`)."""
        n = int(ids.shape[0])
        for p in range(self.layout.num_parts):
            gathered = self.views[p][layer].index_select(0, ids).contiguous()
            buffer[p, layer, :n].copy_(gathered.view(self.torch.uint8).reshape(n, -1), non_blocking=True)

    def stage_in(self, buffer: Any, rows: Sequence[int], ids: Any) -> None:
        """Copies rows ``rows`` of ``buffer`` into blocks ``ids`` of every layer. Returns once the copies are done
        (the host may then reuse the buffer)."""
        n = len(rows)
        contiguous_rows = list(rows) == list(range(n))
        index = None if contiguous_rows else self.torch.tensor(list(rows), dtype=self.torch.int64)
        for p in range(self.layout.num_parts):
            for layer in range(len(self.layout.layer_names)):
                host = buffer[p, layer, :n] if index is None else buffer[p, layer].index_select(0, index)
                values = host.to(self.device).view(self.dtype).view(n, *self.layout.block_shape)
                self.views[p][layer].index_copy_(0, ids, values)
        self.synchronize()

    def event(self) -> Any:
        """An event recorded on the current stream (None on the CPU, where copies are synchronous)."""
        if self.device.type == "cuda":
            event = self.torch.cuda.Event()
            event.record()
            return event
        return None

    def synchronize(self, event: Any = None) -> None:
        """Waits for the copies queued so far (up to ``event`` if given) on the cache's device."""
        if event is not None:
            event.synchronize()
        elif self.device.type == "cuda":
            self.torch.cuda.current_stream(self.device).synchronize()
        elif self.device.type != "cpu":
            getattr(self.torch, self.device.type).synchronize()
