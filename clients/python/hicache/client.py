"""The HiCache client: pages in and out of the daemon, over TCP or, on the same host, through its slab file."""

from __future__ import annotations

import logging
import ssl
import struct
import threading
import time
from types import TracebackType
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from . import answers, pipeline, protocol, transfers
from .buffers import page_parts, parts_length
from .checksums import CHECKSUM_CRC32, CHECKSUM_CRC32C
from .connection import Connection, Frame, VersionRefused, address
from .errors import (HiCacheConnectionError, HiCacheError, HiCacheProtocolError, HiCacheServerError, HiCacheTimeoutError,
                     error_from_frame)
from .namespace import LAYER_MAJOR, TOKEN_MAJOR, Namespace
from .pool import ConnectionPool
from .protocol import ErrorCode, HealthState, HelloAnswer, Op, Status
from .slab import SlabMapping, file_identity
from .transfers import ANSWER_GRACE_S, ASSUMED_MAX_LEASE_S, HOLD_MARGIN_MS, HOLD_SAFETY_S, Batch, Call

__all__ = ["HiCacheClient", "PageHash", "PageMemory", "Namespace", "LAYER_MAJOR", "TOKEN_MAJOR", "ANSWER_GRACE_S",
           "HOLD_MARGIN_MS", "HOLD_SAFETY_S", "ASSUMED_MAX_LEASE_S"]

PageHash = Union[bytes, bytearray, memoryview, str]
"""A page hash: its 32 raw bytes, or 64 hex characters (SGLang's keys)."""
PageMemory = Any
"""A page's memory: a buffer object, an ``(address, length)`` tuple, or a list of those (see :mod:`hicache.buffers`);
``Any`` because the buffer protocol has no static type before Python 3.12."""
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_T = TypeVar("_T")
logger = logging.getLogger(__name__)
# What to check, after an ERROR answer of the daemon's (the connection's own failures say it in their messages).
_ADVICE = {
    ErrorCode.BUSY: "it is at a limit (server.max-connections, or server.max-partial-frame-bytes of frames still "
                    "arriving); later calls try again",
    ErrorCode.SHUTTING_DOWN: "it is stopping (a graceful shutdown); calls fail until one is started again "
                             "(`./hicache serve`)",
    ErrorCode.INTERNAL: "a failure in the daemon or its L3 store; the daemon's log says more",
    ErrorCode.TIMED_OUT: "it could not finish in time: a slow L3 store, or the call's timeout_s is too short",
    ErrorCode.AUTH: "give the client the daemon's server.auth-token",
}
# Failures of the daemon or the way to it: logged (once per outage) as well as kept in last_error. Other errors are
# the caller's (a wrong token, a malformed request): they raise, and are only kept in last_error.
_OUTAGES = (HiCacheConnectionError, HiCacheTimeoutError, HiCacheProtocolError)


def _page_hash(value: object, index: int) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"hash {index} is a {type(value).__name__}; give bytes or a hex string")
    if isinstance(value, str):
        try:
            value = bytes.fromhex(value)
        except ValueError:
            raise ValueError(f"hash {index} is not hex: {value!r}") from None
    data = bytes(value)
    if len(data) != protocol.HASH_BYTES:
        raise ValueError(f"hash {index} is {len(data)} bytes; page hashes are {protocol.HASH_BYTES} bytes "
                         "(or 64 hex characters)")
    return data


def _page_hashes(hashes: Sequence[PageHash]) -> list[bytes]:
    return [_page_hash(h, i) for i, h in enumerate(hashes)]


def _batch_of(ns: Namespace, hashes: Sequence[PageHash], buffers: Sequence[PageMemory], writable: bool,
              what: str) -> Batch:
    """The pages of a get or put: keys, each page's parts and length, with the arguments checked."""
    keys = _page_hashes(hashes)
    if len(buffers) != len(keys):
        raise ValueError(f"{len(keys)} hashes but {len(buffers)} {what}s")
    parts = [page_parts(b, writable=writable, what=f"{what} {i}") for i, b in enumerate(buffers)]
    lengths = [parts_length(p) for p in parts]
    for i, length in enumerate(lengths):
        if length == 0:
            raise ValueError(f"{what} {i} is empty; a page has at least 1 byte")
    return Batch(ns, keys, parts, lengths, [None] * len(keys))


def tls_context(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                key_file: Optional[str] = None) -> ssl.SSLContext:
    """A client TLS context for :class:`HiCacheClient`: trusting the PEM authorities in ``ca_file`` (the system's when
    None), checking the daemon's host name, TLS 1.2 at least, presenting a client certificate when ``cert_file`` is
    given (a daemon with ``server.tls-client-ca`` wants one; its common name may name a tenant)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context


def _need_version(conn: Connection, version: int, what: str) -> None:
    if conn.version < version:
        raise HiCacheProtocolError(f"{what} needs protocol version {version}; this daemon speaks {conn.version}")


class HiCacheClient:
    """A client of one HiCache daemon. Thread-safe: any number of threads may share one client.

    Each call borrows one of at most ``pool_size`` connections for its whole duration; a call finding all of them
    busy waits (within its deadline). Calls taking pages (:meth:`get`, :meth:`put`, :meth:`delete`) return one
    :class:`Status` per page and never raise for a daemon that is down, stalled or overloaded: the pages say
    ``FAILED`` or ``TIMED_OUT``. They raise :class:`HiCacheError` subclasses only for mistakes (a wrong token, a
    request the daemon calls malformed) and ``ValueError``/``TypeError`` for bad arguments. Calls returning one
    value raise on any failure. Every call finishes within its ``timeout_s`` (the client's by default) plus
    :data:`ANSWER_GRACE_S`, plus the time spent computing checksums on a version 1 connection.

    ``local``: True reads through leases and writes through reservations in the daemon's slab file (same host
    only); False always uses TCP; None (the default) uses the slab file when ``host`` is a loopback name and the
    file named in the handshake can be mapped.

    ``tls``: an :class:`ssl.SSLContext` to speak TLS to a daemon that serves it (``server.tls-cert``), e.g.
    :func:`tls_context`; the daemon's certificate must name ``host``. None: plaintext.

    ``max_version``: the protocol version asked for first (3: whole namespaces, CRC-32 at C speed, RESERVE/COMMIT).
    A daemon that refuses it (ERROR VERSION) is asked again for the version below (2: namespaces without revision,
    quantization, page size or tenant; 1: pure-Python CRC-32C); the client remembers that.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = protocol.DEFAULT_PORT, token: str = "",
                 pool_size: int = 4, timeout_s: float = 10.0, local: Optional[bool] = None,
                 max_version: int = protocol.VERSION_3, tls: Optional[ssl.SSLContext] = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, was {timeout_s}")
        if max_version not in (protocol.VERSION_1, protocol.VERSION_2, protocol.VERSION_3):
            raise ValueError(f"max_version must be 1, 2 or 3, was {max_version}")
        protocol.encode_string(token)  # refuses a token the protocol cannot carry, now rather than per call
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._token = token
        self._tls = tls
        # Over TLS the bytes are meant to cross a network: no same-host path unless asked for.
        self._local = local if tls is None or local is not None else False
        self._lock = threading.Lock()
        self._version = max_version
        self._reserve_supported: Optional[bool] = None
        self._commit_checksums = False
        self._slab: Optional[SlabMapping] = None
        self._slab_error: Optional[str] = None
        self._last_error: Optional[str] = None
        self._outage_logged = False  # a warning went out since the last call that succeeded
        self._pool = ConnectionPool(self._open_connection, pool_size)

    # ----------------------------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Closes the pooled connections and unmaps the slab file. Calls after this raise HiCacheError."""
        self._pool.close()
        with self._lock:
            slab, self._slab = self._slab, None
        if slab is not None:
            slab.close()

    def __enter__(self) -> "HiCacheClient":
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    @property
    def protocol_version(self) -> int:
        """The version this client asks for on new connections: 3, or lower once a daemon refused a higher one."""
        return self._version

    @property
    def reserve_supported(self) -> Optional[bool]:
        """Whether the daemon takes RESERVE/COMMIT: None until a local put tried it."""
        return self._reserve_supported

    @property
    def last_error(self) -> Optional[str]:
        """Why the latest call that failed as a whole failed, in words (the daemon's address, the OS error or the
        daemon's ERROR answer, what to check); None until a call fails, and again once a call succeeds.

        "Failed as a whole": the daemon could not be reached, the connection broke, the deadline passed, or the daemon
        answered ERROR, so that :meth:`get`, :meth:`put` or :meth:`delete` returned ``FAILED`` or ``TIMED_OUT``
        pages for it, or another call raised. Pages the daemon itself answered ``FAILED`` (a checksum it refused, an
        L3 failure for that page) or ``MISS`` do not count: the call reached the daemon. One value for the whole
        client: with several threads it describes the latest call to finish."""
        return self._last_error

    @property
    def local_slab_path(self) -> Optional[str]:
        """The daemon's slab file if this client has mapped it for the local path, else None (TCP only, or no
        connection opened yet)."""
        slab = self._slab
        return slab.path if slab is not None else None

    def handshake(self, timeout_s: Optional[float] = None) -> HelloAnswer:
        """What the daemon said in the HELLO answer of a pooled connection (opened if needed)."""
        return self._on_connection("handshake", timeout_s, lambda conn, call: conn.hello)

    def _open_connection(self, deadline: float) -> Connection:
        while True:
            version = self._version
            checksum = CHECKSUM_CRC32 if version >= protocol.VERSION_2 else CHECKSUM_CRC32C
            try:
                conn = Connection.open(self.host, self.port, self._token, version, checksum, deadline, self._tls)
            except VersionRefused as refusal:
                if version == protocol.VERSION_1:
                    raise HiCacheServerError(f"the daemon speaks none of protocol versions 3, 2 and 1: "
                                             f"{refusal.message}", ErrorCode.VERSION) from None
                with self._lock:
                    self._version = version - 1  # (CRC-32C with version 1): remembered for the client's life
                continue
            self._note_slab(conn.hello.slab_path)
            return conn

    # ----------------------------------------------------------------------------------------------- the slab file

    def _note_slab(self, path: str) -> None:
        """Maps the slab file named by a new connection's HELLO, once, or again if it is another file now."""
        if self._local is False or (self._local is None and self.host not in _LOOPBACK_HOSTS):
            return
        identity = file_identity(path) if path else None
        with self._lock:
            if self._slab is not None and self._slab.path == path and self._slab.identity == identity:
                return
            if identity is None:
                self._slab, self._slab_error = None, f"the slab file {path!r} named by the daemon cannot be read"
                return
            try:
                self._slab, self._slab_error = SlabMapping(path), None
            except (OSError, ValueError) as e:
                self._slab, self._slab_error = None, f"cannot map the slab file {path!r}: {e}"

    def _slab_for(self, conn: Connection) -> Optional[SlabMapping]:
        """The slab mapping a call on ``conn`` uses, or None for TCP; raises if local=True and it cannot be had."""
        if self._local is False or (self._local is None and self.host not in _LOOPBACK_HOSTS):
            return None
        slab = self._slab
        if slab is not None and slab.path == conn.hello.slab_path:
            return slab
        if self._local:
            raise HiCacheError(f"local=True, but {self._slab_error or 'the slab file is not mapped'}")
        return None

    # ------------------------------------------------------------------------------------- failures and their reason

    def _reason(self, error: HiCacheError) -> str:
        """``error`` in words for :attr:`last_error` and the log: the daemon's address, what happened, what to do."""
        where = address(self.host, self.port)
        text = str(error)
        if error.code is not None:
            if where not in text:
                text = f"the daemon at {where} answered ERROR {text}"
            advice = _ADVICE.get(error.code)
            return f"{text}; {advice}" if advice else text
        if isinstance(error, _OUTAGES) and where not in text:  # the pool's or the deadline's own words
            text = f"the daemon at {where}: {text}"
        if isinstance(error, HiCacheProtocolError):
            text += "; is a HiCache daemon of a matching version listening there?"
        return text

    def _failed(self, error: HiCacheError, outcome: str) -> None:
        """Keeps the reason of a failed call, and logs it if it is the first failure of an outage."""
        reason = self._reason(error)
        outage = isinstance(error, _OUTAGES) or error.code in transfers.FAILED_PAGES
        with self._lock:
            self._last_error = reason
            first = outage and not self._outage_logged
            if outage:
                self._outage_logged = True
        if first:
            logger.warning("HiCache client: %s (%s). Further failures are not logged until a call succeeds; "
                           "client.last_error holds the latest reason", reason, outcome)

    def _succeeded(self) -> None:
        with self._lock:
            recovered = self._outage_logged
            self._last_error, self._outage_logged = None, False
        if recovered:
            logger.info("HiCache client: the daemon at %s answers again", address(self.host, self.port))

    # ------------------------------------------------------------------------------------------------ batched calls

    def _batched(self, what: str, statuses: list[Optional[Status]], call: Call,
                 work: Callable[[Connection], None]) -> list[Status]:
        """Runs ``work(conn)``; pages it left without a status get FAILED or TIMED_OUT from how it failed."""
        failure = Status.FAILED
        error: Optional[HiCacheError] = None
        try:
            with self._pool.borrow(call.deadline) as conn:
                conn.refusal = None
                work(conn)
                error = conn.refusal  # an ERROR answer that failed some pages (BUSY, SHUTTING_DOWN, INTERNAL...)
        except HiCacheTimeoutError as e:
            failure, error = Status.TIMED_OUT, e
        except (HiCacheConnectionError, HiCacheProtocolError) as e:
            failure, error = Status.FAILED, e
        except HiCacheServerError as e:
            if e.code is None or e.code not in transfers.FAILED_PAGES:
                self._failed(e, f"{what} raised {type(e).__name__}")
                raise
            failure, error = transfers.FAILED_PAGES[e.code], e
        except HiCacheError as e:
            self._failed(e, f"{what} raised {type(e).__name__}")
            raise
        result = [failure if s is None else s for s in statuses]
        if error is None:
            self._succeeded()
        else:
            failed = sum(1 for s in result if s in (Status.FAILED, Status.TIMED_OUT))
            kinds = "/".join(sorted({s.name for s in result if s in (Status.FAILED, Status.TIMED_OUT)}))
            pages = f"{len(result)} page{'s' if len(result) != 1 else ''}"
            self._failed(error, f"{what} of {pages}: {failed} {kinds}")
        return result

    def get(self, ns: Namespace, hashes: Sequence[PageHash], targets: Sequence[PageMemory],
            timeout_s: Optional[float] = None) -> list[Status]:
        """Reads pages into ``targets``, one per hash; a page's target length is the length asked for.

        A target is a writable buffer, an ``(address, length)`` tuple, or a list of those forming the page
        (e.g. its K and V halves). Returns one :class:`Status` per page: ``OK`` (the target holds the page,
        checksum verified), ``MISS``, ``SIZE_MISMATCH`` (stored with another length), ``CORRUPT`` (the bytes that
        arrived fail the checksum), ``TIMED_OUT``, ``FAILED`` (connection lost, L3 failure)... The content of a
        target is undefined unless its page is ``OK``: it may hold part of the page, or bytes that failed the check.
        """
        batch = _batch_of(ns, hashes, targets, writable=True, what="target")
        if not batch.keys:
            return []
        call = Call(self.timeout_s if timeout_s is None else timeout_s)

        def work(conn: Connection) -> None:
            slab = self._slab_for(conn)
            pages = list(range(len(batch.keys)))
            if slab is not None:
                pages = transfers.lease_into(conn, slab, batch, pages, call)
            if pages:
                transfers.get_over_tcp(conn, batch, pages, call)

        statuses = self._batched("get", batch.statuses, call, work)
        corrupt = [batch.keys[i] for i, st in enumerate(statuses) if st is Status.CORRUPT]
        if corrupt:
            # A page whose bytes fail their checksum is removed, so that later reads miss it rather than fail it
            # again (docs/keys.md, read-side integrity). Best effort, within what is left of the call's time.
            left = call.deadline - time.monotonic()
            logger.warning("HiCache client: %d page(s) failed their checksum (e.g. %s); removing them from the daemon",
                         len(corrupt), corrupt[0].hex())
            if left > 0:
                try:
                    self.delete(ns, corrupt, timeout_s=left)
                except HiCacheError:
                    pass
        return statuses

    def put(self, ns: Namespace, hashes: Sequence[PageHash], sources: Sequence[PageMemory],
            timeout_s: Optional[float] = None) -> list[Status]:
        """Stores pages from ``sources``, one per hash (a readable buffer, an ``(address, length)`` tuple, or a
        list of those forming the page). Returns one :class:`Status` per page: ``OK`` stored, ``EXISTS`` already
        stored, ``REJECTED`` (over the daemon's max_page_bytes, or no room), ``TIMED_OUT``, ``FAILED``...
        Pages are sent from the caller's memory with ``sendmsg``, or written into the slab file (local path)."""
        batch = _batch_of(ns, hashes, sources, writable=False, what="source")
        if not batch.keys:
            return []
        call = Call(self.timeout_s if timeout_s is None else timeout_s)

        def work(conn: Connection) -> None:
            alone_in_a_frame = (conn.hello.max_frame_bytes - protocol.HEADER_BYTES - len(batch.ns.encode(conn.version)) - 4
                                - transfers.PUT_ENTRY.size)
            largest = min(conn.hello.max_page_bytes, alone_in_a_frame)
            pages = []
            for page, length in enumerate(batch.lengths):
                if length > largest:
                    batch.statuses[page] = Status.REJECTED  # as the daemon would answer, without sending it
                else:
                    pages.append(page)
            slab = self._slab_for(conn) if pages and self._may_reserve(conn) else None
            if slab is not None:
                writable = slab.write_view()
                if writable is not None:
                    pages = transfers.reserve_from(conn, slab, writable, batch, pages, call, self._note_reserve,
                                                   self._commit_checksums, self._note_commit_checksums)
            if pages:
                transfers.put_over_tcp(conn, batch, pages, call)

        return self._batched("put", batch.statuses, call, work)

    def _may_reserve(self, conn: Connection) -> bool:
        return conn.version >= protocol.VERSION_2 and self._reserve_supported is not False

    def _note_reserve(self, supported: bool) -> None:
        self._reserve_supported = supported  # False: this daemon predates RESERVE, PUT from now on

    def _note_commit_checksums(self, needed: bool) -> None:
        self._commit_checksums = needed  # True: this daemon predates COMMIT's no-checksum flag

    def delete(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> list[Status]:
        """Removes pages from every tier. Per page: ``OK`` removed, ``MISS`` was not there, ``TIMED_OUT`` (L3 had
        not removed it in time: it may still be there), ``FAILED``."""
        keys = _page_hashes(hashes)
        statuses: list[Optional[Status]] = [None] * len(keys)
        if not keys:
            return []
        call = Call(self.timeout_s if timeout_s is None else timeout_s)
        def work(conn: Connection) -> None:
            ns_bytes = ns.encode(conn.version)
            groups = pipeline.group_pages(range(len(keys)), len(ns_bytes) + 4, lambda p: protocol.HASH_BYTES,
                                          lambda p: 1, conn.hello.max_frame_bytes)
            pipeline.run(conn, Op.DELETE, groups,
                         lambda g: ([ns_bytes, protocol.U32.pack(len(g)), b"".join(keys[p] for p in g)], 0),
                         transfers.status_answer(conn, statuses, call), transfers.chunk_error(conn, statuses),
                         call.deadline, call.io_deadline)

        return self._batched("delete", statuses, call, work)

    # ----------------------------------------------------------------------------------------- single-value calls

    def _exchange(self, op: Op, payload: bytes, timeout_s: Optional[float]) -> bytearray:
        """Sends one request and returns its answer's payload."""
        return self._on_connection(op.name.lower(), timeout_s,
                                   lambda conn, call: pipeline.exchange(conn, op, payload, call.deadline,
                                                                        call.io_deadline))

    def _on_connection(self, what: str, timeout_s: Optional[float], work: Callable[[Connection, Call], _T]) -> _T:
        """``work(conn, call)`` on a pooled connection, within the call's deadline; a failure is kept (and logged
        once per outage) before it is raised."""
        call = Call(self.timeout_s if timeout_s is None else timeout_s)
        try:
            with self._pool.borrow(call.deadline) as conn:
                result = work(conn, call)
        except HiCacheError as e:
            self._failed(e, f"{what} raised {type(e).__name__}")
            raise
        self._succeeded()
        return result

    def leading_hits(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> int:
        """How many of the pages, from the first, are stored (host slab or L3) without a gap.

        Raises :class:`HiCacheTimeoutError` if it cannot say in time (a shorter count would claim pages are gone),
        :class:`HiCacheConnectionError` if the daemon cannot be reached."""
        keys = _page_hashes(hashes)
        if not keys:
            return 0
        def work(conn: Connection, call: Call) -> int:
            ns_bytes = ns.encode(conn.version)
            per_frame = max(1, (conn.hello.max_frame_bytes - protocol.HEADER_BYTES - len(ns_bytes) - 4)
                            // protocol.HASH_BYTES)
            hits = 0
            for first in range(0, len(keys), per_frame):
                batch = keys[first:first + per_frame]
                answer = pipeline.exchange(conn, Op.LEADING_HITS,
                                           ns_bytes + protocol.U32.pack(len(batch)) + b"".join(batch),
                                           call.deadline, call.io_deadline)
                batch_hits = answers.leading_hits(answer)
                hits += batch_hits
                if batch_hits < len(batch):
                    break
            return hits

        return self._on_connection("leading_hits", timeout_s, work)

    def prefix_hits(self, ns: Namespace, hashes: Sequence[PageHash],
                    timeout_s: Optional[float] = None) -> answers.PrefixHits:
        """Per tier, the longest leading run of the pages the daemon holds: its host slab, L3, and either (what a GET
        could serve), in one round trip (protocol version 3; one frame of up to ~2 million keys). Changes no page and
        no page's recency: a router's question. L3 that does not answer in time gives ``l3_state`` ``"late"``, not an
        error."""
        keys = _page_hashes(hashes)
        if not keys:
            return answers.PrefixHits(0, 0, 0, "none")

        def work(conn: Connection, call: Call) -> answers.PrefixHits:
            _need_version(conn, 3, "PREFIX_HITS")
            payload = ns.encode(conn.version) + protocol.U32.pack(len(keys)) + b"".join(keys)
            return answers.prefix_hits(pipeline.exchange(conn, Op.PREFIX_HITS, payload, call.deadline,
                                                          call.io_deadline))

        return self._on_connection("prefix_hits", timeout_s, work)

    def retain(self, ns: Namespace, chain: Sequence[PageHash], priority: int, retention_s: float,
               timeout_s: Optional[float] = None) -> list[Status]:
        """Gives the stored pages of one chain (``chain`` from its first page: pass the prefix's keys too) a retention
        ``priority`` (0-99) that holds for ``retention_s`` seconds after each use, then decays to 0. Applied last page
        first, so that the daemon evicts the chain's suffix before its prefix. Per page: ``OK``, or ``MISS`` when the
        host slab does not hold it (protocol version 3)."""
        if not 0 <= priority <= 99:
            raise ValueError(f"priority {priority} is not within 0-99")
        if not 0 <= retention_s <= 0xFFFFFFFF / 1000:
            raise ValueError(f"retention {retention_s} s is not within 0-{0xFFFFFFFF // 1000} s")
        return self._retain(ns, chain, priority, int(retention_s * 1000), 0, "retain", timeout_s)

    def demote(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> list[Status]:
        """Makes the pages the first the daemon evicts (a superseded session's), until they are used again. Per page:
        ``OK``, or ``MISS`` when the host slab does not hold it (protocol version 3)."""
        return self._retain(ns, hashes, 0, 0, 0x01, "demote", timeout_s)

    def _retain(self, ns: Namespace, hashes: Sequence[PageHash], priority: int, retention_ms: int, flags: int,
                what: str, timeout_s: Optional[float]) -> list[Status]:
        keys = _page_hashes(hashes)
        if not keys:
            return []

        def work(conn: Connection, call: Call) -> list[Status]:
            _need_version(conn, 3, "RETAIN")
            payload = (ns.encode(conn.version) + struct.pack(">BI", priority, retention_ms)
                       + protocol.U32.pack(len(keys)) + b"".join(keys))
            out: list[list[Status]] = []

            def on_answer(_pages: list[int], frame: Frame) -> None:
                out.append(list(answers.page_statuses(conn.read_payload(frame, call.io_deadline), len(keys))))

            def on_error(_pages: list[int], code: int, message: str) -> None:
                raise error_from_frame(code, message)

            pipeline.run(conn, Op.RETAIN, [[0]], lambda _p: ([payload], flags), on_answer, on_error,
                         call.deadline, call.io_deadline)
            return out[0]

        return self._on_connection(what, timeout_s, work)

    def held(self, ns: Namespace, hashes: Sequence[PageHash], timeout_s: Optional[float] = None) -> list[bool]:
        """Per page, whether it is stored (host slab or L3): one LEADING_HITS of one page each, pipelined on one
        connection (a round trip for all of them, not one each). Raises as :meth:`leading_hits`."""
        keys = _page_hashes(hashes)
        if not keys:
            return []
        def work(conn: Connection, call: Call) -> list[bool]:
            ns_bytes = ns.encode(conn.version)
            found = [False] * len(keys)

            def on_answer(pages: list[int], frame: Frame) -> None:
                found[pages[0]] = answers.leading_hits(conn.read_payload(frame, call.io_deadline)) == 1

            def on_error(pages: list[int], code: int, message: str) -> None:
                raise error_from_frame(code, message)

            pipeline.run(conn, Op.LEADING_HITS, [[i] for i in range(len(keys))],
                         lambda pages: ([ns_bytes, protocol.U32.pack(1), keys[pages[0]]], 0), on_answer, on_error,
                         call.deadline, call.io_deadline)
            return found

        return self._on_connection("held", timeout_s, work)

    def clear(self, ns: Namespace, timeout_s: Optional[float] = None) -> None:
        """Removes every page of ``ns`` from both tiers. Raises HiCacheTimeoutError if that did not finish in time
        (its message says whether anything was removed), HiCacheServerError(INTERNAL) if L3 failed."""
        self._on_connection("clear", timeout_s,
                            lambda conn, call: pipeline.exchange(conn, Op.CLEAR, ns.encode(conn.version),
                                                                 call.deadline, call.io_deadline))

    def clear_all(self, timeout_s: Optional[float] = None) -> None:
        """Removes every page of every namespace from both tiers; raises as :meth:`clear` does."""
        self._exchange(Op.CLEAR_ALL, b"", timeout_s)

    def stats(self, timeout_s: Optional[float] = None) -> str:
        """The daemon's metrics, in Prometheus text format (as its /metrics serves them)."""
        return answers.stats_text(self._exchange(Op.STATS, b"", timeout_s))

    def health(self, timeout_s: Optional[float] = None) -> HealthState:
        """:data:`HealthState.SERVING`, or :data:`HealthState.SHUTTING_DOWN` during a graceful shutdown (an
        ``IntEnum``: 0 and 1). Raises :class:`HiCacheProtocolError` for a state the protocol does not define."""
        return answers.health_state(self._exchange(Op.HEALTH, b"", timeout_s))
