"""HiCache daemons as a cluster (docs/cluster.md): the members etcd lists, where each page lives, and a client that
splits each batch by owner.

Placement is the Java side's (``io.hicache.cluster.Placement``), to the bit: a page's slot is the top 20 bits of its
hash; a slot's owners are the members of highest rendezvous weight ``mix64(seed ^ slot * 0x9E3779B97F4A7C15)``
(unsigned), ``seed`` the first 8 bytes (big-endian) of the SHA-256 of the member's id, ``mix64`` SplitMix64's
finalizer, ties to the smaller id. etcd is read through its v3 JSON gateway with ``urllib``: the standard library only.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, TypeVar

from .client import HiCacheClient, PageHash, PageMemory, _page_hashes
from .errors import HiCacheConnectionError
from .namespace import Namespace
from .protocol import HealthState, HelloAnswer, Status

__all__ = ["ClusterMember", "Placement", "Membership", "HiCacheClusterClient", "SLOT_BITS", "SLOTS"]

SLOT_BITS = 20
SLOTS = 1 << SLOT_BITS
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_T = TypeVar("_T")
logger = logging.getLogger(__name__)


def slot_of(page_hash: bytes) -> int:
    """The slot of a page: the top 20 bits of its 32-byte hash."""
    return int.from_bytes(page_hash[:4], "big") >> (32 - SLOT_BITS)


def seed_of(member_id: str) -> int:
    """A member's seed: the first 8 bytes of the SHA-256 of its id (UTF-8), big-endian."""
    return int.from_bytes(hashlib.sha256(member_id.encode("utf-8")).digest()[:8], "big")


def weight(seed: int, slot: int) -> int:
    """A member's rendezvous weight for a slot (an unsigned 64-bit integer)."""
    z = (seed ^ ((slot * _GOLDEN) & _MASK)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


@dataclass(frozen=True)
class ClusterMember:
    """One daemon as it registered itself in etcd."""
    id: str
    host: str
    port: int
    capacity_bytes: int
    epoch_ms: int


class Placement:
    """Where pages live among ``members``: a pure function of the membership, so every client agrees. A slot's first
    owner is computed when first asked and kept. Thread-safe (a race computes the same value twice)."""

    def __init__(self, members: Sequence[ClusterMember], replicas: int = 1) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, was {replicas}")
        self.members = sorted(members, key=lambda m: m.id)
        ids = [m.id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a member is listed twice: {ids}")
        self.replicas = min(replicas, len(self.members))
        self._seeds = [seed_of(m.id) for m in self.members]
        self._first: dict[int, int] = {}

    def owners(self, slot: int) -> list[int]:
        """Indexes (in :attr:`members`) of the slot's owners, first owner first."""
        if not 0 <= slot < SLOTS:
            raise ValueError(f"slot {slot} is outside 0..{SLOTS - 1}")
        if not self._seeds:
            return []
        if self.replicas <= 1:
            return [self.first_owner(slot)]
        order = sorted(range(len(self._seeds)), key=lambda m: (-weight(self._seeds[m], slot), m))
        return order[:self.replicas]

    def first_owner(self, slot: int) -> int:
        known = self._first.get(slot)
        if known is not None:
            return known
        best, best_weight = 0, weight(self._seeds[0], slot)
        for m in range(1, len(self._seeds)):
            w = weight(self._seeds[m], slot)
            if w > best_weight:  # ties keep the earlier, smaller id
                best, best_weight = m, w
        self._first[slot] = best
        return best

    def owner_of(self, page_hash: bytes) -> ClusterMember:
        if not self.members:
            raise RuntimeError("the cluster has no members")
        return self.members[self.first_owner(slot_of(page_hash))]


class _Etcd:
    """etcd's v3 JSON gateway: range and watch of a prefix, trying each endpoint in turn."""

    def __init__(self, endpoints: Sequence[str], timeout_s: float) -> None:
        self.endpoints = [e if "://" in e else "http://" + e for e in endpoints]
        if not self.endpoints:
            raise ValueError("no etcd endpoint given")
        self.timeout_s = timeout_s

    def _post(self, endpoint: str, path: str, body: dict[str, Any], timeout: Optional[float]) -> Any:
        request = urllib.request.Request(endpoint.rstrip("/") + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        return urllib.request.urlopen(request, timeout=timeout)

    def range(self, prefix: str) -> tuple[list[bytes], int]:
        """The values under ``prefix`` and etcd's revision."""
        body = {"key": _b64(prefix.encode()), "range_end": _b64(_prefix_end(prefix.encode()))}
        last: Optional[Exception] = None
        for endpoint in self.endpoints:
            try:
                with self._post(endpoint, "/v3/kv/range", body, self.timeout_s) as resp:
                    answer = json.loads(resp.read())
                values = [base64.b64decode(kv.get("value", "")) for kv in answer.get("kvs", [])]
                return values, int(answer.get("header", {}).get("revision", 0))
            except (OSError, ValueError) as e:
                last = e
        raise HiCacheConnectionError(f"etcd at {', '.join(self.endpoints)} does not answer: {last}")

    def watch(self, prefix: str, from_revision: int, on_change: Callable[[], None], stop: threading.Event) -> None:
        """Calls ``on_change`` for each batch of changes under ``prefix`` until the stream ends or ``stop`` is set."""
        body = {"create_request": {"key": _b64(prefix.encode()), "range_end": _b64(_prefix_end(prefix.encode())),
                                   "start_revision": from_revision}}
        for endpoint in self.endpoints:
            try:
                resp = self._post(endpoint, "/v3/watch", body, None)
            except OSError:
                continue
            with resp:
                while not stop.is_set():
                    line = resp.readline()
                    if not line:
                        return
                    message = json.loads(line)
                    if message.get("result", {}).get("events"):
                        on_change()
            return
        raise HiCacheConnectionError(f"etcd at {', '.join(self.endpoints)} took no watch")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _prefix_end(prefix: bytes) -> bytes:
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] != 0xFF:
            b[i] += 1
            return bytes(b[:i + 1])
    return b"\0"


class Membership:
    """The members of cluster ``name`` as etcd lists them, kept by a daemon thread (``hicache-cluster-watch``) that
    watches their prefix. With etcd away the last view stays (calls go on with it) and :attr:`etcd_reachable` is
    False; the thread retries every second."""

    def __init__(self, etcd: Sequence[str], name: str = "hicache", replicas: int = 1, timeout_s: float = 2.0) -> None:
        self.name = name
        self.prefix = f"/hicache/{name}/members/"
        self.replicas = replicas
        self._etcd = _Etcd(etcd, timeout_s)
        self._listeners: list[Callable[[Placement], None]] = []
        self._stop = threading.Event()
        self.etcd_reachable = True
        self.placement, self.revision = self._read()
        self._thread = threading.Thread(target=self._loop, name="hicache-cluster-watch", daemon=True)
        self._thread.start()

    def _read(self) -> tuple[Placement, int]:
        values, revision = self._etcd.range(self.prefix)
        members = []
        for value in values:
            try:
                record = json.loads(value)
                members.append(ClusterMember(str(record["id"]), str(record["host"]), int(record["port"]),
                                             int(record.get("capacity_bytes", 0)), int(record.get("epoch_ms", 0))))
            except (ValueError, KeyError, TypeError) as e:
                logger.warning("HiCache cluster: skipping an unreadable member record: %s", e)
        return Placement(members, self.replicas), revision

    def on_change(self, listener: Callable[[Placement], None]) -> None:
        self._listeners.append(listener)

    def _refresh(self) -> None:
        placement, revision = self._read()
        if not self.etcd_reachable:
            logger.info("HiCache cluster %r: etcd answers again (%d members)", self.name, len(placement.members))
        self.etcd_reachable = True
        if revision >= self.revision and placement.members != self.placement.members:
            self.placement = placement
            for listener in self._listeners:
                listener(placement)
        self.revision = max(self.revision, revision)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._refresh()
                self._etcd.watch(self.prefix, self.revision + 1, self._refresh, self._stop)
            except Exception as e:  # the loop never dies: etcd away, or a bug, is logged and retried
                if self.etcd_reachable and not self._stop.is_set():
                    logger.warning("HiCache cluster %r: etcd does not answer (%s); going on with the last view of %d "
                                   "members", self.name, e, len(self.placement.members))
                self.etcd_reachable = False
            self._stop.wait(1.0)

    def close(self) -> None:
        self._stop.set()


class HiCacheClusterClient:
    """The pages of a cluster of daemons, as :class:`HiCacheClient` offers one daemon's: each batch is split by owner,
    the parts go to their members at once (one thread each), and the statuses come back in order. A member that
    cannot be reached answers its pages ``FAILED`` within the call's timeout; with ``replicas`` above 1 puts go to
    every owner and a failed read asks the next. Thread-safe."""

    def __init__(self, etcd: Sequence[str], name: str = "hicache", token: str = "", replicas: int = 1,
                 pool_size: int = 2, timeout_s: float = 10.0, local: Optional[bool] = None,
                 tls: Optional[ssl.SSLContext] = None) -> None:
        self.timeout_s = timeout_s
        self._token, self._pool_size, self._local, self._tls = token, pool_size, local, tls
        self.membership = Membership(etcd, name, replicas)
        self._clients: dict[str, tuple[ClusterMember, HiCacheClient]] = {}
        self._lock = threading.Lock()
        self._workers = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="hicache-cluster")
        self.membership.on_change(self._changed)

    def _client(self, member: ClusterMember) -> HiCacheClient:
        with self._lock:
            known = self._clients.get(member.id)
            if known is not None and known[0] == member:
                return known[1]
            if known is not None:
                known[1].close()
            client = HiCacheClient(member.host, member.port, token=self._token, pool_size=self._pool_size,
                                   timeout_s=self.timeout_s, local=self._local, tls=self._tls)
            self._clients[member.id] = (member, client)
            return client

    def _changed(self, placement: Placement) -> None:
        live = {m.id for m in placement.members}
        with self._lock:
            for member_id in [i for i in self._clients if i not in live]:
                self._clients.pop(member_id)[1].close()

    def _split(self, placement: Placement, keys: list[bytes], rank: int = 0,
               only: Optional[list[int]] = None) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for i in (range(len(keys)) if only is None else only):
            owners = placement.owners(slot_of(keys[i]))
            if rank < len(owners):
                groups.setdefault(owners[rank], []).append(i)
        return groups

    def _each(self, placement: Placement, groups: dict[int, list[int]],
              call: Callable[[HiCacheClient, list[int]], _T]) -> list[tuple[list[int], Optional[_T]]]:
        futures = [(idx, self._workers.submit(call, self._client(placement.members[m]), idx))
                   for m, idx in groups.items()]
        out: list[tuple[list[int], Optional[_T]]] = []
        for idx, f in futures:
            try:
                out.append((idx, f.result()))
            except Exception as e:
                logger.debug("HiCache cluster: a member's call failed: %s", e)
                out.append((idx, None))
        return out

    def get(self, ns: Namespace, hashes: Sequence[PageHash], targets: Sequence[PageMemory],
            timeout_s: Optional[float] = None) -> list[Status]:
        keys = _page_hashes(hashes)
        if len(targets) != len(keys):
            raise ValueError(f"{len(keys)} hashes but {len(targets)} targets")
        placement = self.membership.placement
        statuses = [Status.FAILED] * len(keys)
        pending: Optional[list[int]] = None
        for rank in range(max(1, placement.replicas)):
            groups = self._split(placement, keys, rank, pending)
            results = self._each(placement, groups, lambda c, idx: c.get(
                ns, [keys[i] for i in idx], [targets[i] for i in idx], timeout_s))
            pending = []
            for idx, answer in results:
                for j, i in enumerate(idx):
                    statuses[i] = answer[j] if answer is not None else Status.FAILED
                    if statuses[i] in (Status.FAILED, Status.TIMED_OUT):
                        pending.append(i)
            if not pending:
                break
        return statuses

    def put(self, ns: Namespace, hashes: Sequence[PageHash], sources: Sequence[PageMemory],
            timeout_s: Optional[float] = None) -> list[Status]:
        keys = _page_hashes(hashes)
        if len(sources) != len(keys):
            raise ValueError(f"{len(keys)} hashes but {len(sources)} sources")
        placement = self.membership.placement
        statuses = [Status.FAILED] * len(keys)
        for rank in range(placement.replicas):
            results = self._each(placement, self._split(placement, keys, rank), lambda c, idx: c.put(
                ns, [keys[i] for i in idx], [sources[i] for i in idx], timeout_s))
            for idx, answer in results:
                for j, i in enumerate(idx):
                    got = answer[j] if answer is not None else Status.FAILED
                    if statuses[i] not in (Status.OK, Status.EXISTS):  # stored once any owner stored it
                        statuses[i] = got
        return statuses

    def leading_hits(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> int:
        """How many pages from the first are stored: each owner counts its own, the first miss anywhere ends it."""
        keys = _page_hashes(hashes)
        placement = self.membership.placement
        if not placement.members:
            return 0
        first_missing = len(keys)
        results = self._each(placement, self._split(placement, keys), lambda c, idx: c.leading_hits(
            ns, [keys[i] for i in idx], timeout_s))
        for idx, n in results:
            count = n if n is not None else 0
            if count < len(idx):
                first_missing = min(first_missing, idx[count])
        return first_missing

    def held(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> list[bool]:
        keys = _page_hashes(hashes)
        placement = self.membership.placement
        out = [False] * len(keys)
        results = self._each(placement, self._split(placement, keys), lambda c, idx: c.held(
            ns, [keys[i] for i in idx], timeout_s))
        for idx, answer in results:
            for j, i in enumerate(idx):
                out[i] = bool(answer[j]) if answer is not None else False
        return out

    def delete(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> list[Status]:
        keys = _page_hashes(hashes)
        placement = self.membership.placement
        statuses = [Status.MISS] * len(keys)
        for rank in range(placement.replicas):
            for idx, answer in self._each(placement, self._split(placement, keys, rank), lambda c, idx: c.delete(
                    ns, [keys[i] for i in idx], timeout_s)):
                for j, i in enumerate(idx):
                    got = answer[j] if answer is not None else Status.FAILED
                    if statuses[i] != Status.OK and got != Status.MISS:
                        statuses[i] = got
        return statuses

    def clear(self, ns: Namespace, timeout_s: Optional[float] = None) -> None:
        for member in self.membership.placement.members:
            self._client(member).clear(ns, timeout_s)

    def health(self, timeout_s: Optional[float] = None) -> HealthState:
        """The first member's health that answers; raises when none does (or there are none)."""
        last: Optional[Exception] = None
        for member in self.membership.placement.members:
            try:
                return self._client(member).health(timeout_s)
            except Exception as e:
                last = e
        raise HiCacheConnectionError(f"no member of cluster {self.membership.name!r} answers"
                                     + (f": {last}" if last else " (it has no members)"))

    def handshake(self, timeout_s: Optional[float] = None) -> HelloAnswer:
        for member in self.membership.placement.members:
            try:
                return self._client(member).handshake(timeout_s)
            except Exception:
                continue
        raise HiCacheConnectionError(f"no member of cluster {self.membership.name!r} answers")

    @property
    def last_error(self) -> Optional[str]:
        with self._lock:
            errors = [c.last_error for _, c in self._clients.values() if c.last_error]
        return errors[-1] if errors else None

    def close(self) -> None:
        self.membership.close()
        with self._lock:
            for _, c in self._clients.values():
                c.close()
            self._clients.clear()
        self._workers.shutdown(wait=False)

    def __enter__(self) -> "HiCacheClusterClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Polls ``condition`` until it holds or ``timeout_s`` passes: for tests and scripts."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
