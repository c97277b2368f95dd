"""The connector's scheduler side: how many leading blocks the daemon holds, and which blocks each step loads and
saves.

vLLM's scheduler (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``) calls, for a request leaving the
waiting queue, ``get_num_new_matched_tokens(request, num_computed_tokens)`` with the tokens its own prefix cache
holds, allocates blocks for the rest, and calls ``update_state_after_alloc(request, blocks, num_external_tokens)``
with all of the request's blocks; at the end of each step ``build_connector_meta(scheduler_output)`` makes the
metadata the workers get. Keys are vLLM's own block hashes (``request.block_hashes``: one per full block, chained
over the whole prefix and the request's extra keys), each turned into a page key by :func:`config.page_key`.

A block is offered only if every rank holds its page (every TP rank's namespace, and every pipeline stage's), from
the first block after vLLM's own prefix hits, without a gap, and never the block of the prompt's last token (vLLM
must compute at least one token). A lookup that fails (the daemon down, stalled past ``lookup_timeout_s``) answers
0 tokens, and further lookups answer 0 without asking for ``retry_after_s``: the scheduler never waits on a daemon
that is gone, and never raises into vLLM.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Optional, Protocol, Sequence

from ..errors import HiCacheAuthError, HiCacheError
from ..namespace import Namespace
from ._compat import KVConnectorMetadata
from .._logs import RateLimitedLog
from ._support import Counters
from .config import ConnectorSettings, EngineIdentity, block_keys, page_key

logger = logging.getLogger(__name__)


class LookupClient(Protocol):
    """What the scheduler side needs of a client (``HiCacheClient`` or ``HiCacheClusterClient``)."""

    def leading_hits(self, ns: Namespace, hashes: Sequence[Any], timeout_s: Optional[float] = None) -> int: ...


@dataclasses.dataclass
class BlockTransfer:
    """Blocks of one request to load or save this step: vLLM block ids and their page keys, in the same order."""

    req_id: str
    block_ids: list[int]
    keys: list[bytes]


@dataclasses.dataclass
class HiCacheConnectorMetadata(KVConnectorMetadata):
    """What the scheduler side sends the workers each step (vLLM pickles it into ``SchedulerOutput``)."""

    loads: list[BlockTransfer] = dataclasses.field(default_factory=list)
    saves: list[BlockTransfer] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Lookup:
    num_computed_tokens: int
    stored: list[tuple[int, int]]
    """Block ranges ``[start, end)`` every rank's namespace holds."""


@dataclasses.dataclass
class _Tracked:
    request: Any
    block_ids: list[int]
    saved: int = 0
    """Blocks ``[0, saved)`` are dealt with: saved, or known to be stored already."""
    stored: list[tuple[int, int]] = dataclasses.field(default_factory=list)


def _in(ranges: list[tuple[int, int]], index: int) -> bool:
    return any(start <= index < end for start, end in ranges)


def _first_group(blocks: Any) -> Optional[list[int]]:
    """The block ids of a ``KVCacheBlocks`` (``get_block_ids()``: one list per KV cache group) or of the tuple of
    lists ``NewRequestData.block_ids`` carries; None when there is not exactly one group."""
    groups = blocks.get_block_ids() if hasattr(blocks, "get_block_ids") else blocks
    if groups is None:
        return None
    groups = list(groups)
    if len(groups) != 1:
        return None
    return [int(b) for b in groups[0]]


class SchedulerSide:
    """State of the scheduler process. vLLM calls it from its one scheduler thread; a lock guards it anyway."""

    def __init__(self, settings: ConnectorSettings, identity: EngineIdentity, client: LookupClient,
                 loads: bool, saves: bool) -> None:
        self.settings = settings
        self.identity = identity
        self.client = client
        self.loads = loads
        self.saves = saves
        self.namespaces = identity.all_namespaces()
        self.counters = Counters()
        self._log = RateLimitedLog(logger)
        self._lock = threading.Lock()
        self._lookups: dict[str, _Lookup] = {}
        self._tracked: dict[str, _Tracked] = {}
        self._pending_loads: list[BlockTransfer] = []
        self._lookups_off_until = 0.0

    # ------------------------------------------------------------------------------------------------- lookups

    def _leading(self, keys: list[bytes]) -> int:
        """How many of ``keys``, from the first, every namespace holds."""
        count = len(keys)
        for ns in self.namespaces:
            if count == 0:
                break
            count = self.client.leading_hits(ns, keys[:count], timeout_s=self.settings.lookup_timeout_s)
        return count

    def matched_tokens(self, request: Any, num_computed_tokens: int) -> int:
        """``get_num_new_matched_tokens``: tokens beyond ``num_computed_tokens`` the workers can load."""
        if not (self.loads or self.saves):
            return 0
        req_id = str(request.request_id)
        hashes = getattr(request, "block_hashes", None)
        if hashes is None:
            self._log.error("no-hashes", "HiCache vLLM connector: requests have no block_hashes (a vLLM older than "
                            "its KV connector v1 interface of 2025?); nothing is loaded or saved")
            return 0
        bs, stride = self.identity.block_size, self.identity.hash_stride
        loadable = max(0, (int(request.num_tokens) - 1) // bs)
        keys = block_keys(hashes, stride, loadable)
        local = num_computed_tokens // bs
        aligned = num_computed_tokens % bs == 0
        now = time.monotonic()
        with self._lock:
            off = now < self._lookups_off_until
        stored: list[tuple[int, int]] = []
        matched = 0
        if not off and keys:
            try:
                first = self._leading(keys)
                stored.append((0, first))
                if first >= local:
                    matched = first - local
                elif local < len(keys):
                    more = self._leading(keys[local:])
                    stored.append((local, local + more))
                    matched = more
                self.counters.add(lookups=1, blocks_found=matched)
            except Exception as e:  # never into vLLM's scheduler: the request computes its prefix
                with self._lock:
                    self._lookups_off_until = time.monotonic() + self.settings.retry_after_s
                self.counters.add(lookups_failed=1)
                # A refused token or an older daemon (ValueError: a namespace its protocol cannot carry) is a
                # configuration mistake, logged as an error; an outage is a warning.
                level = logging.WARNING if isinstance(e, HiCacheError) and not isinstance(e, HiCacheAuthError) \
                    else logging.ERROR
                self._log.log(level, ("lookup", type(e).__name__), "HiCache vLLM connector: prefix lookup failed "
                              "(%s: %s); requests compute their prefixes, lookups resume in %.0f s",
                              type(e).__name__, e, self.settings.retry_after_s)
                stored, matched = [], 0
        if not self.loads or not aligned:
            matched = 0
        with self._lock:
            self._lookups[req_id] = _Lookup(num_computed_tokens, stored)
        return matched * bs

    # ------------------------------------------------------------------------------------------ block tracking

    def after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        """``update_state_after_alloc``: remembers the request's blocks, and the blocks to load this step."""
        req_id = str(request.request_id)
        with self._lock:
            lookup = self._lookups.pop(req_id, None)
        block_ids = _first_group(blocks)
        if block_ids is None:
            self._log.error("groups", "HiCache vLLM connector: request %s has several KV cache groups (a hybrid "
                            "model?), which the connector does not support; it loads and saves nothing for it",
                            req_id)
            if num_external_tokens > 0:
                raise ValueError("the HiCache vLLM connector cannot load into several KV cache groups")
            return
        tracked = _Tracked(request, list(block_ids), stored=list(lookup.stored) if lookup else [])
        if num_external_tokens > 0:
            if lookup is None:
                raise ValueError(f"vLLM asked request {req_id} to load {num_external_tokens} tokens that the HiCache "
                                 "connector did not offer")
            bs, stride = self.identity.block_size, self.identity.hash_stride
            start = lookup.num_computed_tokens // bs
            end = start + -(-num_external_tokens // bs)
            keys = block_keys(request.block_hashes, stride, end)[start:]
            ids = block_ids[start:end]
            if len(keys) != end - start or len(ids) != end - start:
                raise ValueError(f"request {req_id}: {end - start} blocks to load but {len(keys)} hashes and "
                                 f"{len(ids)} blocks")
            with self._lock:
                self._pending_loads.append(BlockTransfer(req_id, ids, keys))
            self.counters.add(blocks_to_load=len(ids))
        with self._lock:
            self._tracked[req_id] = tracked

    def build_meta(self, scheduler_output: Any) -> HiCacheConnectorMetadata:
        """``build_connector_meta``: this step's loads, and the full blocks whose KV this step completes."""
        with self._lock:
            meta = HiCacheConnectorMetadata(loads=self._pending_loads)
            self._pending_loads = []
            scheduled = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
            for new in getattr(scheduler_output, "scheduled_new_reqs", None) or ():
                tracked = self._tracked.get(str(new.req_id))
                if tracked is None:
                    continue
                ids = _first_group(new.block_ids)
                if ids is not None:
                    tracked.block_ids = ids
                self._collect_saves(str(new.req_id), tracked,
                                    int(new.num_computed_tokens) + int(scheduled.get(new.req_id, 0)), meta)
            cached = getattr(scheduler_output, "scheduled_cached_reqs", None)
            if cached is not None:
                resumed_ids = getattr(cached, "resumed_req_ids", None)
                resumed_flags = getattr(cached, "resumed_from_preemption", None)
                for i, req_id in enumerate(cached.req_ids):
                    tracked = self._tracked.get(str(req_id))
                    if tracked is None:
                        continue
                    resumed = (req_id in resumed_ids) if resumed_ids is not None else \
                        bool(resumed_flags[i]) if resumed_flags is not None else False
                    new_ids = _first_group(cached.new_block_ids[i]) if cached.new_block_ids[i] is not None else []
                    if new_ids is None:
                        continue
                    if resumed:
                        tracked.block_ids = new_ids
                    else:
                        tracked.block_ids.extend(new_ids)
                    self._collect_saves(str(req_id), tracked,
                                        int(cached.num_computed_tokens[i]) + int(scheduled.get(req_id, 0)), meta)
        return meta

    def _collect_saves(self, req_id: str, tracked: _Tracked, computed_after: int,
                       meta: HiCacheConnectorMetadata) -> None:
        if not self.saves:
            return
        request = tracked.request
        hashes = getattr(request, "block_hashes", None)
        if hashes is None:
            return
        bs, stride = self.identity.block_size, self.identity.hash_stride
        limit = min(computed_after, int(request.num_tokens))
        if not self.settings.save_decode_blocks:
            limit = min(limit, int(getattr(request, "num_prompt_tokens", limit)))
        full = min(limit // bs, len(hashes) // stride, len(tracked.block_ids))
        publishable = getattr(request, "num_publishable_block_hashes", None)
        if isinstance(publishable, int):
            full = min(full, publishable // stride)
        ids: list[int] = []
        keys: list[bytes] = []
        for i in range(tracked.saved, full):
            if _in(tracked.stored, i):
                continue
            ids.append(tracked.block_ids[i])
            keys.append(page_key(hashes[(i + 1) * stride - 1]))
        tracked.saved = max(tracked.saved, full)
        if ids:
            meta.saves.append(BlockTransfer(req_id, ids, keys))
            self.counters.add(blocks_to_save=len(ids))

    def invalid_blocks(self, block_ids: set[int]) -> None:
        """Blocks the workers failed to load: vLLM recomputes the requests from the first one, and their KV is
        saved again as it is recomputed."""
        if not block_ids:
            return
        with self._lock:
            for tracked in self._tracked.values():
                bad = [i for i, b in enumerate(tracked.block_ids) if b in block_ids]
                if bad:
                    first = bad[0]
                    tracked.saved = min(tracked.saved, first)
                    tracked.stored = [(s, min(e, first)) for s, e in tracked.stored if s < first]

    def finished(self, request: Any) -> None:
        """``request_finished``: forgets the request (its pages were saved as its blocks filled)."""
        req_id = str(request.request_id)
        with self._lock:
            self._tracked.pop(req_id, None)
            self._lookups.pop(req_id, None)
