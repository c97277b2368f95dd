"""The HiCache client: pages in and out of the daemon, over TCP or, on the same host, through its slab file."""

from __future__ import annotations

import struct
import threading
import time
from typing import Optional, Sequence

from . import pipeline, protocol
from .buffers import copy_into_parts, page_parts, parts_length
from .checksums import CHECKSUM_CRC32, CHECKSUM_CRC32C, checksum_of_parts
from .connection import Connection, Frame, VersionRefused
from .errors import (HiCacheConnectionError, HiCacheError, HiCacheProtocolError, HiCacheServerError,
                     HiCacheTimeoutError, error_from_frame)
from .namespace import LAYER_MAJOR, TOKEN_MAJOR, Namespace  # noqa: F401  (re-exported)
from .pool import ConnectionPool
from .protocol import ErrorCode, HealthState, HelloAnswer, Op, Status, status_of
from .slab import SlabMapping, file_identity

ANSWER_GRACE_S = 0.5
"""How long after a call's deadline the client still waits for the daemon's answer, which then says TIMED_OUT
per page (the daemon counts the deadline from when it has read the whole frame, a little after the client)."""
HOLD_MARGIN_MS = 5000
"""Added to a lease's or reservation's hold beyond the call's deadline: it is released at once when done."""
HOLD_SAFETY_S = 1.0
"""A copy into or out of the slab starts only this long before the hold asked for could end (the daemon checks expiry
every second). The daemon may have shortened the hold to its ``server.max-lease``; the client assumes at most
:data:`ASSUMED_MAX_LEASE_S`, the default, and a lease found ended at RELEASE fails its pages."""
ASSUMED_MAX_LEASE_S = 60.0
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_FAILED_PAGES = {ErrorCode.BUSY: Status.FAILED, ErrorCode.SHUTTING_DOWN: Status.FAILED,
                 ErrorCode.INTERNAL: Status.FAILED, ErrorCode.TIMED_OUT: Status.TIMED_OUT}
"""ERROR codes that a batched call reports as page statuses; other codes are the caller's mistake and raise."""
_CLOSES_CONNECTION = frozenset({ErrorCode.VERSION, ErrorCode.AUTH, ErrorCode.TOO_LARGE, ErrorCode.BUSY})
_PUT_ENTRY = struct.Struct(">32sII")  # hash, length, crc
_GET_REQUEST_ENTRY = struct.Struct(">32sI")  # hash, length (GET, LEASE, RESERVE)


def _page_hash(value, index: int) -> bytes:
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


def _page_hashes(hashes: Sequence) -> list[bytes]:
    return [_page_hash(h, i) for i, h in enumerate(hashes)]


def _pages_of(hashes: Sequence, buffers: Sequence, writable: bool, what: str) -> tuple[list, list, list]:
    """The page keys, each page's parts and each page's length, with the arguments checked."""
    keys = _page_hashes(hashes)
    if len(buffers) != len(keys):
        raise ValueError(f"{len(keys)} hashes but {len(buffers)} {what}s")
    parts = [page_parts(b, writable=writable, what=f"{what} {i}") for i, b in enumerate(buffers)]
    lengths = [parts_length(p) for p in parts]
    for i, length in enumerate(lengths):
        if length == 0:
            raise ValueError(f"{what} {i} is empty; a page has at least 1 byte")
    return keys, parts, lengths


class _Call:
    """One call's deadlines: the one sent to the daemon, and the socket's, a grace period later."""

    __slots__ = ("deadline", "io_deadline")

    def __init__(self, timeout_s: float):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, was {timeout_s}")
        self.deadline = time.monotonic() + timeout_s
        self.io_deadline = self.deadline + ANSWER_GRACE_S


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

    ``max_version``: the protocol version asked for first (2: CRC-32 at C speed, RESERVE/COMMIT). A daemon that
    refuses it (ERROR VERSION) is asked again for version 1, with pure-Python CRC-32C; the client remembers that.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = protocol.DEFAULT_PORT, token: str = "",
                 pool_size: int = 4, timeout_s: float = 10.0, local: Optional[bool] = None,
                 max_version: int = protocol.VERSION_2):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, was {timeout_s}")
        if max_version not in (protocol.VERSION_1, protocol.VERSION_2):
            raise ValueError(f"max_version must be 1 or 2, was {max_version}")
        protocol.encode_string(token)  # refuses a token the protocol cannot carry, now rather than per call
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._token = token
        self._local = local
        self._lock = threading.Lock()
        self._version = max_version
        self._reserve_supported: Optional[bool] = None
        self._slab: Optional[SlabMapping] = None
        self._slab_error: Optional[str] = None
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

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def protocol_version(self) -> int:
        """The version this client asks for on new connections: 2, or 1 once a daemon refused 2."""
        return self._version

    @property
    def reserve_supported(self) -> Optional[bool]:
        """Whether the daemon takes RESERVE/COMMIT: None until a local put tried it."""
        return self._reserve_supported

    @property
    def local_slab_path(self) -> Optional[str]:
        """The daemon's slab file if this client has mapped it for the local path, else None (TCP only, or no
        connection opened yet)."""
        slab = self._slab
        return slab.path if slab is not None else None

    def handshake(self, timeout_s: Optional[float] = None) -> HelloAnswer:
        """What the daemon said in the HELLO answer of a pooled connection (opened if needed)."""
        call = _Call(self.timeout_s if timeout_s is None else timeout_s)
        with self._pool.borrow(call.deadline) as conn:
            return conn.hello

    def _open_connection(self, deadline: float) -> Connection:
        while True:
            version = self._version
            checksum = CHECKSUM_CRC32 if version >= protocol.VERSION_2 else CHECKSUM_CRC32C
            try:
                conn = Connection.open(self.host, self.port, self._token, version, checksum, deadline)
            except VersionRefused as refusal:
                if version == protocol.VERSION_1:
                    raise HiCacheServerError(f"the daemon speaks neither protocol version 2 nor 1: {refusal.message}",
                                             ErrorCode.VERSION) from None
                with self._lock:
                    self._version = protocol.VERSION_1  # and CRC-32C with it: remembered for the client's life
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

    # ------------------------------------------------------------------------------------------------ batched calls

    def _batched(self, statuses: list, call: _Call, work) -> list[Status]:
        """Runs ``work(conn)``; pages it left without a status get FAILED or TIMED_OUT from how it failed."""
        failure = Status.FAILED
        try:
            with self._pool.borrow(call.deadline) as conn:
                work(conn)
        except HiCacheTimeoutError:
            failure = Status.TIMED_OUT
        except (HiCacheConnectionError, HiCacheProtocolError):
            failure = Status.FAILED
        except HiCacheServerError as e:
            if e.code not in _FAILED_PAGES:
                raise
            failure = _FAILED_PAGES[e.code]
        return [failure if s is None else s for s in statuses]

    def _chunk_error(self, conn: Connection, statuses: list):
        """The ERROR handler of batched calls: transient errors become page statuses, the rest raise."""

        def on_error(pages: list, code: int, message: str) -> None:
            if code in _CLOSES_CONNECTION:
                conn.broken = True
            if code in _FAILED_PAGES:
                for page in pages:
                    statuses[page] = _FAILED_PAGES[ErrorCode(code)]
                return
            raise error_from_frame(code, message)

        return on_error

    def get(self, ns: Namespace, hashes: Sequence, targets: Sequence,
            timeout_s: Optional[float] = None) -> list[Status]:
        """Reads pages into ``targets``, one per hash; a page's target length is the length asked for.

        A target is a writable buffer, an ``(address, length)`` tuple, or a list of those forming the page
        (e.g. its K and V halves). Returns one :class:`Status` per page: ``OK`` (the target holds the page,
        checksum verified), ``MISS``, ``SIZE_MISMATCH`` (stored with another length), ``CORRUPT`` (the bytes that
        arrived fail the checksum), ``TIMED_OUT``, ``FAILED`` (connection lost, L3 failure)... The content of a
        target is undefined unless its page is ``OK``: it may hold part of the page, or bytes that failed the check.
        """
        keys, parts, lengths = _pages_of(hashes, targets, writable=True, what="target")
        statuses: list = [None] * len(keys)
        if not keys:
            return []
        call = _Call(self.timeout_s if timeout_s is None else timeout_s)

        def work(conn: Connection) -> None:
            slab = self._slab_for(conn)
            pages = list(range(len(keys)))
            if slab is not None:
                pages = self._lease_into(conn, slab, ns, keys, parts, lengths, pages, statuses, call)
            if pages:
                self._get_into(conn, ns, keys, parts, lengths, pages, statuses, call)

        return self._batched(statuses, call, work)

    def _get_into(self, conn: Connection, ns: Namespace, keys, parts, lengths, pages, statuses, call: _Call) -> None:
        """GET over TCP: bodies are received straight into the targets' parts."""
        ns_bytes = ns.encode()
        max_page = conn.hello.max_page_bytes
        groups = pipeline.group_pages(pages, len(ns_bytes) + 4, lambda p: _GET_REQUEST_ENTRY.size,
                                      lambda p: protocol.GET_ENTRY.size + min(lengths[p], max_page),
                                      conn.hello.max_frame_bytes)

        def build(group: list) -> tuple[list, int]:
            table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
            window = sum(protocol.GET_ENTRY.size + min(lengths[p], max_page) for p in group)
            return [ns_bytes, protocol.U32.pack(len(group)), table], window

        def on_answer(group: list, frame: Frame) -> None:
            head = conn.read_bytes(4 + protocol.GET_ENTRY.size * len(group), call.io_deadline)
            (count,) = protocol.U32.unpack_from(head, 0)
            if count != len(group):
                raise HiCacheProtocolError(f"a GET of {len(group)} pages was answered for {count}")
            entries = [protocol.GET_ENTRY.unpack_from(head, 4 + protocol.GET_ENTRY.size * i) for i in range(count)]
            bodies = sum(length for status, length, _crc in entries if status == Status.OK)
            if len(head) + bodies != frame.payload_length:
                raise HiCacheProtocolError(f"a GET answer of {frame.payload_length} bytes whose table announces "
                                           f"{len(head) + bodies}")
            for page, (code, length, crc) in zip(group, entries):
                status = status_of(code)
                if status != Status.OK:
                    statuses[page] = status
                    continue
                if length != lengths[page]:
                    raise HiCacheProtocolError(f"a page of {lengths[page]} bytes was answered OK with {length}")
                for part in parts[page]:
                    conn.recv_into(part, call.io_deadline)
                matches = checksum_of_parts(conn.checksum, parts[page]) == crc
                statuses[page] = Status.OK if matches else Status.CORRUPT

        pipeline.run(conn, Op.GET, groups, build, on_answer, self._chunk_error(conn, statuses), call.deadline,
                     call.io_deadline)

    def _lease_into(self, conn: Connection, slab: SlabMapping, ns: Namespace, keys, parts, lengths, pages,
                    statuses, call: _Call) -> list:
        """LEASE, copy each leased page from the mapped slab into its target, RELEASE. Returns the pages the daemon
        could not lease (REJECTED: only in L3 and no room in the slab), to be fetched with GET.

        On version 2 the lease asks for no checksums and the copy is not verified: the bytes cross no wire, and the
        lease keeps the page from being reused until it is released, after the copy. On version 1 (whose
        checksum, CRC-32C, the daemon has at hand) the copy is verified."""
        verify = conn.version < protocol.VERSION_2
        copied: dict[int, list] = {}  # lease id -> pages copied under it
        ns_bytes = ns.encode()
        hold_ms = min(0xFFFFFFFF, int((call.deadline - time.monotonic()) * 1000) + HOLD_MARGIN_MS)
        # The hold counts from when the daemon answers, which is after now: copies made before this are in it.
        hold_until = time.monotonic() + min(hold_ms / 1000, ASSUMED_MAX_LEASE_S) - HOLD_SAFETY_S
        groups = pipeline.group_pages(pages, len(ns_bytes) + 8, lambda p: _GET_REQUEST_ENTRY.size,
                                      lambda p: protocol.LEASE_ENTRY.size, conn.hello.max_frame_bytes)
        lease_ids: list[int] = []
        rejected: list[int] = []

        def build(group: list) -> tuple[list, int]:
            table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
            return [ns_bytes, protocol.U32.pack(len(group)), table, protocol.U32.pack(hold_ms)], 0

        def on_answer(group: list, frame: Frame) -> None:
            payload = conn.read_payload(frame, call.io_deadline)
            lease_id, count = struct.unpack_from(">QI", payload, 0)
            if lease_id != 0:  # 0: no lease was taken (the connection holds its limit); every page is REJECTED
                lease_ids.append(lease_id)
            if count != len(group) or len(payload) != 12 + protocol.LEASE_ENTRY.size * count:
                raise HiCacheProtocolError(f"a LEASE of {len(group)} pages was answered with {count} entries in "
                                           f"{len(payload)} bytes")
            for i, page in enumerate(group):
                code, length, crc, offset = protocol.LEASE_ENTRY.unpack_from(payload, 12 + protocol.LEASE_ENTRY.size * i)
                status = status_of(code)
                if status == Status.REJECTED:
                    rejected.append(page)
                    continue
                if status != Status.OK:
                    statuses[page] = status
                    continue
                if length != lengths[page] or not slab.contains(offset, length):
                    raise HiCacheProtocolError(f"a lease of {length} bytes at offset {offset} for a page of "
                                               f"{lengths[page]} bytes, in a slab file of {slab.size} bytes")
                if time.monotonic() > hold_until:
                    statuses[page] = Status.TIMED_OUT  # the lease may have ended: its bytes may be another page's
                    continue
                copied.setdefault(lease_id, []).append(page)
                with slab.read_view[offset:offset + length] as leased:
                    copy_into_parts(parts[page], leased)
                matches = not verify or checksum_of_parts(conn.checksum, parts[page]) == crc
                statuses[page] = Status.OK if matches else Status.CORRUPT

        try:
            pipeline.run(conn, Op.LEASE, groups, build, on_answer, self._chunk_error(conn, statuses), call.deadline,
                         call.io_deadline, 0 if verify else protocol.LEASE_NO_CHECKSUMS)
        finally:
            # A lease the daemon no longer held when released had expired: what was copied under it is unsure.
            for lease_id in self._release(conn, lease_ids, call):
                for page in copied.get(lease_id, ()):
                    statuses[page] = Status.FAILED
        return rejected

    def _release(self, conn: Connection, ids: list, call: _Call) -> list:
        """RELEASEs leases or reservations; if that cannot be done in time, drops the connection, which ends them.
        Returns the ids the daemon did not release (``released`` 0: already ended, so expired), or all of them when
        it could not say."""
        if not ids or conn.broken:
            return list(ids)
        not_released: list = []

        def on_answer(group: list, frame: Frame) -> None:
            payload = conn.read_payload(frame, call.io_deadline)
            if len(payload) != 1 or payload[0] != 1:
                not_released.append(group[0])

        try:
            pipeline.run(conn, Op.RELEASE, [[i] for i in ids], lambda group: ([struct.pack(">Q", group[0])], 0),
                         on_answer, lambda group, code, message: not_released.append(group[0]),
                         call.io_deadline, call.io_deadline)
        except HiCacheError:
            conn.broken = True
            return list(ids)
        return not_released

    def put(self, ns: Namespace, hashes: Sequence, sources: Sequence,
            timeout_s: Optional[float] = None) -> list[Status]:
        """Stores pages from ``sources``, one per hash (a readable buffer, an ``(address, length)`` tuple, or a
        list of those forming the page). Returns one :class:`Status` per page: ``OK`` stored, ``EXISTS`` already
        stored, ``REJECTED`` (over the daemon's max_page_bytes, or no room), ``TIMED_OUT``, ``FAILED``...
        Pages are sent from the caller's memory with ``sendmsg``, or written into the slab file (local path)."""
        keys, parts, lengths = _pages_of(hashes, sources, writable=False, what="source")
        statuses: list = [None] * len(keys)
        if not keys:
            return []
        call = _Call(self.timeout_s if timeout_s is None else timeout_s)

        def work(conn: Connection) -> None:
            alone_in_a_frame = (conn.hello.max_frame_bytes - protocol.HEADER_BYTES - len(ns.encode()) - 4
                                - _PUT_ENTRY.size)
            largest = min(conn.hello.max_page_bytes, alone_in_a_frame)
            pages = []
            for page, length in enumerate(lengths):
                if length > largest:
                    statuses[page] = Status.REJECTED  # as the daemon would answer, without sending it
                else:
                    pages.append(page)
            slab = self._slab_for(conn) if pages and self._may_reserve(conn) else None
            writable = slab.write_view() if slab is not None else None
            if writable is not None:
                pages = self._reserve_from(conn, slab, writable, ns, keys, parts, lengths, pages, statuses, call)
            if pages:
                self._put_from(conn, ns, keys, parts, lengths, pages, statuses, call)

        return self._batched(statuses, call, work)

    def _may_reserve(self, conn: Connection) -> bool:
        return conn.version >= protocol.VERSION_2 and self._reserve_supported is not False

    def _put_from(self, conn: Connection, ns: Namespace, keys, parts, lengths, pages, statuses, call: _Call) -> None:
        """PUT over TCP: the header and table, then the pages' parts, gathered by ``sendmsg``."""
        ns_bytes = ns.encode()
        groups = pipeline.group_pages(pages, len(ns_bytes) + 4, lambda p: _PUT_ENTRY.size + lengths[p],
                                      lambda p: lengths[p], conn.hello.max_frame_bytes)

        def build(group: list) -> tuple[list, int]:
            table = b"".join(_PUT_ENTRY.pack(keys[p], lengths[p], checksum_of_parts(conn.checksum, parts[p]))
                             for p in group)
            bodies = [part for p in group for part in parts[p]]
            return [ns_bytes, protocol.U32.pack(len(group)), table, *bodies], sum(lengths[p] for p in group)

        pipeline.run(conn, Op.PUT, groups, build, self._status_answer(conn, statuses, call),
                     self._chunk_error(conn, statuses), call.deadline, call.io_deadline)

    def _status_answer(self, conn: Connection, statuses: list, call: _Call):
        """The answer handler of ``n:u32 status:u8[n]`` answers (PUT, DELETE, COMMIT)."""

        def on_answer(group: list, frame: Frame) -> None:
            payload = conn.read_payload(frame, call.io_deadline)
            (count,) = protocol.U32.unpack_from(payload, 0)
            if count != len(group) or len(payload) != 4 + count:
                raise HiCacheProtocolError(f"a request of {len(group)} pages was answered with {count} statuses in "
                                           f"{len(payload)} bytes")
            for page, code in zip(group, payload[4:]):
                statuses[page] = status_of(code)

        return on_answer

    def _reserve_from(self, conn: Connection, slab: SlabMapping, writable: memoryview, ns: Namespace, keys, parts,
                      lengths, pages, statuses, call: _Call) -> list:
        """RESERVE room in the slab, copy each page there, COMMIT with its checksum. Returns the pages left for
        PUT: all of them if the daemon does not know RESERVE (ERROR UNKNOWN_OP, remembered), else those RESERVE
        answered REJECTED (reserved room is never evicted, so a put may find room where a reservation did not)."""
        ns_bytes = ns.encode()
        hold_ms = min(0xFFFFFFFF, int((call.deadline - time.monotonic()) * 1000) + HOLD_MARGIN_MS)
        hold_until = time.monotonic() + min(hold_ms / 1000, ASSUMED_MAX_LEASE_S) - HOLD_SAFETY_S  # as for leases
        groups = pipeline.group_pages(pages, len(ns_bytes) + 8, lambda p: _GET_REQUEST_ENTRY.size,
                                      lambda p: protocol.RESERVE_ENTRY.size, conn.hello.max_frame_bytes)
        reservations: list[tuple[int, list, list]] = []  # (id, pages, checksums)
        unknown: list[int] = []
        no_room: list[int] = []  # REJECTED by RESERVE: reserved room cannot be evicted; PUT may still find room
        chunk_error = self._chunk_error(conn, statuses)

        def build(group: list) -> tuple[list, int]:
            table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
            return [ns_bytes, protocol.U32.pack(len(group)), table, protocol.U32.pack(hold_ms)], 0

        def on_answer(group: list, frame: Frame) -> None:
            payload = conn.read_payload(frame, call.io_deadline)
            reservation_id, count = struct.unpack_from(">QI", payload, 0)
            checksums: list[int] = []
            reservations.append((reservation_id, group, checksums))
            if count != len(group) or len(payload) != 12 + protocol.RESERVE_ENTRY.size * count:
                raise HiCacheProtocolError(f"a RESERVE of {len(group)} pages was answered with {count} entries in "
                                           f"{len(payload)} bytes")
            for i, page in enumerate(group):
                code, offset = protocol.RESERVE_ENTRY.unpack_from(payload, 12 + protocol.RESERVE_ENTRY.size * i)
                status = status_of(code)
                if status != Status.OK:
                    statuses[page] = status
                    checksums.append(0)
                    if status == Status.REJECTED:
                        no_room.append(page)
                    continue
                if not slab.contains(offset, lengths[page]):
                    raise HiCacheProtocolError(f"room for {lengths[page]} bytes reserved at offset {offset}, in a slab "
                                               f"file of {slab.size} bytes")
                if time.monotonic() > hold_until:
                    # The reservation may have ended and its room become another page's: write nothing. The COMMIT
                    # then finds the room's bytes wrong (FAILED, not stored) or the reservation gone.
                    statuses[page] = Status.TIMED_OUT
                    checksums.append(0)
                    continue
                position = offset
                for part in parts[page]:
                    writable[position:position + part.nbytes] = part
                    position += part.nbytes
                checksums.append(checksum_of_parts(conn.checksum, parts[page]))

        def on_error(group: list, code: int, message: str) -> None:
            if code == ErrorCode.UNKNOWN_OP:
                unknown.extend(group)
            else:
                chunk_error(group, code, message)

        committed = False
        try:
            pipeline.run(conn, Op.RESERVE, groups, build, on_answer, on_error, call.deadline, call.io_deadline)
            if unknown:
                self._reserve_supported = False  # this daemon predates RESERVE: PUT from now on
                return sorted(unknown)
            self._reserve_supported = True
            # Reservation 0 took nothing (the connection holds its limit of leases and reservations; every page is
            # REJECTED and goes to PUT): there is nothing to commit.
            by_id = {rid: (group, checksums) for rid, group, checksums in reservations if rid != 0}
            pipeline.run(conn, Op.COMMIT, [[rid] for rid in by_id],
                         lambda g: ([struct.pack(">QI", g[0], len(by_id[g[0]][1])),
                                     struct.pack(f">{len(by_id[g[0]][1])}I", *by_id[g[0]][1])], 0),
                         lambda g, frame: self._status_answer(conn, statuses, call)(by_id[g[0]][0], frame),
                         lambda g, code, message: chunk_error(by_id[g[0]][0], code, message),
                         call.deadline, call.io_deadline)
            committed = True
            return sorted(no_room)
        finally:
            if not committed:
                self._release(conn, [rid for rid, _, _ in reservations if rid != 0], call)

    def delete(self, ns: Namespace, hashes: Sequence, timeout_s: Optional[float] = None) -> list[Status]:
        """Removes pages from every tier. Per page: ``OK`` removed, ``MISS`` was not there, ``TIMED_OUT`` (L3 had
        not removed it in time: it may still be there), ``FAILED``."""
        keys = _page_hashes(hashes)
        statuses: list = [None] * len(keys)
        if not keys:
            return []
        call = _Call(self.timeout_s if timeout_s is None else timeout_s)
        ns_bytes = ns.encode()

        def work(conn: Connection) -> None:
            groups = pipeline.group_pages(range(len(keys)), len(ns_bytes) + 4, lambda p: protocol.HASH_BYTES,
                                          lambda p: 1, conn.hello.max_frame_bytes)
            pipeline.run(conn, Op.DELETE, groups,
                         lambda g: ([ns_bytes, protocol.U32.pack(len(g)), b"".join(keys[p] for p in g)], 0),
                         self._status_answer(conn, statuses, call), self._chunk_error(conn, statuses),
                         call.deadline, call.io_deadline)

        return self._batched(statuses, call, work)

    # ----------------------------------------------------------------------------------------- single-value calls

    def _exchange(self, op: Op, payload: bytes, timeout_s: Optional[float], conn_work=None) -> bytearray:
        call = _Call(self.timeout_s if timeout_s is None else timeout_s)
        with self._pool.borrow(call.deadline) as conn:
            if conn_work is not None:
                return conn_work(conn, call)
            return pipeline.exchange(conn, op, payload, call.deadline, call.io_deadline)

    def leading_hits(self, ns: Namespace, hashes: Sequence, timeout_s: Optional[float] = None) -> int:
        """How many of the pages, from the first, are stored (host slab or L3) without a gap.

        Raises :class:`HiCacheTimeoutError` if it cannot say in time (a shorter count would claim pages are gone),
        :class:`HiCacheConnectionError` if the daemon cannot be reached."""
        keys = _page_hashes(hashes)
        if not keys:
            return 0
        ns_bytes = ns.encode()

        def work(conn: Connection, call: _Call) -> int:
            per_frame = max(1, (conn.hello.max_frame_bytes - protocol.HEADER_BYTES - len(ns_bytes) - 4)
                            // protocol.HASH_BYTES)
            hits = 0
            for first in range(0, len(keys), per_frame):
                batch = keys[first:first + per_frame]
                answer = pipeline.exchange(conn, Op.LEADING_HITS,
                                           ns_bytes + protocol.U32.pack(len(batch)) + b"".join(batch),
                                           call.deadline, call.io_deadline)
                (batch_hits,) = protocol.U32.unpack_from(answer, 0)
                hits += batch_hits
                if batch_hits < len(batch):
                    break
            return hits

        return self._exchange(Op.LEADING_HITS, b"", timeout_s, work)

    def clear(self, ns: Namespace, timeout_s: Optional[float] = None) -> None:
        """Removes every page of ``ns`` from both tiers. Raises HiCacheTimeoutError if that did not finish in time
        (its message says whether anything was removed), HiCacheServerError(INTERNAL) if L3 failed."""
        self._exchange(Op.CLEAR, ns.encode(), timeout_s)

    def clear_all(self, timeout_s: Optional[float] = None) -> None:
        """Removes every page of every namespace from both tiers; raises as :meth:`clear` does."""
        self._exchange(Op.CLEAR_ALL, b"", timeout_s)

    def stats(self, timeout_s: Optional[float] = None) -> str:
        """The daemon's metrics, in Prometheus text format (as its /metrics serves them)."""
        answer = self._exchange(Op.STATS, b"", timeout_s)
        (length,) = protocol.U32.unpack_from(answer, 0)
        if length != len(answer) - 4:
            raise HiCacheProtocolError(f"a STATS answer announcing {length} bytes of text carries {len(answer) - 4}")
        return bytes(answer[4:]).decode("utf-8")

    def health(self, timeout_s: Optional[float] = None) -> int:
        """:data:`HealthState.SERVING` (0), or :data:`HealthState.SHUTTING_DOWN` (1) during a graceful shutdown."""
        answer = self._exchange(Op.HEALTH, b"", timeout_s)
        if len(answer) != 1:
            raise HiCacheProtocolError(f"a HEALTH answer of {len(answer)} bytes")
        try:
            return HealthState(answer[0])
        except ValueError:
            return answer[0]
