"""``HiCacheDaemonStorage``: SGLang's HiCache L3 storage backend on the HiCache daemon (``./hicache serve``).

Loaded by SGLang's ``dynamic`` backend::

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "hicache", "module_path": "hicache.sglang",
        "class_name": "HiCacheDaemonStorage", "interface_v1": 1, "host": "127.0.0.1", "port": 7370}'

SGLang builds it as ``cls(storage_config, kwargs)``, then calls ``register_mem_pool_host(pool)``. With
``interface_v1`` SGLang moves pages with :meth:`batch_get_v1` / :meth:`batch_set_v1`, straight between its host
pool and the daemon; without it, through flat copies with :meth:`batch_get` / :meth:`batch_set`. See
``docs/sglang.md``.

SGLang's prefetch and backup threads are never restarted once they die, so no batch call raises for a failure of
the daemon or the connection: failed pages are ``False`` (or end the count of :meth:`batch_exists`), logged at most
once per kind every 10 s, and counted (``get_stats().counters``). Thread-safe: SGLang calls it from its prefetch,
I/O and backup threads at once.
"""

from __future__ import annotations

import logging
import threading
import time
import types
from typing import Any, List, Optional, Sequence, Union

from ..client import HiCacheClient, tls_context
from ..cluster import HiCacheClusterClient
from ..errors import HiCacheAuthError
from ..namespace import LAYER_MAJOR, TOKEN_MAJOR, Namespace
from ..protocol import Status
from ._compat import HiCacheStorage, HiCacheStorageExtraInfo, new_pool_transfer_result, new_storage_metrics
from .._logs import RateLimitedLog
from ._support import Counters
from .config import DEFAULT_DTYPE, OWN_KEYS, BackendSettings, build_namespace, component_key, fallback_hash, page_hash
from .hybrid import KV, TRAILING_PAGES, PartNamespaces, SidePool, hit_policy, pool_name, restorable_pages
from .pool import HostPool, ZeroCopyUnavailable, buffer_spec

logger = logging.getLogger(__name__)

_STORED = (Status.OK, Status.EXISTS)
_QUIET_MISSES = (Status.MISS,)
"""Statuses of a page read that are not worth a warning: the page is simply not (or no longer) stored."""
_STARTUP_CHECK_S = 2.0


class HiCacheDaemonStorage(HiCacheStorage):
    """SGLang ``HiCacheStorage`` backed by a HiCache daemon. See the module documentation."""

    interface_v1 = 1
    """This backend implements the zero-copy ``batch_get_v1`` / ``batch_set_v1`` (SGLang uses them only when the
    extra_config says ``"interface_v1": 1``)."""

    def __init__(self, storage_config: Any = None, kwargs: Optional[dict[str, Any]] = None, *,
                 client: Optional[HiCacheClient] = None):
        config = storage_config if storage_config is not None else types.SimpleNamespace()
        extra_config = dict(getattr(config, "extra_config", None) or {})
        if kwargs:
            extra_config.update(kwargs)
        self.settings = BackendSettings.from_extra_config(extra_config)
        self.tp_rank = int(getattr(config, "tp_rank", 0) or 0)
        self.tp_size = int(getattr(config, "tp_size", 1) or 1)
        self.pp_rank = int(getattr(config, "pp_rank", 0) or 0)
        self.pp_size = int(getattr(config, "pp_size", 1) or 1)
        self.cp_rank = int(getattr(config, "attn_cp_rank", 0) or 0)
        self.cp_size = int(getattr(config, "attn_cp_size", 1) or 1)
        self.is_mla = bool(getattr(config, "is_mla_model", False))
        model = self.settings.model or getattr(config, "model_name", None)
        if not model:
            raise ValueError("the HiCache daemon backend needs a model name: SGLang passed none; set extra_config "
                             "'model'")
        self.model: str = model
        self._dtype: str = self.settings.dtype or DEFAULT_DTYPE
        self._order: int = TOKEN_MAJOR if getattr(config, "is_page_first_layout", False) else LAYER_MAJOR
        self._pool: Optional[HostPool] = None
        self._side_pools: dict[str, SidePool] = {}
        self.namespace: Namespace = self._namespace()
        self._log = RateLimitedLog(logger)
        self._counters = Counters()
        self._components_seen: set[str] = set()
        self._components_lock = threading.Lock()
        self._closed = False
        if self.settings.unknown_keys:
            logger.warning("HiCache daemon backend: extra_config keys %s are not known and were ignored; known: %s",
                           ", ".join(self.settings.unknown_keys), ", ".join(OWN_KEYS))
        if not self.settings.weights_revision:
            logger.warning("HiCache daemon backend: extra_config has no 'weights_revision': pages stored by another "
                           "checkpoint under the model name %r would be served as this one's; set it to the weights' "
                           "commit or digest (docs/keys.md)", self.model)
        if self.settings.interface_v1_note:
            logger.warning("HiCache daemon backend: %s", self.settings.interface_v1_note)
        if not self.settings.interface_v1:
            logger.info("HiCache daemon backend: extra_config has no \"interface_v1\": 1, so SGLang moves pages "
                        "through flat copies (batch_get/batch_set) instead of zero copy")
        s = self.settings
        self._client: Union[HiCacheClient, HiCacheClusterClient]
        if client is not None:
            self._client = client
        elif s.cluster_etcd:
            self._client = HiCacheClusterClient(list(s.cluster_etcd), s.cluster_name, token=s.token,
                                                pool_size=s.pool_size, timeout_s=s.timeout_s, local=s.local,
                                                tls=self._tls_context())
        else:
            tls = self._tls_context()
            self._client = HiCacheClient(
                s.host, s.port, token=s.token, pool_size=s.pool_size, timeout_s=s.timeout_s, local=s.local, tls=tls)
        self._check_daemon()
        where = (f"cluster {s.cluster_name!r} at {','.join(s.cluster_etcd)}" if s.cluster_etcd
                 else f"{s.host}:{s.port}")
        logger.info("HiCache daemon backend: %s, namespace %s, %s", where, self._describe_namespace(),
                    "writes" if self.writes else "reads only (MLA: rank 0 writes)")

    # -------------------------------------------------------------------------------------------- configuration

    @property
    def writes(self) -> bool:
        """Whether this rank stores pages: always for MHA; for MLA only TP rank 0 (every rank holds the same)."""
        return not (self.is_mla or (self._pool is not None and self._pool.is_mla)) or self.tp_rank == 0

    def _namespace(self) -> Namespace:
        is_mla = self.is_mla or (self._pool is not None and self._pool.is_mla)
        s = self.settings
        return build_namespace(self.model, self._dtype, self._order, self.tp_rank, self.tp_size, is_mla,
                               s.extra, self.pp_rank, self.pp_size, self.cp_rank, self.cp_size,
                               revision=s.weights_revision, quantization=s.quantization,
                               page_tokens=self._pool.page_size if self._pool is not None else 0, tenant=s.tenant)

    def _describe_namespace(self) -> str:
        ns = self.namespace
        return (f"[model={ns.model!r}" + (f", revision={ns.revision!r}" if ns.revision else "")
                + f", dtype={ns.dtype}" + (f", quantization={ns.quantization!r}" if ns.quantization else "")
                + f", order={'token' if ns.order else 'layer'}_major"
                + (f", page={ns.page_tokens}" if ns.page_tokens else "") + f", tp={ns.tp_rank}/{ns.tp_size}"
                + (f", tenant={ns.tenant!r}" if ns.tenant else "") + (f", extra={ns.extra!r}" if ns.extra else "")
                + "]")

    def _check_daemon(self) -> None:
        """Says early whether the daemon answers; only a refused token fails the start (a daemon that is down may
        come up later: until then every call fails softly)."""
        try:
            self._client.health(timeout_s=min(_STARTUP_CHECK_S, self.settings.timeout_s))
        except HiCacheAuthError as e:
            self._client.close()
            raise ValueError(f"the HiCache daemon at {self.settings.host}:{self.settings.port} refused the token "
                             f"(extra_config 'token'): {e}") from None
        except Exception as e:
            logger.warning("HiCache daemon backend: the daemon at %s:%d does not answer yet (%s: %s); storage "
                           "calls fail (as misses) until it does", self.settings.host, self.settings.port,
                           type(e).__name__, e)

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Checks the host pool (layout ``layer_first``, ``page_first`` or ``page_first_direct``; MHA or MLA),
        keeps it, and fixes the namespace's byte order and KV dtype from it. Raises ValueError for a pool this
        backend cannot serve (SGLang then fails at start, with the message)."""
        self._adopt_kv_pool(mem_pool_host)
        super().register_mem_pool_host(mem_pool_host)

    def _adopt_kv_pool(self, mem_pool_host: Any) -> None:
        """Makes ``mem_pool_host`` the KV pool pages are read from and written to (see register_mem_pool_host)."""
        pool = HostPool(mem_pool_host, self.is_mla)
        if pool.asymmetric and not self.settings.interface_v1:
            # SGLang's pool for such models has no flat pages: its copying path raises in the prefetch and backup
            # threads, which SGLang never restarts, so L3 would stop for good at the first page.
            raise ValueError(f"the host pool's K and V head dims differ ({pool.describe()}): SGLang's host pool for "
                             "such models has no flat pages (get_data_page), so SGLang can move them only through "
                             "batch_get_v1/batch_set_v1; set \"interface_v1\": 1 in "
                             "--hicache-storage-backend-extra-config")
        dtype = self.settings.dtype
        if dtype is None:
            if pool.dtype is not None:
                dtype = pool.dtype
            elif pool.has_dtype:
                raise ValueError(f"the host pool's dtype {pool.dtype_said} does not say which KV format its bytes "
                                 "hold (fp8 caches are kept as uint8); set extra_config 'dtype' (fp8_e4m3, "
                                 "fp8_e5m2, ...)")
            else:
                dtype = DEFAULT_DTYPE
        elif pool.dtype is not None and pool.dtype != dtype:
            logger.warning("HiCache daemon backend: extra_config dtype %s differs from the host pool's %s; pages are "
                           "named %s", dtype, pool.dtype_said, dtype)
        self._pool = pool
        self._dtype = dtype
        self._order = pool.order
        self.namespace = self._namespace()
        logger.info("HiCache daemon backend: host pool %s; namespace %s; %s", pool.describe(),
                    self._describe_namespace(), "writes" if self.writes else "reads only (MLA: rank 0 writes)")
        self._check_page_size(pool)

    def _check_page_size(self, pool: HostPool) -> None:
        """Says at start when pages are too big for the daemon (it would refuse every one: REJECTED)."""
        if pool.page_bytes is None:
            return
        try:
            hello = self._client.handshake(timeout_s=min(_STARTUP_CHECK_S, self.settings.timeout_s))
        except Exception:
            return  # the daemon is not up: said already
        if pool.page_bytes > hello.max_page_bytes:
            logger.error("HiCache daemon backend: a page is %d bytes, over the daemon's largest page (%d bytes): "
                         "it will refuse every page; start it with --server.max-page-bytes %d (and "
                         "--server.max-frame-bytes above that), or use a smaller --page-size", pool.page_bytes,
                         hello.max_page_bytes, pool.page_bytes)

    # --------------------------------------------------------------------------------------------------- keys

    def _hashes(self, keys: Sequence[Any]) -> list[bytes]:
        hashes = []
        for key in keys:
            raw = page_hash(key)
            if raw is None:
                component = component_key(key)
                if component is not None:
                    self._component_seen(component, key)
                else:
                    self._log.warning("key-format", "HiCache daemon backend: key %r is not a 64-hex page hash; it "
                                      "is stored under SHA-256 of its text (such pages are not shared with Java "
                                      "engines)", key)
                raw = fallback_hash(key)
            hashes.append(raw)
        return hashes

    def _component_seen(self, component: str, key: str) -> None:
        """Says once per component that SGLang sends ``"<hash>.<component>"`` keys (``.draft``: the draft model's
        KV under speculative decoding). They are normal input: stored like any page, never warned about."""
        with self._components_lock:
            if component in self._components_seen:
                return
            self._components_seen.add(component)
        logger.info("HiCache daemon backend: SGLang sends %r pages (keys such as %r%s); they are stored under "
                    "SHA-256 of the key, shared with SGLang engines configured alike, not with Java engines",
                    component, key, ": the speculative-decoding draft model's KV" if component == "draft" else "")

    def _failed(self, operation: str, pages: int, error: BaseException) -> None:
        self._counters.add(**{f"{operation}_failed_calls": 1, f"{operation}_failed_pages": pages})
        self._log.warning((operation, type(error).__name__), "HiCache daemon backend: %s of %d pages failed: %s: %s",
                          operation, pages, type(error).__name__, error)

    def _count_statuses(self, operation: str, statuses: Sequence[Status]) -> None:
        counts: dict[Status, int] = {}
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
        self._counters.add(**{f"{operation}_pages_{status.name.lower()}": n for status, n in counts.items()})
        for status, n in counts.items():
            if status in _STORED or status in _QUIET_MISSES:
                continue
            self._counters.add(**{f"{operation}_failed_pages": n})
            self._log.warning((operation, status), "HiCache daemon backend: %s: %d pages %s", operation, n,
                              status.name)

    def _remaining(self, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the call's {self.settings.timeout_s} s were spent")
        return remaining

    def _leading_hits(self, namespace: Namespace, hashes: list[bytes], deadline: float) -> int:
        return self._client.leading_hits(namespace, hashes, timeout_s=self._remaining(deadline))

    def _zero_copy_parts(self, pool: HostPool, host_indices: Any,
                         pages: int) -> Optional[list[list[tuple[int, int]]]]:
        """Per page its ``(address, length)`` parts, or None to copy through flat pages (decided on first use,
        once: a pool without usable page addresses never gets them later)."""
        if pool.zero_copy is False:
            return None
        try:
            parts = pool.zero_copy_pages(host_indices, pages)
        except ZeroCopyUnavailable as e:
            if pool.zero_copy:
                raise  # it worked before: this call is broken, not the pool
            pool.zero_copy, pool.zero_copy_reason = False, str(e)
            logger.warning("HiCache daemon backend: no zero copy for this %s host pool (%s); pages are copied "
                           "through get_data_page / set_from_flat_data_page", pool.layout, e)
            return None
        if pool.zero_copy is None:
            pool.zero_copy = True
            logger.info("HiCache daemon backend: zero copy from the %s host pool (%d buffers for the first page)",
                        pool.layout, len(parts[0]) if parts else 0)
        return parts

    def _registered_pool(self) -> HostPool:
        if self._pool is None:
            raise RuntimeError("no host pool registered (register_mem_pool_host was not called)")
        return self._pool

    # ------------------------------------------------------------------------------------------ zero-copy calls

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        """How many of ``keys``, from the first, the daemon holds (host slab or its L3). 0 when it cannot say."""
        if not keys:
            return 0
        try:
            hits = self._client.leading_hits(self.namespace, self._hashes(keys))
        except Exception as e:
            self._failed("exists", len(keys), e)
            return 0
        self._counters.add(exists_calls=1, exists_pages=len(keys), exists_hits=hits)
        return hits

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Reads ``len(keys)`` pages into the host slots ``host_indices`` (``page_size`` slots per page), straight
        into the pool's memory when it gives page addresses. One bool per page: True when its slots hold it."""
        pages = len(keys)
        if not pages:
            return []
        started = time.monotonic()
        try:
            pool = self._registered_pool()
            starts = pool.page_starts(host_indices, pages)
            hashes = self._hashes(keys)
            parts = self._zero_copy_parts(pool, host_indices, pages)
            if parts is not None:
                statuses = self._client.get(self.namespace, hashes, parts)
                ok = [status == Status.OK for status in statuses]
                nbytes = sum(sum(length for _, length in page) for page, good in zip(parts, ok) if good)
            else:
                staging = [pool.staging_page() for _ in range(pages)]
                statuses = self._client.get(self.namespace, hashes, [buffer_spec(page) for page in staging])
                ok = []
                nbytes = 0
                for start, page, status in zip(starts, staging, statuses):
                    if status == Status.OK:
                        pool.store_flat_page(start, page)
                        nbytes += memoryview_length(page)
                    ok.append(status == Status.OK)
        except Exception as e:
            self._failed("get", pages, e)
            return [False] * pages
        self._count_statuses("get", statuses)
        self._counters.observe_prefetch(sum(ok), nbytes, time.monotonic() - started)
        return ok

    def batch_set_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Stores ``len(keys)`` pages from the host slots ``host_indices``. Pages the daemon already holds are not
        sent (a leading-hits query first; later ones come back EXISTS) and count as stored. On an MLA model
        only TP rank 0 writes; the others answer True at once."""
        pages = len(keys)
        if not pages:
            return []
        if not self.writes:
            self._counters.add(set_pages_skipped_rank=pages)
            return [True] * pages
        started = time.monotonic()
        deadline = started + self.settings.timeout_s
        namespace = self.namespace
        try:
            pool = self._registered_pool()
            starts = pool.page_starts(host_indices, pages)
            hashes = self._hashes(keys)
            have = self._leading_hits(namespace, hashes, deadline)
            stored = [True] * have + [False] * (pages - have)
            statuses: list[Status] = []
            nbytes = 0
            if have < pages:
                todo = range(have, pages)
                parts = self._zero_copy_parts(pool, host_indices, pages)
                flats: list[Any] = []
                if parts is not None:
                    sources = [parts[i] for i in todo]
                else:
                    flats = [pool.flat_page(starts[i]) for i in todo]  # kept alive until the put is done
                    sources = [buffer_spec(flat) for flat in flats]
                statuses = self._client.put(namespace, [hashes[i] for i in todo], sources,
                                            timeout_s=self._remaining(deadline))
                for i, status in zip(todo, statuses):
                    stored[i] = status in _STORED
                    if status == Status.OK:
                        nbytes += (sum(length for _, length in parts[i]) if parts is not None
                                   else memoryview_length(flats[i - have]))
                del flats
        except Exception as e:
            self._failed("set", pages, e)
            return [False] * pages
        self._counters.add(set_pages_present=have)
        self._count_statuses("set", statuses)
        self._counters.observe_backup(sum(stored), nbytes, time.monotonic() - started)
        self._retain(namespace, hashes, stored, extra_info, deadline)
        return stored

    def _tls_context(self) -> Optional[Any]:
        s = self.settings
        return tls_context(s.tls_ca or None, s.tls_cert or None, s.tls_key or None) if s.tls else None

    def _retain(self, namespace: Namespace, hashes: Sequence[bytes], stored: Sequence[bool],
                extra_info: Optional[HiCacheStorageExtraInfo], deadline: float) -> None:
        """After a set: a RETAIN of the chain (SGLang's prefix keys, then the pages stored, up to the first that was
        not), so that the daemon evicts the chain's suffix before its prefix and keeps the priority: SGLang's
        ``extra_info["priority"]`` where it passes one, else ``retention_priority``. Sent only with prefix keys or a
        priority; a failure is logged, never the set's."""
        s = self.settings
        prefix = list(getattr(extra_info, "prefix_keys", None) or [])
        asked = getattr(extra_info, "extra_info", None)
        priority = s.retention_priority
        if isinstance(asked, dict) and isinstance(asked.get("priority"), int):
            priority = max(0, min(99, asked["priority"]))
        retain = getattr(self._client, "retain", None)
        if retain is None or (not prefix and priority == 0):
            return
        run = 0
        while run < len(stored) and stored[run]:
            run += 1
        if run == 0:
            return
        try:
            chain = self._hashes(prefix) + list(hashes[:run])
            retain(namespace, chain, priority, s.retention_s, timeout_s=self._remaining(deadline))
        except Exception as e:  # the pages are stored; only their order of eviction is lost
            self._log.warning("retain", "HiCache daemon backend: RETAIN after a set failed: %s", e)

    # --------------------------------------------------------------------- v2: hybrid models (see hybrid.py)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Keeps a pool SGLang's ``HybridCacheController`` registers (each pool of a hybrid model, the KV too).
        Raises ValueError, naming the pool, for one the backend cannot serve (SGLang's start then fails)."""
        name = pool_name(host_pool_name)
        if name == KV and host_pool is not getattr(self, "mem_pool_host", None):
            # SGLang's hybrid controller gives register_mem_pool_host its pool group, which may not pass on the KV
            # pool's page addresses and dtype; the KV pool itself comes here: it is the one to read and write.
            self._adopt_kv_pool(host_pool)
        side = SidePool(name, host_pool)
        super().register_mem_host_pool_v2(host_pool, host_pool_name)
        with self._components_lock:
            self._side_pools[name] = side
        logger.info("HiCache daemon backend: %s pool registered (namespace extra %r)", side.describe(),
                    self._part_namespace(name).extra)

    def _is_mla(self) -> bool:
        return self.is_mla or (self._pool is not None and self._pool.is_mla)

    def _parts(self) -> PartNamespaces:
        return PartNamespaces(self.namespace, self.tp_rank, self.tp_size, self._is_mla())

    def _per_rank(self, part: str) -> Optional[bool]:
        """Whether ``part`` is per TP rank though the model is MLA: a KV-shaped pool of MHA shape (an MHA draft or
        window beside an MLA model) splits heads across ranks. None: as the model says."""
        side = self._side_pools.get(part)
        if side is not None and side.kv_shaped is not None and not side.kv_shaped.is_mla:
            return True
        return None

    def _part_namespace(self, part: str) -> Namespace:
        return self._parts().of(part, self._per_rank(part))

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None,
                        extra_info: Optional[HiCacheStorageExtraInfo] = None) -> Any:
        """SGLang's ``PoolTransferResult``: ``kv_hit_pages`` is the longest prefix of ``keys`` (page hashes) that
        the KV and every pool of ``pool_transfers`` can restore (hybrid.py says how); ``extra_pool_hit_pages``
        what each alone could. A trailing pool's transfer counts for its window only (``len(keys)``: SGLang
        sends placeholders); its pages are looked up under the KV page hashes. 0 when the daemon cannot say."""
        if not keys:
            return new_pool_transfer_result(0, {})
        deadline = time.monotonic() + self.settings.timeout_s
        try:
            hashes = self._hashes(keys)
            kv_pages = self._leading_hits(self.namespace, hashes, deadline)
            each = {KV: kv_pages}
            bounds: list[int] = []
            trailing = []
            for transfer in pool_transfers or []:
                name = pool_name(transfer.name)
                if name == KV:
                    continue
                namespace = self._part_namespace(name)
                if hit_policy(transfer) == TRAILING_PAGES:
                    # Which of the KV's pages the part holds, asked once (one pipelined round trip); a state kept
                    # only at a node's end would otherwise cost a round trip per page the search walks back.
                    flags = self._client.held(namespace, hashes[:kv_pages],
                                              timeout_s=self._remaining(deadline)) if kv_pages else []

                    def present(lo: int, hi: int, flags: list[bool] = flags) -> int:
                        n = 0
                        while lo + n < hi and flags[lo + n]:
                            n += 1
                        return n

                    window = max(1, len(transfer.keys or []))
                    trailing.append((window, present))
                    each[name] = restorable_pages(kv_pages, [], [(window, present)])
                else:
                    bound = self._leading_hits(namespace, hashes[:kv_pages], deadline) if kv_pages else 0
                    bounds.append(bound)
                    each[name] = bound
            hits = restorable_pages(kv_pages, bounds, trailing)
        except Exception as e:
            self._failed("exists", len(keys), e)
            return new_pool_transfer_result(0, {})
        self._counters.add(exists_calls=1, exists_pages=len(keys), exists_hits=hits)
        return new_pool_transfer_result(hits, each)

    def batch_get_v2(self, transfers: List[Any],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> dict[Any, List[bool]]:
        """Reads each transfer's pages (``keys``) into its pool's slots (``host_indices``); per pool, one bool per
        page (SGLang uses the leading run of True)."""
        return {transfer.name: self._move_part(transfer, write=False) for transfer in transfers}

    def batch_set_v2(self, transfers: List[Any],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> dict[Any, List[bool]]:
        """Stores each transfer's pages from its pool's slots; per pool, one bool per page (True: stored, or
        already there, or a part this rank does not write: MLA ranks other than 0 write only their own parts, the
        ``mamba`` state and pools of MHA shape)."""
        return {transfer.name: self._move_part(transfer, write=True) for transfer in transfers}

    def _move_part(self, transfer: Any, write: bool) -> List[bool]:
        name = pool_name(transfer.name)
        keys = list(transfer.keys or [])
        if not keys:
            return []
        if name == KV:
            move = self.batch_set_v1 if write else self.batch_get_v1
            return move(keys, transfer.host_indices)
        pages = len(keys)
        operation = f"{'set' if write else 'get'}_{name}"
        parts = self._parts()
        if write and not parts.writes(name, self._per_rank(name)):
            self._counters.add(**{f"{operation}_pages_skipped_rank": pages})
            return [True] * pages
        side = self._side_pools.get(name)
        started = time.monotonic()
        try:
            if side is None:
                raise RuntimeError(f"no {name} host pool registered (register_mem_host_pool_v2)")
            namespace = parts.of(name, self._per_rank(name))
            hashes = self._hashes(keys)
            slots = side.slots(transfer.host_indices, pages)
            direct = side.parts(transfer.host_indices, pages)
            if write:
                flats = [] if direct is not None else [side.flat_page(slot) for slot in slots]  # alive until sent
                sources = direct if direct is not None else [buffer_spec(flat) for flat in flats]
                statuses = self._client.put(namespace, hashes, sources, timeout_s=self.settings.timeout_s)
                done = [status in _STORED for status in statuses]
            elif direct is not None:
                statuses = self._client.get(namespace, hashes, direct, timeout_s=self.settings.timeout_s)
                done = [status == Status.OK for status in statuses]
            else:
                staging = [side.staging_page() for _ in slots]
                statuses = self._client.get(namespace, hashes, [buffer_spec(page) for page in staging],
                                            timeout_s=self.settings.timeout_s)
                done = [status == Status.OK for status in statuses]
                for slot, page, ok in zip(slots, staging, done):
                    if ok:
                        side.store_flat_page(slot, page)
        except Exception as e:
            self._failed(operation, pages, e)
            return [False] * pages
        self._count_statuses(operation, statuses)
        (self._counters.observe_backup if write else self._counters.observe_prefetch)(
            sum(done), 0, time.monotonic() - started)
        return done

    # -------------------------------------------------------------------------------- copying (non-v1) calls

    def _targets(self, count: int, locations: Optional[Sequence[Any]], sizes: Optional[Sequence[Any]],
                 what: str) -> list[Any]:
        """Page buffers for the copying calls: the given locations (buffers, tensors, ``(address, length)``,
        an address with its size, or lists of addresses with their sizes), else fresh flat pages of the pool."""
        if locations is None:
            pool = self._registered_pool()
            return [pool.staging_page() for _ in range(count)]
        if len(locations) != count:
            raise ValueError(f"{count} keys but {len(locations)} {what}")
        return list(locations)

    @staticmethod
    def _spec(location: Any, size: Any) -> Any:
        if isinstance(location, int) and not isinstance(location, bool):
            if not isinstance(size, int):
                raise ValueError(f"an address needs its size, was {size!r}")
            return (location, size)
        if (isinstance(location, (list, tuple)) and location and all(isinstance(p, int) for p in location)
                and isinstance(size, (list, tuple)) and len(size) == len(location)):
            return [(int(p), int(s)) for p, s in zip(location, size)]
        return buffer_spec(location)

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Any]:
        """Reads pages into flat buffers (``target_locations``, or new flat pages of the pool); per key the
        buffer, or None when the page could not be had."""
        pages = len(keys)
        if not pages:
            return []
        started = time.monotonic()
        try:
            targets = self._targets(pages, target_locations, target_sizes, "target locations")
            sizes = list(target_sizes) if isinstance(target_sizes, (list, tuple)) else [target_sizes] * pages
            specs = [self._spec(t, s) for t, s in zip(targets, sizes)]
            statuses = self._client.get(self.namespace, self._hashes(keys), specs)
        except Exception as e:
            self._failed("get", pages, e)
            return [None] * pages
        self._count_statuses("get", statuses)
        self._counters.observe_prefetch(sum(s == Status.OK for s in statuses), 0, time.monotonic() - started)
        return [target if status == Status.OK else None for target, status in zip(targets, statuses)]

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> Any:
        """Reads one page into ``target_location`` (or a new flat page of the pool); the buffer, or None."""
        return self.batch_get([key], None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])[0]

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """Stores pages from flat buffers (``values``, else ``target_locations``). True when every page is
        stored (EXISTS counts); on an MLA model ranks other than 0 answer True without writing."""
        pages = len(keys)
        if not pages:
            return True
        if not self.writes:
            self._counters.add(set_pages_skipped_rank=pages)
            return True
        started = time.monotonic()
        deadline = started + self.settings.timeout_s
        namespace = self.namespace
        try:
            given = values if values is not None else target_locations
            if given is None or len(given) != pages:
                raise ValueError(f"{pages} keys but {'no' if given is None else len(given)} values")
            sizes = list(target_sizes) if isinstance(target_sizes, (list, tuple)) else [target_sizes] * pages
            specs = [self._spec(v, s) for v, s in zip(given, sizes)]
            hashes = self._hashes(keys)
            have = self._leading_hits(namespace, hashes, deadline)
            statuses = []
            if have < pages:
                statuses = self._client.put(namespace, hashes[have:], specs[have:],
                                            timeout_s=self._remaining(deadline))
        except Exception as e:
            self._failed("set", pages, e)
            return False
        self._counters.add(set_pages_present=have)
        self._count_statuses("set", statuses)
        done = have + sum(status in _STORED for status in statuses)
        self._counters.observe_backup(done, 0, time.monotonic() - started)
        return done == pages

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        """Stores one page from a flat buffer; True when stored (or already there)."""
        return self.batch_set([key], None if value is None else [value],
                              None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    # ------------------------------------------------------------------------------------------------- others

    def clear(self) -> None:
        """Removes every page of this rank's namespace from the daemon (both tiers). On an MLA model only rank 0
        clears (the namespace is shared). Failures are logged, not raised."""
        if not self.writes:
            return
        try:
            self._client.clear(self.namespace)
            self._counters.add(clear_calls=1)
        except Exception as e:
            self._counters.add(clear_failed_calls=1)
            logger.warning("HiCache daemon backend: clearing namespace %s failed: %s: %s", self._describe_namespace(),
                           type(e).__name__, e)

    def get_stats(self) -> Any:
        """SGLang's ``StorageMetrics``, its own class from ``sglang.srt.observability.metrics_collector`` (or the
        older ``sglang.srt.metrics.collector``) when SGLang is installed, since its metrics collector asserts the
        type: pages and GB/s per prefetch and backup batch since the last call, plus ``counters``, a dict of
        cumulative counts: ``get_pages_ok``, ``get_pages_miss``, ``get_failed_calls``, ``set_pages_ok``,
        ``set_pages_exists``, ``set_pages_present`` (skipped after the leading-hits query), ``set_failed_pages``,
        ``exists_hits``..."""
        metrics = new_storage_metrics()
        self._counters.drain_into(metrics)
        try:
            metrics.counters = self._counters.snapshot()
            metrics.namespace = self._describe_namespace()
        except AttributeError:  # a StorageMetrics with __slots__
            pass
        return metrics

    def counters(self) -> dict[str, int]:
        """The cumulative counters of :meth:`get_stats`, without draining its per-batch observations."""
        return self._counters.snapshot()

    def close(self) -> None:
        """Closes the connections to the daemon. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._client.close()
        except Exception as e:  # closing must not fail SGLang's shutdown
            logger.debug("HiCache daemon backend: close: %s", e)

    def __repr__(self) -> str:
        return (f"HiCacheDaemonStorage({self.settings.host}:{self.settings.port}, "
                f"namespace={self._describe_namespace()})")


def memoryview_length(page: Any) -> int:
    """Bytes of a flat page (a torch tensor or a buffer)."""
    if hasattr(page, "numel") and hasattr(page, "element_size"):
        return int(page.numel()) * int(page.element_size())
    return memoryview(page).nbytes


__all__ = ["HiCacheDaemonStorage"]
