"""The connector's worker side: pages between vLLM's paged KV caches and the daemon.

vLLM's model runner (``vllm/v1/worker/kv_connector_model_runner_mixin.py``) binds the step's metadata, calls
``start_load_kv`` before the forward pass, ``wait_for_layer_load`` and ``save_kv_layer`` around each attention layer
(``vllm/attention/layer.py``), ``wait_for_save`` when the forward pass ends, then asks
``get_block_ids_with_load_errors``. A page holds a block of every layer (:mod:`layout`), so:

* ``start_load_kv`` reads the step's pages and writes every layer of their blocks before the forward pass;
  ``wait_for_layer_load`` then has nothing to wait for.
* ``save_kv_layer`` copies the layer's blocks out of a GPU cache into pinned staging as soon as the layer's KV is
  written (host caches need nothing: the pages are read from them in place); ``wait_for_save`` stores the pages,
  from the staging in a background thread (the GPU blocks may be reused at once) or from host caches before it
  returns (they may not be).

A page the daemon does not deliver whole (a miss, a timeout, a failed checksum, the daemon down) is reported by
``get_block_ids_with_load_errors``, so vLLM recomputes from that block on (``kv_load_failure_policy: recompute``):
a block is never left holding part of a page. Nothing here raises into vLLM.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
from typing import Any, Optional, Protocol, Sequence

from ..errors import HiCacheError
from ..namespace import Namespace
from ..protocol import HelloAnswer, Status
from .._logs import RateLimitedLog
from ._support import Counters
from .config import ConnectorSettings, EngineIdentity
from .layout import DeviceMover, KVLayout
from .scheduler import BlockTransfer, HiCacheConnectorMetadata

logger = logging.getLogger(__name__)

_STORED = (Status.OK, Status.EXISTS)


class TransferClient(Protocol):
    """What the worker side needs of a client (``HiCacheClient`` or ``HiCacheClusterClient``)."""

    def get(self, ns: Namespace, hashes: Sequence[Any], targets: Sequence[Any],
            timeout_s: Optional[float] = None) -> list[Status]: ...

    def put(self, ns: Namespace, hashes: Sequence[Any], sources: Sequence[Any],
            timeout_s: Optional[float] = None) -> list[Status]: ...

    def delete(self, ns: Namespace, hashes: Sequence[Any], timeout_s: Optional[float] = None) -> list[Status]: ...

    def handshake(self, timeout_s: Optional[float] = None) -> HelloAnswer: ...


def _flatten(transfers: Sequence[BlockTransfer], unique_keys: bool) -> tuple[list[int], list[bytes]]:
    ids: list[int] = []
    keys: list[bytes] = []
    seen: set[bytes] = set()
    for transfer in transfers:
        for block, key in zip(transfer.block_ids, transfer.keys):
            if unique_keys:
                if key in seen:
                    continue
                seen.add(key)
            ids.append(block)
            keys.append(key)
    return ids, keys


@dataclasses.dataclass
class _SavePlan:
    """The device path's saves of one step: blocks, keys, and which layers of the first chunk are staged."""

    ids: list[int]
    keys: list[bytes]
    buffer: Any
    rows: int
    """Blocks in the first chunk (``min(len(ids), capacity)``)."""
    ids_tensor: Any
    staged: set[int] = dataclasses.field(default_factory=set)


class WorkerSide:
    """State of one worker (one TP rank of one pipeline stage)."""

    def __init__(self, settings: ConnectorSettings, identity: EngineIdentity, client: TransferClient,
                 tp_rank: int, pp_rank: int, loads: bool, saves: bool) -> None:
        self.settings = settings
        self.identity = identity
        self.client = client
        self.tp_rank = tp_rank
        self.pp_rank = pp_rank
        self.namespace = identity.namespace(tp_rank, pp_rank)
        self.loads = loads
        self.writes = saves and (not identity.is_mla or tp_rank == 0)
        """Whether this rank stores pages: every rank for MHA; for MLA (the same KV on every rank) rank 0."""
        self.staging_on_host = False
        """Move host caches through staging as GPU caches are (a test of the GPU path without a GPU)."""
        self.layout: Optional[KVLayout] = None
        self.mover: Optional[DeviceMover] = None
        self.counters = Counters()
        self._log = RateLimitedLog(logger)
        self._layer_index: dict[str, int] = {}
        self._load_errors: set[int] = set()
        self._errors_lock = threading.Lock()
        self._plan: Optional[_SavePlan] = None
        self._saver: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._pending: Optional[concurrent.futures.Future[None]] = None

    # ----------------------------------------------------------------------------------------------- set-up

    def register(self, kv_caches: dict[str, Any]) -> None:
        """``register_kv_caches``: the layout of the caches; ValueError for caches it cannot move."""
        layout = KVLayout(kv_caches, self.identity.block_size)
        if layout.is_mla != self.identity.is_mla:
            raise ValueError(f"vLLM's config says use_mla={self.identity.is_mla}, but the KV caches hold "
                             f"{layout.num_parts} part(s) per block")
        if layout.on_host and not self.staging_on_host:
            layout.check_host()
            self.mover = None
        else:
            self.mover = DeviceMover(layout, self.settings.staging_bytes)
        self.layout = layout
        self._layer_index = {name: i for i, name in enumerate(layout.layer_names)}
        logger.info("HiCache vLLM connector: rank %d/%d%s, %s, namespace %s, %s", self.tp_rank,
                    self.identity.tp_size, f" (pipeline stage {self.pp_rank})" if self.identity.pp_size > 1 else "",
                    layout.describe(), self.identity.describe(self.namespace),
                    "in place (host caches)" if self.mover is None else
                    f"through pinned staging of up to {self.mover.capacity} blocks")
        try:
            limit = self.client.handshake().max_page_bytes
        except HiCacheError as e:
            logger.warning("HiCache vLLM connector: the daemon does not answer yet (%s); loads fail (and are "
                           "recomputed) and saves are dropped until it does", e)
            return
        if layout.page_bytes > limit:
            logger.error("HiCache vLLM connector: a page (a block of every layer) is %d bytes, over the daemon's "
                         "server.max-page-bytes of %d: nothing will be stored. Start the daemon with "
                         "--server.max-page-bytes %d (and --server.max-frame-bytes above it), or use a smaller "
                         "--block-size", layout.page_bytes, limit, layout.page_bytes)

    def close(self) -> None:
        self._wait_pending()
        if self._saver is not None:
            self._saver.shutdown(wait=True)
            self._saver = None

    # ------------------------------------------------------------------------------------------------ loads

    def take_load_errors(self) -> set[int]:
        """``get_block_ids_with_load_errors``: the blocks whose load failed since the last call."""
        with self._errors_lock:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def _failed(self, ids: Sequence[int]) -> None:
        with self._errors_lock:
            self._load_errors.update(ids)
        self.counters.add(blocks_load_failed=len(ids))

    def load(self, meta: Optional[HiCacheConnectorMetadata]) -> None:
        """``start_load_kv``: every page of the step's loads into its blocks; failures are remembered."""
        if meta is None or not meta.loads:
            return
        ids, keys = _flatten(meta.loads, unique_keys=False)
        if not ids:
            return
        if self.layout is None or not self.loads:
            self._log.error("no-caches", "HiCache vLLM connector: asked to load %d blocks %s; they are recomputed",
                            len(ids), "before vLLM registered its KV caches" if self.layout is None
                            else "although loads are off")
            self._failed(ids)
            return
        try:
            if self.mover is None:
                statuses = self.client.get(self.namespace, keys, [self.layout.host_page(b) for b in ids])
                self._note_loads(ids, statuses, keys)
            else:
                self._load_staged(self.mover, ids, keys)
        except Exception as e:  # never into vLLM: the blocks are recomputed
            self._log.error("load", "HiCache vLLM connector: loading %d blocks failed (%s: %s); they are recomputed",
                            len(ids), type(e).__name__, e)
            self._failed(ids)

    def _load_staged(self, mover: DeviceMover, ids: list[int], keys: list[bytes]) -> None:
        done = 0
        try:
            while done < len(ids):
                chunk_ids, chunk_keys = ids[done:done + mover.capacity], keys[done:done + mover.capacity]
                buffer = mover.buffer("load", len(chunk_ids))
                statuses = self.client.get(self.namespace, chunk_keys,
                                           [mover.page(buffer, row) for row in range(len(chunk_ids))])
                rows = [row for row, status in enumerate(statuses) if status is Status.OK]
                if rows:
                    mover.stage_in(buffer, rows, mover.block_ids([chunk_ids[row] for row in rows]))
                self._note_loads(chunk_ids, statuses, chunk_keys)
                done += len(chunk_ids)
        except Exception:
            self._failed(ids[done:])
            raise

    def _note_loads(self, ids: Sequence[int], statuses: Sequence[Status], keys: Sequence[bytes]) -> None:
        failed = [(b, s) for b, s in zip(ids, statuses) if s is not Status.OK]
        self.counters.add(blocks_loaded=len(ids) - len(failed))
        wrong_size = [k for k, s in zip(keys, statuses) if s is Status.SIZE_MISMATCH]
        if wrong_size:
            # A page of this namespace with another size can never be loaded here: remove it, so that the page
            # recomputed now replaces it (a CORRUPT page the client removes itself).
            try:
                self.client.delete(self.namespace, wrong_size)
            except HiCacheError:
                pass
        if failed:
            self._failed([b for b, _ in failed])
            kinds = sorted({s.name for _, s in failed})
            self._log.warning(("load-status", tuple(kinds)), "HiCache vLLM connector: %d of %d pages did not load "
                              "(%s); vLLM recomputes from the first of them", len(failed), len(ids), "/".join(kinds))

    # ------------------------------------------------------------------------------------------------ saves

    def _wait_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _plan_for(self, mover: DeviceMover, meta: HiCacheConnectorMetadata) -> Optional[_SavePlan]:
        if self._plan is None:
            ids, keys = _flatten(meta.saves, unique_keys=True)
            if not ids:
                return None
            self._wait_pending()  # the previous step's put may still read the save buffer
            rows = min(len(ids), mover.capacity)
            self._plan = _SavePlan(ids, keys, mover.buffer("save", rows), rows, mover.block_ids(ids[:rows]))
        return self._plan

    def stage_layer(self, layer_name: str, meta: Optional[HiCacheConnectorMetadata]) -> None:
        """``save_kv_layer``: on the GPU path, copies the layer's blocks of this step's saves to staging."""
        if self.mover is None or meta is None or not meta.saves or not self.writes:
            return
        layer = self._layer_index.get(layer_name)
        if layer is None:
            return
        try:
            plan = self._plan_for(self.mover, meta)
            if plan is not None and layer not in plan.staged:
                self.mover.stage_out(plan.buffer, layer, plan.ids_tensor)
                plan.staged.add(layer)
        except Exception as e:
            self._log.error("stage", "HiCache vLLM connector: copying layer %s out for saving failed (%s: %s)",
                            layer_name, type(e).__name__, e)

    def save(self, meta: Optional[HiCacheConnectorMetadata]) -> None:
        """``wait_for_save``: stores the step's pages. Failures are logged, never raised (a page not stored is a
        later miss)."""
        if meta is None or not meta.saves or not self.writes or self.layout is None:
            self._plan = None
            return
        try:
            if self.mover is None:
                ids, keys = _flatten(meta.saves, unique_keys=True)
                statuses = self.client.put(self.namespace, keys, [self.layout.host_page(b) for b in ids])
                self._note_saves(len(ids), statuses)
            else:
                self._save_staged(self.mover, meta)
        except Exception as e:
            self._log.error("save", "HiCache vLLM connector: saving failed (%s: %s); those blocks are not stored",
                            type(e).__name__, e)
        finally:
            self._plan = None

    def _save_staged(self, mover: DeviceMover, meta: HiCacheConnectorMetadata) -> None:
        plan = self._plan_for(mover, meta)
        if plan is None:
            return
        layers = range(len(mover.layout.layer_names))
        first = 0
        while True:
            count = plan.rows if first == 0 else min(mover.capacity, len(plan.ids) - first)
            ids_tensor = plan.ids_tensor if first == 0 else mover.block_ids(plan.ids[first:first + count])
            for layer in layers:
                if first > 0 or layer not in plan.staged:
                    mover.stage_out(plan.buffer, layer, ids_tensor)
            event = mover.event()
            keys = plan.keys[first:first + count]
            first += count
            if first >= len(plan.ids):
                if self._saver is None:
                    self._saver = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hicache-vllm-save")
                self._pending = self._saver.submit(self._put_staged, mover, plan.buffer, keys, event)
                return
            self._put_staged(mover, plan.buffer, keys, event)  # the buffer is needed again for the next chunk

    def _put_staged(self, mover: DeviceMover, buffer: Any, keys: list[bytes], event: Any) -> None:
        try:
            mover.synchronize(event)
            statuses = self.client.put(self.namespace, keys, [mover.page(buffer, row) for row in range(len(keys))])
            self._note_saves(len(keys), statuses)
        except Exception as e:
            self._log.error("save", "HiCache vLLM connector: saving %d pages failed (%s: %s)", len(keys),
                            type(e).__name__, e)

    def _note_saves(self, count: int, statuses: Sequence[Status]) -> None:
        stored = sum(1 for s in statuses if s in _STORED)
        self.counters.add(blocks_saved=stored, blocks_save_failed=count - stored)
        failed = sorted({s.name for s in statuses if s not in _STORED})
        if failed:
            advice = (" (REJECTED: over the daemon's server.max-page-bytes, or no room)"
                      if "REJECTED" in failed else "")
            self._log.warning(("save-status", tuple(failed)), "HiCache vLLM connector: %d of %d pages were not "
                              "stored (%s)%s", count - stored, count, "/".join(failed), advice)
