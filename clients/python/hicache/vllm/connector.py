"""``HiCacheConnector``: a vLLM KV connector (v1 interface) on the HiCache daemon (``./hicache serve``).

Start vLLM with::

    --kv-transfer-config '{"kv_connector": "HiCacheConnector", "kv_connector_module_path": "hicache.vllm",
        "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": {"host": "127.0.0.1", "port": 7370, "weights_revision": "<commit>"}}'

vLLM builds one connector in its scheduler process (role ``SCHEDULER``) and one in each worker (role ``WORKER``),
as ``HiCacheConnector(vllm_config, role, kv_cache_config)``. The scheduler side is :mod:`scheduler`, the worker
side :mod:`worker`; pages are laid out by :mod:`layout` and named by :mod:`config`. See ``docs/vllm.md``.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Optional, Union

from ..client import HiCacheClient
from ..cluster import HiCacheClusterClient
from ..errors import HiCacheAuthError, HiCacheError
from ._compat import (KVConnectorBase_V1, KVConnectorMetadata, base_reports_load_errors, base_takes_kv_cache_config,
                      role_name)
from .config import OWN_KEYS, ConnectorSettings, EngineIdentity
from .scheduler import HiCacheConnectorMetadata, SchedulerSide
from .worker import WorkerSide

logger = logging.getLogger(__name__)

_STARTUP_CHECK_S = 2.0


def _kv_roles(kv_role: Any) -> tuple[bool, bool]:
    """(loads, saves) for vLLM's ``kv_role``: ``kv_consumer`` loads, ``kv_producer`` saves, ``kv_both`` (or none)
    does both."""
    role = str(kv_role or "kv_both")
    if role not in ("kv_both", "kv_producer", "kv_consumer"):
        raise ValueError(f"kv_role must be kv_both, kv_producer or kv_consumer, was {kv_role!r}")
    return role in ("kv_both", "kv_consumer"), role in ("kv_both", "kv_producer")


def worker_ranks(vllm_config: Any) -> tuple[int, int]:
    """This worker's (TP rank, pipeline rank): from vLLM's process groups when vLLM is there, else from
    ``parallel_config.rank`` (laid out as vLLM lays out ranks: pipeline stage major, TP rank minor)."""
    try:
        state = importlib.import_module("vllm.distributed.parallel_state")
        return int(state.get_tensor_model_parallel_rank()), int(state.get_pp_group().rank_in_group)
    except Exception:
        pass
    parallel = getattr(vllm_config, "parallel_config", None)
    tp_size = int(getattr(parallel, "tensor_parallel_size", 1) or 1)
    pp_size = int(getattr(parallel, "pipeline_parallel_size", 1) or 1)
    rank = int(getattr(parallel, "rank", 0) or 0)
    return rank % tp_size, (rank // tp_size) % pp_size


class HiCacheConnector(KVConnectorBase_V1):
    """vLLM's ``KVConnectorBase_V1`` on a HiCache daemon. See the module documentation and ``docs/vllm.md``."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        if base_takes_kv_cache_config():
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:  # pragma: no cover - vLLM releases before the three-argument constructor
            super().__init__(vllm_config=vllm_config, role=role)
        transfer = vllm_config.kv_transfer_config
        extra = getattr(transfer, "kv_connector_extra_config", None) or {}
        self.settings = ConnectorSettings.from_extra_config(extra)
        self.identity = EngineIdentity.from_vllm_config(vllm_config, self.settings)
        self.role_name = role_name(role)
        loads, saves = _kv_roles(getattr(transfer, "kv_role", None))
        if self.settings.unknown_keys:
            logger.warning("HiCache vLLM connector: kv_connector_extra_config keys %s are not known and were ignored; "
                           "known: %s", ", ".join(self.settings.unknown_keys), ", ".join(OWN_KEYS))
        if loads and not base_reports_load_errors():
            logger.error("HiCache vLLM connector: this vLLM cannot be told about blocks that failed to load "
                         "(get_block_ids_with_load_errors), so the connector only saves: a failed load would leave "
                         "wrong KV")
            loads = False
        groups = getattr(kv_cache_config, "kv_cache_groups", None)
        if groups is not None and len(groups) > 1:
            logger.error("HiCache vLLM connector: the model has %d KV cache groups (a hybrid model: sliding window, "
                         "Mamba...), which the connector does not support; it neither loads nor saves", len(groups))
            loads = saves = False
        self.loads, self.saves = loads, saves
        self.client: Union[HiCacheClient, HiCacheClusterClient] = self._make_client(self.role_name == "WORKER")
        self._check_daemon()
        self._scheduler: Optional[SchedulerSide] = None
        self._worker: Optional[WorkerSide] = None
        if self.role_name == "SCHEDULER":
            policy = getattr(transfer, "kv_load_failure_policy", None)
            if loads and policy is not None and str(policy) != "recompute":
                logger.warning("HiCache vLLM connector: kv_load_failure_policy is %r, so a page that cannot be "
                               "loaded ends its request with an error; set \"kv_load_failure_policy\": \"recompute\" "
                               "in --kv-transfer-config to recompute it instead", policy)
            if not self.identity.revision:
                logger.warning("HiCache vLLM connector: no weights revision (kv_connector_extra_config "
                               "'weights_revision', or vLLM's --revision): pages of another checkpoint served under "
                               "the model name %r would be served as this one's (docs/keys.md)", self.identity.model)
            self._scheduler = SchedulerSide(self.settings, self.identity, self.client, loads, saves)
            logger.info("HiCache vLLM connector (scheduler): %s, %s, looking up %d namespace(s) per request",
                        self._where(), "loads and saves" if loads and saves else "loads" if loads else
                        "saves" if saves else "off", len(self._scheduler.namespaces))
        else:
            tp_rank, pp_rank = worker_ranks(vllm_config)
            self._worker = WorkerSide(self.settings, self.identity, self.client, tp_rank, pp_rank, loads, saves)

    # -------------------------------------------------------------------------------------------------- plumbing

    def _make_client(self, moves_pages: bool) -> Union[HiCacheClient, HiCacheClusterClient]:
        """The workers' client moves pages (through the daemon's slab file on the same host, per ``local``); the
        scheduler's only looks pages up, over TCP: it never maps the slab (which takes a while for a large one)."""
        s = self.settings
        local = s.local if moves_pages else False
        pool = s.pool_size if moves_pages else 1
        if s.cluster_etcd:
            return HiCacheClusterClient(list(s.cluster_etcd), s.cluster_name, token=s.token, pool_size=pool,
                                        timeout_s=s.timeout_s, local=local)
        return HiCacheClient(s.host, s.port, token=s.token, pool_size=pool, timeout_s=s.timeout_s, local=local)

    def _where(self) -> str:
        s = self.settings
        return (f"cluster {s.cluster_name!r} at {','.join(s.cluster_etcd)}" if s.cluster_etcd
                else f"daemon at {s.host}:{s.port}")

    def _check_daemon(self) -> None:
        """Says early whether the daemon answers; only a refused token fails the start (a daemon that is down may
        come up later: until then requests compute their prefixes)."""
        # A worker's first connection maps the slab file (same host): give it the whole timeout.
        timeout = self.settings.timeout_s if self.role_name == "WORKER" else min(_STARTUP_CHECK_S,
                                                                                 self.settings.timeout_s)
        try:
            self.client.health(timeout_s=timeout)
        except HiCacheAuthError as e:
            self.client.close()
            raise ValueError(f"the HiCache daemon refused kv_connector_extra_config 'token': {e}") from e
        except HiCacheError as e:
            logger.warning("HiCache vLLM connector: the %s does not answer (%s); requests compute their prefixes "
                           "until it does", self._where(), e)

    @property
    def requires_kv_delivery(self) -> bool:
        """False: a cache, not a hand-off (vLLM's ``KVConnectorBase_V1.requires_kv_delivery``); a save that a
        preemption drops is a later miss, nothing more."""
        return False

    @property
    def scheduler_side(self) -> SchedulerSide:
        if self._scheduler is None:
            raise RuntimeError("this connector was built for a worker, not the scheduler")
        return self._scheduler

    @property
    def worker_side(self) -> WorkerSide:
        if self._worker is None:
            raise RuntimeError("this connector was built for the scheduler, not a worker")
        return self._worker

    def _metadata(self) -> Optional[HiCacheConnectorMetadata]:
        if not self.has_connector_metadata():
            return None
        meta = self._get_connector_metadata()
        return meta if isinstance(meta, HiCacheConnectorMetadata) else None

    def stats(self) -> dict[str, int]:
        """Counters of this side: lookups, blocks offered, loaded, failed, saved..."""
        side = self._scheduler or self._worker
        return side.counters.snapshot() if side is not None else {}

    # ---------------------------------------------------------------------------------------------- worker side

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self.worker_side.register(kv_caches)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self.worker_side.load(self._metadata())

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None  # start_load_kv wrote every layer of the step's pages (a page is a block of every layer)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        self.worker_side.stage_layer(layer_name, self._metadata())

    def wait_for_save(self) -> None:
        self.worker_side.save(self._metadata())

    def get_finished(self, finished_req_ids: set[str]) -> tuple[Optional[set[str]], Optional[set[str]]]:
        return None, None  # loads are synchronous, and no request's blocks are held after it finishes

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self.worker_side.take_load_errors() if self._worker is not None else set()

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.close()
        self.client.close()

    # ------------------------------------------------------------------------------------------- scheduler side

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[Optional[int], bool]:
        return self.scheduler_side.matched_tokens(request, num_computed_tokens), False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        self.scheduler_side.after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return self.scheduler_side.build_meta(scheduler_output)

    def update_connector_output(self, connector_output: Any) -> None:
        invalid = getattr(connector_output, "invalid_block_ids", None)
        if invalid and self._scheduler is not None:
            self._scheduler.invalid_blocks(set(invalid))

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, Optional[dict[str, Any]]]:
        if self._scheduler is not None:
            self._scheduler.finished(request)
        return False, None

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
        return None  # any: pages are in logical order whatever the memory layout (NHD or HND)
