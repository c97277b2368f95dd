"""A stand-in for the parts of vLLM (v1 engine, KV connector interface) that drive a KV connector, standard library
only: KV caches are ``ctypes`` memory shaped and strided as vLLM's attention backends shape them.

Each piece names the vLLM file and function it mirrors (vLLM 0.21 / main of 2026, read, not copied):

* :func:`sha256`, :func:`init_none_hash`, :func:`hash_block_tokens`, :func:`get_request_block_hasher`:
  ``vllm/utils/hashing.py`` (``sha256``) and ``vllm/v1/core/kv_cache_utils.py`` (``init_none_hash``,
  ``hash_block_tokens``, ``get_request_block_hasher``, ``generate_block_hash_extra_keys`` for LoRA and cache salt).
* :class:`Request`: ``vllm/v1/request.py`` (``Request``: ``block_hashes`` kept up to date by the block hasher as
  tokens are appended, ``num_tokens``, ``num_prompt_tokens``, ``all_token_ids``, ``num_computed_tokens``).
* :class:`KVCacheBlocks`, :class:`KVCacheManager`: ``vllm/v1/core/kv_cache_manager.py`` (``get_computed_blocks``
  with its ``num_tokens - 1`` cap, ``allocate_slots``, ``get_blocks``, ``get_block_ids``, ``free``) and
  ``vllm/v1/core/block_pool.py`` (a free queue, blocks cached by hash until reused).
* :class:`NewRequestData`, :class:`CachedRequestData`, :class:`SchedulerOutput`: ``vllm/v1/core/sched/output.py``.
* :class:`Scheduler`: ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``: the connector's
  ``get_num_new_matched_tokens`` after the local prefix lookup, ``update_state_after_alloc`` with all of the
  request's blocks, ``build_connector_meta`` at the end; ``update_from_output`` with
  ``_update_requests_with_invalid_blocks``: a request whose loaded blocks failed goes back to its longest valid
  prefix and that step's output is dropped; ``_free_request``: ``request_finished``).
* :class:`ModelRunner`: ``vllm/v1/worker/gpu_model_runner.py`` with ``kv_connector_model_runner_mixin.py``
  (``bind_connector_metadata``, ``start_load_kv``, ``wait_for_save``, ``get_finished``,
  ``get_block_ids_with_load_errors``, ``clear_connector_metadata``) and ``vllm/attention/layer.py``
  (``wait_for_kv_layer_from_connector`` / ``maybe_save_kv_layer_to_connector`` around each layer's
  ``reshape_and_cache``). The "model" writes, for each token, KV that is a function of the whole prefix, the layer,
  K or V and the head, so a test can tell loaded KV from computed KV byte for byte.
* :func:`kv_cache_shape`: ``get_kv_cache_shape`` / ``get_kv_cache_stride_order`` of
  ``vllm/v1/attention/backends/flash_attn.py`` (``[2, N, B, H, D]``, HND stride order ``(0, 1, 3, 2, 4)``),
  ``flashinfer.py`` (``[N, 2, B, H, D]``) and ``mla/common.py`` (``[N, B, D]``).
* :class:`KVTransferConfig`, :class:`VllmConfig`...: ``vllm/config/kv_transfer.py`` and ``vllm/config/``.
* :func:`create_connector`: ``vllm/distributed/kv_transfer/kv_connector/factory.py``
  (``KVConnectorFactory.get_connector_class``: ``kv_connector_module_path`` first, the three-argument constructor
  check ``supports_kw(connector_cls, "kv_cache_config")``).
* :func:`install_as_vllm`: module ``vllm.distributed.kv_transfer.kv_connector.v1.base`` with
  ``KVConnectorBase_V1``, ``KVConnectorMetadata`` and ``KVConnectorRole`` (``base.py``), for a process that must
  see "vLLM installed".
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import enum
import hashlib
import importlib
import inspect
import pickle
import sys
import types
from typing import Any, Callable, Optional

# ------------------------------------------------------------------------------------------- block hashes


def sha256(value: Any) -> bytes:
    """``vllm/utils/hashing.py: sha256``: SHA-256 of the pickled value (vLLM's default ``sha256`` algorithm)."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def short_hash(value: Any) -> bytes:
    """A 16-byte block hash, as vLLM's xxhash algorithms give (not 32 bytes: the connector re-hashes it)."""
    return hashlib.blake2b(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


def init_none_hash(hash_fn: Callable[[Any], bytes], seed: Optional[str]) -> bytes:
    """``kv_cache_utils.init_none_hash``: the parent of every first block, ``hash_fn(PYTHONHASHSEED)`` when that is
    set, else random (which is why engines that share pages must set the same ``PYTHONHASHSEED``)."""
    import os
    return hash_fn(seed) if seed is not None else os.urandom(32)


def hash_block_tokens(hash_fn: Callable[[Any], bytes], none_hash: bytes, parent: Optional[bytes],
                      tokens: list[int], extra_keys: Optional[tuple[Any, ...]]) -> bytes:
    """``kv_cache_utils.hash_block_tokens``: ``hash_fn((parent or NONE_HASH, tuple(tokens), extra_keys))``."""
    return hash_fn((parent if parent else none_hash, tuple(tokens), extra_keys))


def get_request_block_hasher(block_size: int, hash_fn: Callable[[Any], bytes] = sha256,
                             seed: Optional[str] = "0") -> Callable[["Request"], list[bytes]]:
    """``kv_cache_utils.get_request_block_hasher``: hashes the request's new full blocks, chained on the last one;
    extra keys as ``generate_block_hash_extra_keys`` makes them for LoRA (every block) and the cache salt (the first
    block only)."""
    none_hash = init_none_hash(hash_fn, seed)

    def hasher(request: "Request") -> list[bytes]:
        start = len(request.block_hashes) * block_size
        parent = request.block_hashes[-1] if request.block_hashes else None
        new: list[bytes] = []
        while start + block_size <= request.num_tokens:
            extra: list[Any] = []
            if request.lora_name:
                extra.append(request.lora_name)
            if start == 0 and request.cache_salt:
                extra.append(request.cache_salt)
            parent = hash_block_tokens(hash_fn, none_hash, parent, request.all_token_ids[start:start + block_size],
                                       tuple(extra) if extra else None)
            new.append(parent)
            start += block_size
        return new

    return hasher


class Request:
    """``vllm/v1/request.py: Request`` (what the scheduler and the connector read)."""

    def __init__(self, request_id: str, prompt_token_ids: list[int], block_hasher: Callable[["Request"], list[bytes]],
                 max_tokens: int = 8, lora_name: Optional[str] = None, cache_salt: Optional[str] = None):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self._output: list[int] = []
        self.max_tokens = max_tokens
        self.lora_name = lora_name
        self.cache_salt = cache_salt
        self.num_computed_tokens = 0
        self.block_hashes: list[bytes] = []
        self._block_hasher = block_hasher
        self.block_hashes.extend(block_hasher(self))
        self.finished = False

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self._output

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self._output)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return list(self._output)

    def append_output_token_ids(self, token: int) -> None:
        self._output.append(token)
        self.block_hashes.extend(self._block_hasher(self))


# --------------------------------------------------------------------------------------------- KV manager


class KVCacheBlocks:
    """``kv_cache_manager.KVCacheBlocks``: ``get_block_ids()`` is one list per KV cache group (one group here)."""

    def __init__(self, block_ids: list[int]):
        self._ids = list(block_ids)

    def get_block_ids(self) -> tuple[list[int], ...]:
        return (list(self._ids),)


class KVCacheManager:
    """``kv_cache_manager.KVCacheManager`` over ``block_pool.BlockPool``: blocks come from a free queue (``order``
    decides the queue, so two engines hand out different block ids); a full computed block is cached under its
    hash until its id is handed out again."""

    def __init__(self, num_blocks: int, block_size: int, order: Optional[list[int]] = None):
        self.block_size = block_size
        self.free: collections.deque[int] = collections.deque(order if order is not None else range(num_blocks))
        self.cached: dict[bytes, int] = {}
        self.cached_hash_of: dict[int, bytes] = {}
        self.blocks: dict[str, list[int]] = {}
        self.ref_cnt: collections.Counter[int] = collections.Counter()

    def _take(self) -> int:
        block = self.free.popleft()
        old = self.cached_hash_of.pop(block, None)
        if old is not None:
            del self.cached[old]
        return block

    def get_computed_blocks(self, request: Request) -> tuple[list[int], int]:
        """The locally cached prefix: at most ``num_tokens - 1`` tokens (``max_cache_hit_length``), whole blocks."""
        limit = (request.num_tokens - 1) // self.block_size
        hits: list[int] = []
        for block_hash in request.block_hashes[:limit]:
            block = self.cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * self.block_size

    def allocate_slots(self, request: Request, total_tokens: int, computed_blocks: Optional[list[int]] = None) -> bool:
        blocks = self.blocks.setdefault(request.request_id, [])
        need = -(-total_tokens // self.block_size) - len(blocks) - len(computed_blocks or ())
        if need > len(self.free) - sum(1 for b in computed_blocks or () if b in self.free):
            return False
        for block in computed_blocks or ():
            if block in self.free:
                self.free.remove(block)
            self.ref_cnt[block] += 1
            blocks.append(block)
        for _ in range(max(0, need)):
            block = self._take()
            self.ref_cnt[block] += 1
            blocks.append(block)
        return True

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        return KVCacheBlocks(self.blocks.get(request_id, []))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        return (list(self.blocks.get(request_id, [])),)

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        blocks = self.blocks.get(request.request_id, [])
        for i in range(min(num_computed_tokens // self.block_size, len(request.block_hashes), len(blocks))):
            block_hash = request.block_hashes[i]
            if block_hash not in self.cached and blocks[i] not in self.cached_hash_of:
                self.cached[block_hash] = blocks[i]
                self.cached_hash_of[blocks[i]] = block_hash

    def evict_blocks(self, block_ids: set[int]) -> None:
        for block in block_ids:
            old = self.cached_hash_of.pop(block, None)
            if old is not None:
                del self.cached[old]

    def free_request(self, request_id: str) -> None:
        for block in reversed(self.blocks.pop(request_id, [])):
            self.ref_cnt[block] -= 1
            if self.ref_cnt[block] == 0:
                self.free.append(block)


# ----------------------------------------------------------------------------------------- scheduler output


@dataclasses.dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list[int]
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int


@dataclasses.dataclass
class CachedRequestData:
    req_ids: list[str]
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    new_block_ids: list[Optional[tuple[list[int], ...]]]
    num_computed_tokens: list[int]


@dataclasses.dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    finished_req_ids: set[str]
    kv_connector_metadata: Any = None


@dataclasses.dataclass
class KVConnectorOutput:
    """``vllm/v1/outputs.py: KVConnectorOutput``."""

    finished_sending: Optional[set[str]] = None
    finished_recving: Optional[set[str]] = None
    invalid_block_ids: set[int] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class ModelRunnerOutput:
    sampled: dict[str, int]
    kv_connector_output: KVConnectorOutput


class Scheduler:
    """``vllm/v1/core/sched/scheduler.py: Scheduler``, the connector's calls in vLLM's order."""

    def __init__(self, connector: Any, num_blocks: int, block_size: int, block_order: Optional[list[int]] = None,
                 max_num_batched_tokens: int = 1 << 20):
        self.connector = connector
        self.block_size = block_size
        self.kv_cache_manager = KVCacheManager(num_blocks, block_size, block_order)
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.max_num_batched_tokens = max_num_batched_tokens
        self._sent_tokens: dict[str, int] = {}
        self.finished_req_ids: set[str] = set()
        self.matched: dict[str, int] = {}
        """Tokens the connector offered per request (its last answer), for the tests."""
        self.recomputed: dict[str, int] = {}
        """Tokens each request went back to after a failed load, for the tests."""

    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def schedule(self) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        num_scheduled: dict[str, int] = {}
        cached = CachedRequestData([], set(), [], [], [])
        new_reqs: list[NewRequestData] = []
        for request in self.running:
            n = min(request.num_tokens - request.num_computed_tokens, budget)
            if n <= 0:
                continue
            before = len(self.kv_cache_manager.blocks[request.request_id])
            if not self.kv_cache_manager.allocate_slots(request, request.num_computed_tokens + n):
                raise AssertionError("the fake scheduler does not preempt: give it more blocks")
            new_blocks = self.kv_cache_manager.blocks[request.request_id][before:]
            sent = self._sent_tokens[request.request_id]
            cached.req_ids.append(request.request_id)
            cached.new_token_ids.append(request.all_token_ids[sent:])
            self._sent_tokens[request.request_id] = request.num_tokens
            cached.new_block_ids.append((new_blocks,) if new_blocks else None)
            cached.num_computed_tokens.append(request.num_computed_tokens)
            num_scheduled[request.request_id] = n
            budget -= n
        while self.waiting and budget > 0:
            request = self.waiting[0]
            local_blocks, local_tokens = self.kv_cache_manager.get_computed_blocks(request)
            external, load_async = (0, False)
            if self.connector is not None:
                answer, load_async = self.connector.get_num_new_matched_tokens(request, local_tokens)
                external = answer or 0
                assert not load_async, "the fake scheduler loads synchronously only"
                self.matched[request.request_id] = external
            computed = local_tokens + external
            n = min(request.num_tokens - computed, budget)
            if not self.kv_cache_manager.allocate_slots(request, computed + n, local_blocks):
                break
            if self.connector is not None:
                self.connector.update_state_after_alloc(request, self.kv_cache_manager.get_blocks(request.request_id),
                                                        external)
            self.waiting.popleft()
            self.running.append(request)
            request.num_computed_tokens = computed
            new_reqs.append(NewRequestData(request.request_id, list(request.prompt_token_ids),
                                           self.kv_cache_manager.get_block_ids(request.request_id), computed))
            self._sent_tokens[request.request_id] = request.num_tokens
            num_scheduled[request.request_id] = n
            budget -= n
        output = SchedulerOutput(new_reqs, cached, num_scheduled, set(self.finished_req_ids))
        self.finished_req_ids.clear()
        if self.connector is not None:
            output.kv_connector_metadata = self.connector.build_connector_meta(output)
        for req_id, n in num_scheduled.items():  # _update_after_schedule
            self.requests[req_id].num_computed_tokens += n
        return output

    def _update_requests_with_invalid_blocks(self, output: SchedulerOutput, invalid: set[int]) -> set[str]:
        affected: set[str] = set()
        for req_id, n in output.num_scheduled_tokens.items():
            request = self.requests[req_id]
            (block_ids,) = self.kv_cache_manager.get_block_ids(req_id)
            computed_before = request.num_computed_tokens - n
            for index, block in enumerate(block_ids[:-(-computed_before // self.block_size)]):
                if block in invalid:
                    request.num_computed_tokens = index * self.block_size
                    self.recomputed[req_id] = request.num_computed_tokens
                    affected.add(req_id)
                    self.kv_cache_manager.evict_blocks(set(block_ids[index:]))
                    break
        return affected

    def update_from_output(self, output: SchedulerOutput, runner: ModelRunnerOutput) -> None:
        connector_output = runner.kv_connector_output
        if self.connector is not None:
            self.connector.update_connector_output(connector_output)
        affected = self._update_requests_with_invalid_blocks(output, connector_output.invalid_block_ids) \
            if connector_output.invalid_block_ids else set()
        for req_id in output.num_scheduled_tokens:
            if req_id in affected:
                continue  # this step's output of the request is dropped: it recomputes from its valid prefix
            request = self.requests[req_id]
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            if request.num_computed_tokens >= request.num_tokens:
                request.append_output_token_ids(runner.sampled[req_id])
                if len(request.output_token_ids) >= request.max_tokens:
                    self._free_request(request)

    def _free_request(self, request: Request) -> None:
        request.finished = True
        self.running.remove(request)
        if self.connector is not None:
            (block_ids,) = self.kv_cache_manager.get_block_ids(request.request_id)
            delay, _ = self.connector.request_finished(request, block_ids)
            assert not delay, "the connector does not hold blocks after a request ends"
        self.kv_cache_manager.free_request(request.request_id)
        self.finished_req_ids.add(request.request_id)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)


# --------------------------------------------------------------------------------------------- KV caches


class FakeDtype:
    """What vLLM's caches expose of a ``torch.dtype``: ``str()`` and ``itemsize``."""

    def __init__(self, name: str, itemsize: int):
        self.name = name
        self.itemsize = itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"


BFLOAT16 = FakeDtype("bfloat16", 2)
FLOAT16 = FakeDtype("float16", 2)
UINT8 = FakeDtype("uint8", 1)
CPU = types.SimpleNamespace(type="cpu")


class FakeTensor:
    """A strided view over ``ctypes`` memory with the ``torch.Tensor`` methods the connector reads."""

    def __init__(self, memory: ctypes.Array, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
                 dtype: FakeDtype):
        self.memory = memory
        self.offset = offset  # bytes
        self.shape = shape
        self._strides = strides
        self.dtype = dtype
        self.device = CPU

    def data_ptr(self) -> int:
        return ctypes.addressof(self.memory) + self.offset

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def element_size(self) -> int:
        return self.dtype.itemsize

    def address(self, index: tuple[int, ...]) -> int:
        return self.data_ptr() + sum(i * s for i, s in zip(index, self._strides)) * self.dtype.itemsize


def kv_cache_shape(backend: str, num_blocks: int, block_size: int, heads: int, head_dim: int) -> tuple[int, ...]:
    """``get_kv_cache_shape`` of vLLM's backends: ``flash_attn`` (and most), ``flashinfer``, ``mla``."""
    if backend == "flash_attn":
        return (2, num_blocks, block_size, heads, head_dim)
    if backend == "flashinfer":
        return (num_blocks, 2, block_size, heads, head_dim)
    if backend == "mla":
        return (num_blocks, block_size, head_dim)
    raise ValueError(backend)


def stride_order(backend: str, layout: str) -> tuple[int, ...]:
    """``get_kv_cache_stride_order``: how the memory is laid out, as a permutation of the logical shape."""
    if backend == "mla" or layout == "NHD":
        return tuple(range(3 if backend == "mla" else 5))
    if backend == "flash_attn":
        return (0, 1, 3, 2, 4)
    return (0, 1, 3, 2, 4)  # flashinfer HND: [N, 2, H, B, D]


def kv_cache_strides(backend: str, layout: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The logical view's strides of memory allocated in :func:`stride_order`."""
    order = stride_order(backend, layout)
    physical = tuple(shape[d] for d in order)
    physical_strides = [1] * len(physical)
    for d in range(len(physical) - 2, -1, -1):
        physical_strides[d] = physical_strides[d + 1] * physical[d + 1]
    strides = [0] * len(shape)
    for position, d in enumerate(order):
        strides[d] = physical_strides[position]
    return tuple(strides)


def allocate_kv_cache(backend: str, layout: str, num_blocks: int, block_size: int, heads: int, head_dim: int,
                      dtype: FakeDtype, torch: Any = None) -> FakeTensor:
    """As ``gpu_model_runner._reshape_kv_cache_tensors``: memory in stride order, then a logical view of it. With
    ``torch`` (a CPU torch), the memory is a torch tensor of that shape and strides, kept as ``.torch``: the
    connector is given the torch tensor, the fake model writes through this view of the same memory."""
    shape = kv_cache_shape(backend, num_blocks, block_size, heads, head_dim)
    strides = kv_cache_strides(backend, layout, shape)
    total = 1
    for n in shape:
        total *= n
    if torch is None:
        return FakeTensor((ctypes.c_char * (total * dtype.itemsize))(), 0, shape, strides, dtype)
    tensor = torch.zeros(total, dtype=getattr(torch, dtype.name)).as_strided(shape, strides)
    memory = (ctypes.c_char * (total * dtype.itemsize)).from_address(tensor.data_ptr())
    view = FakeTensor(memory, 0, shape, strides, dtype)
    view.torch = tensor
    return view


def token_kv(prefix_digest: bytes, layer: int, part: int, head: int, nbytes: int) -> bytes:
    """The fake model's KV bytes of one token, layer, part (K 0, V 1, MLA 0) and head: a function of the prefix."""
    out = b""
    counter = 0
    while len(out) < nbytes:
        out += hashlib.sha256(prefix_digest + bytes([layer % 256, part, head % 256, counter % 256])).digest()
        counter += 1
    return out[:nbytes]


def prefix_digests(tokens: list[int]) -> list[bytes]:
    """Per position, a digest of the tokens up to and including it."""
    digests = []
    state = b"fake-vllm-model"
    for token in tokens:
        state = hashlib.sha256(state + token.to_bytes(4, "little")).digest()
        digests.append(state)
    return digests


@dataclasses.dataclass
class CacheSpec:
    backend: str = "flash_attn"
    layout: str = "NHD"
    num_layers: int = 3
    heads: int = 2
    """KV heads of this rank (MLA: ignored)."""
    head_dim: int = 8
    dtype: FakeDtype = dataclasses.field(default_factory=lambda: BFLOAT16)

    @property
    def parts(self) -> int:
        return 1 if self.backend == "mla" else 2

    @property
    def row_heads(self) -> int:
        return 1 if self.backend == "mla" else self.heads


def layer_name(index: int) -> str:
    return f"model.layers.{index}.self_attn.attn"


class ModelRunner:
    """One worker (one TP rank): its KV caches and the connector calls of a forward pass, in vLLM's order. With
    ``torch``, the caches are torch CPU tensors and the connector is given those. It learns a request's new tokens
    from ``CachedRequestData.new_token_ids``, which the fake scheduler always fills (vLLM fills it only with pipeline
    parallelism; its model runner otherwise keeps the tokens it sampled itself)."""

    def __init__(self, connector: Any, spec: CacheSpec, num_blocks: int, block_size: int, tp_rank: int = 0,
                 torch: Any = None):
        self.connector = connector
        self.spec = spec
        self.block_size = block_size
        self.tp_rank = tp_rank
        self.kv_caches = {layer_name(i): allocate_kv_cache(spec.backend, spec.layout, num_blocks, block_size,
                                                           spec.heads, spec.head_dim, spec.dtype, torch)
                          for i in range(spec.num_layers)}
        # vLLM passes them in its own order; the connector must not depend on it
        shuffled = {name: getattr(tensor, "torch", tensor) for name, tensor in reversed(list(self.kv_caches.items()))}
        if connector is not None:
            connector.register_kv_caches(shuffled)
        self.tokens: dict[str, list[int]] = {}
        self.block_ids: dict[str, list[int]] = {}
        self.layer_calls: list[str] = []

    def _index(self, backend: str, part: int, block: int, offset: int, head: int) -> tuple[int, ...]:
        if backend == "flash_attn":
            return (part, block, offset, head, 0)
        if backend == "flashinfer":
            return (block, part, offset, head, 0)
        return (block, offset, 0)

    def write_token(self, layer: int, block: int, offset: int, digest: bytes) -> None:
        """``reshape_and_cache``: one token's K and V (or latent) of one layer into its slot."""
        tensor = self.kv_caches[layer_name(layer)]
        spec = self.spec
        row = spec.head_dim * spec.dtype.itemsize
        for part in range(spec.parts):
            for head in range(spec.row_heads):
                global_head = self.tp_rank * spec.heads + head if spec.backend != "mla" else 0
                data = token_kv(digest, layer, part, global_head, row)
                ctypes.memmove(tensor.address(self._index(spec.backend, part, block, offset, head)), data, row)

    def read_block(self, layer: int, block: int) -> bytes:
        """A block of one layer, in page order (parts, then tokens, heads, dims)."""
        tensor = self.kv_caches[layer_name(layer)]
        spec = self.spec
        row = spec.head_dim * spec.dtype.itemsize
        out = bytearray()
        for part in range(spec.parts):
            for offset in range(self.block_size):
                for head in range(spec.row_heads):
                    out += ctypes.string_at(tensor.address(self._index(spec.backend, part, block, offset, head)), row)
        return bytes(out)

    def expected_block(self, tokens: list[int], index: int, layer: int) -> bytes:
        """What the fake model computes for block ``index`` of ``tokens`` in one layer, in :meth:`read_block`'s
        order."""
        spec = self.spec
        row = spec.head_dim * spec.dtype.itemsize
        digests = prefix_digests(tokens[:(index + 1) * self.block_size])
        out = bytearray()
        for part in range(spec.parts):
            for offset in range(self.block_size):
                for head in range(spec.row_heads):
                    global_head = self.tp_rank * spec.heads + head if spec.backend != "mla" else 0
                    out += token_kv(digests[index * self.block_size + offset], layer, part, global_head, row)
        return bytes(out)

    def execute_model(self, output: SchedulerOutput) -> ModelRunnerOutput:
        for new in output.scheduled_new_reqs:
            self.tokens[new.req_id] = list(new.prompt_token_ids)
            self.block_ids[new.req_id] = list(new.block_ids[0])
        cached = output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            self.tokens[req_id].extend(cached.new_token_ids[i])
            if cached.new_block_ids[i] is not None:
                if req_id in cached.resumed_req_ids:
                    self.block_ids[req_id] = list(cached.new_block_ids[i][0])
                else:
                    self.block_ids[req_id].extend(cached.new_block_ids[i][0])
        starts = {new.req_id: new.num_computed_tokens for new in output.scheduled_new_reqs}
        starts.update(zip(cached.req_ids, cached.num_computed_tokens))
        connector = self.connector
        if connector is not None and output.kv_connector_metadata is not None:
            connector.bind_connector_metadata(output.kv_connector_metadata)
            connector.start_load_kv(types.SimpleNamespace(attn_metadata={}, no_compile_layers={}))
        work = []
        for req_id, n in output.num_scheduled_tokens.items():
            tokens = self.tokens[req_id]
            start = starts[req_id]
            digests = prefix_digests(tokens[:start + n])
            work.append((req_id, start, n, digests))
        for layer in range(self.spec.num_layers):
            name = layer_name(layer)
            if connector is not None:
                connector.wait_for_layer_load(name)
            for req_id, start, n, digests in work:
                blocks = self.block_ids[req_id]
                for pos in range(start, start + n):
                    self.write_token(layer, blocks[pos // self.block_size], pos % self.block_size, digests[pos])
            if connector is not None:
                tensor = self.kv_caches[name]
                connector.save_kv_layer(name, getattr(tensor, "torch", tensor), None)
            self.layer_calls.append(name)
        sampled = {req_id: next_token(self.tokens[req_id][:start + n]) for req_id, start, n, _ in work}
        connector_output = KVConnectorOutput()
        if connector is not None:
            connector.wait_for_save()
            connector_output.finished_sending, connector_output.finished_recving = \
                connector.get_finished(output.finished_req_ids)
            connector_output.invalid_block_ids = connector.get_block_ids_with_load_errors()
            connector.clear_connector_metadata()
        return ModelRunnerOutput(sampled, connector_output)


def next_token(tokens: list[int]) -> int:
    """The fake model's next token: a function of the whole sequence."""
    return int.from_bytes(hashlib.sha256(repr(tokens).encode()).digest()[:2], "little") % 30000


# ----------------------------------------------------------------------------------------------- configs


@dataclasses.dataclass
class ModelConfig:
    model: str = "fake/llama"
    dtype: Any = BFLOAT16
    use_mla: bool = False
    revision: Optional[str] = None
    quantization: Optional[str] = None


@dataclasses.dataclass
class CacheConfig:
    block_size: int = 16
    cache_dtype: str = "auto"
    hash_block_size: Optional[int] = None


@dataclasses.dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    rank: int = 0


@dataclasses.dataclass
class KVTransferConfig:
    """``vllm/config/kv_transfer.py: KVTransferConfig`` (the fields a connector reads)."""

    kv_connector: Optional[str] = "HiCacheConnector"
    kv_connector_module_path: Optional[str] = "hicache.vllm"
    kv_role: Optional[str] = "kv_both"
    kv_connector_extra_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    kv_load_failure_policy: str = "recompute"
    engine_id: Optional[str] = None

    def get_from_extra_config(self, key: str, default: Any) -> Any:
        return self.kv_connector_extra_config.get(key, default)

    @property
    def is_kv_producer(self) -> bool:
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self) -> bool:
        return self.kv_role in ("kv_consumer", "kv_both")


@dataclasses.dataclass
class VllmConfig:
    model_config: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    cache_config: CacheConfig = dataclasses.field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = dataclasses.field(default_factory=ParallelConfig)
    kv_transfer_config: Optional[KVTransferConfig] = dataclasses.field(default_factory=KVTransferConfig)


@dataclasses.dataclass
class KVCacheGroupSpec:
    layer_names: list[str]


@dataclasses.dataclass
class KVCacheConfig:
    """``vllm/v1/kv_cache_interface.py: KVCacheConfig``."""

    num_blocks: int
    kv_cache_groups: list[KVCacheGroupSpec]


class KVConnectorRole(enum.Enum):
    """``base.py: KVConnectorRole``."""

    SCHEDULER = 0
    WORKER = 1


def supports_kw(callable_: Any, name: str) -> bool:
    """``vllm/utils: supports_kw``: whether ``callable_`` takes a keyword argument ``name``."""
    parameters = inspect.signature(callable_).parameters
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def get_connector_class(config: KVTransferConfig) -> type:
    """``KVConnectorFactory.get_connector_class``: the module path first; a class without the three-argument
    constructor is refused."""
    if config.kv_connector_module_path:
        module = importlib.import_module(config.kv_connector_module_path)
        cls = getattr(module, str(config.kv_connector))
        if not supports_kw(cls, "kv_cache_config"):
            raise ValueError(f"Connector {cls.__name__} uses deprecated 2-argument constructor signature")
        return cls
    raise ValueError(f"Unsupported connector type: {config.kv_connector}")


def create_connector(vllm_config: VllmConfig, role: Any, kv_cache_config: Any) -> Any:
    """``KVConnectorFactory.create_connector``."""
    assert vllm_config.kv_transfer_config is not None
    cls = get_connector_class(vllm_config.kv_transfer_config)
    return cls(vllm_config, role, kv_cache_config)


# ------------------------------------------------------------------------------------------------ engines


class Engine:
    """One vLLM instance: a scheduler with its connector and one model runner per TP rank, each with its own."""

    def __init__(self, extra_config: dict[str, Any], spec: Optional[CacheSpec] = None, *, num_blocks: int = 64,
                 block_size: int = 16, tp_size: int = 1, block_order: Optional[list[int]] = None,
                 model: str = "fake/llama", kv_role: str = "kv_both", seed: Optional[str] = "0",
                 hash_fn: Callable[[Any], bytes] = sha256, max_num_batched_tokens: int = 1 << 20,
                 revision: Optional[str] = None, connector: bool = True, torch: Any = None,
                 staging: bool = False):
        self.spec = spec or CacheSpec()
        self.block_size = block_size
        self.configs = []
        groups = KVCacheConfig(num_blocks, [KVCacheGroupSpec([layer_name(i) for i in range(self.spec.num_layers)])])
        self.runners = []
        scheduler_connector = None
        for rank in ([-1] if connector else []) + list(range(tp_size)):
            config = VllmConfig(ModelConfig(model=model, dtype=self.spec.dtype, use_mla=self.spec.backend == "mla",
                                            revision=revision),
                                CacheConfig(block_size=block_size),
                                ParallelConfig(tensor_parallel_size=tp_size, rank=max(rank, 0)),
                                KVTransferConfig(kv_role=kv_role, kv_connector_extra_config=dict(extra_config)))
            self.configs.append(config)
            if rank < 0:
                scheduler_connector = create_connector(config, KVConnectorRole.SCHEDULER, groups)
        for rank in range(tp_size):
            worker_connector = None
            if connector:
                worker_connector = create_connector(self.configs[rank + 1], KVConnectorRole.WORKER, groups)
                worker_connector.worker_side.staging_on_host = staging
            self.runners.append(ModelRunner(worker_connector, self.spec, num_blocks, block_size, rank, torch))
        self.scheduler_connector = scheduler_connector
        self.scheduler = Scheduler(scheduler_connector, num_blocks, block_size, block_order, max_num_batched_tokens)
        self.hasher = get_request_block_hasher(block_size, hash_fn, seed)
        self.steps = 0

    def request(self, req_id: str, tokens: list[int], max_tokens: int = 4, **kwargs: Any) -> Request:
        request = Request(req_id, tokens, self.hasher, max_tokens=max_tokens, **kwargs)
        self.scheduler.add_request(request)
        return request

    def step(self) -> SchedulerOutput:
        output = self.scheduler.schedule()
        self.execute(output)
        return output

    def execute(self, output: SchedulerOutput) -> None:
        results = [runner.execute_model(output) for runner in self.runners]
        # KVOutputAggregator: invalid blocks of every worker together
        merged = KVConnectorOutput(invalid_block_ids=set().union(*(r.kv_connector_output.invalid_block_ids
                                                                   for r in results)))
        self.scheduler.update_from_output(output, ModelRunnerOutput(results[0].sampled, merged))
        self.steps += 1

    def run(self, max_steps: int = 200) -> None:
        while self.scheduler.has_unfinished_requests():
            self.step()
            if self.steps > max_steps:
                raise AssertionError("the engine did not finish")

    def shutdown(self) -> None:
        for connector in [self.scheduler_connector] + [r.connector for r in self.runners]:
            if connector is not None:
                connector.shutdown()


# ------------------------------------------------------------------------------------- "vLLM is installed"


def install_as_vllm() -> None:
    """Puts modules named as vLLM's into ``sys.modules``: ``vllm.distributed.kv_transfer.kv_connector.v1.base``
    with a ``KVConnectorBase_V1`` that has ``base.py``'s constructor and defaults. For a process that tests the
    connector's "vLLM installed" path; call it before importing ``hicache.vllm``."""
    names = ["vllm", "vllm.distributed", "vllm.distributed.kv_transfer", "vllm.distributed.kv_transfer.kv_connector",
             "vllm.distributed.kv_transfer.kv_connector.v1", "vllm.distributed.kv_transfer.kv_connector.v1.base"]
    modules = {name: types.ModuleType(name) for name in names}
    for name, module in modules.items():
        module.__path__ = []
        sys.modules[name] = module
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(modules[parent], child, module)
    base = modules[names[-1]]

    class KVConnectorMetadata:
        pass

    class KVConnectorBase_V1:
        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            if vllm_config.kv_transfer_config is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role

        def bind_connector_metadata(self, connector_metadata: Any) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> Any:
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def get_block_ids_with_load_errors(self) -> set[int]:
            return set()

    for cls in (KVConnectorBase_V1, KVConnectorMetadata):
        cls.__module__ = base.__name__
        cls.__qualname__ = cls.__name__
    base.KVConnectorBase_V1 = KVConnectorBase_V1
    base.KVConnectorMetadata = KVConnectorMetadata
    base.KVConnectorRole = KVConnectorRole
