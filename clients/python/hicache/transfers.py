"""The page transfers of a batched call on the one connection it borrowed: GET and PUT over TCP, LEASE and
RELEASE (reads through the slab file), RESERVE and COMMIT (writes through it).

Each function fills the statuses of the pages it was given (``None`` until known) and leaves the others alone;
what escapes it (a timeout, a lost connection) is turned into the statuses still missing by the client. The
answers are parsed by :mod:`hicache.answers`. Not thread-safe: one call owns the connection.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import struct
import time
from typing import Callable, Optional

from . import answers, pipeline, protocol
from .buffers import copy_into_parts
from .checksums import checksum_later, checksum_of_parts
from .connection import Connection, Frame, remaining_s
from .namespace import Namespace
from .errors import HiCacheError, HiCacheProtocolError, HiCacheTimeoutError, error_from_frame
from .pipeline import AnswerHandler, ErrorHandler
from .protocol import Bytes, ErrorCode, Op, Status
from .slab import SlabMapping

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
FAILED_PAGES = {ErrorCode.BUSY: Status.FAILED, ErrorCode.SHUTTING_DOWN: Status.FAILED,
                ErrorCode.INTERNAL: Status.FAILED, ErrorCode.TIMED_OUT: Status.TIMED_OUT}
"""ERROR codes that a batched call reports as page statuses; other codes are the caller's mistake and raise."""
_CLOSES_CONNECTION = frozenset({ErrorCode.VERSION, ErrorCode.AUTH, ErrorCode.TOO_LARGE, ErrorCode.BUSY})
PUT_ENTRY = struct.Struct(">32sII")  # hash, length, crc
_GET_REQUEST_ENTRY = struct.Struct(">32sI")  # hash, length (GET, LEASE, RESERVE)


class Call:
    """One call's deadlines: the one sent to the daemon, and the socket's, a grace period later."""

    __slots__ = ("deadline", "io_deadline")

    def __init__(self, timeout_s: float):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, was {timeout_s}")
        self.deadline = time.monotonic() + timeout_s
        self.io_deadline = self.deadline + ANSWER_GRACE_S


@dataclasses.dataclass
class Batch:
    """The pages of a batched call (arguments checked) and their statuses so far, ``None`` while unknown."""

    ns: Namespace
    keys: list[bytes]
    parts: list[list[memoryview]]
    lengths: list[int]
    statuses: list[Optional[Status]]


def chunk_error(conn: Connection, statuses: list[Optional[Status]]) -> ErrorHandler:
    """The ERROR handler of batched calls: transient errors become page statuses, the rest raise."""

    def on_error(pages: list[int], code: int, message: str) -> None:
        if code in _CLOSES_CONNECTION:
            conn.broken = True
        if code in FAILED_PAGES:
            for page in pages:
                statuses[page] = FAILED_PAGES[ErrorCode(code)]
            conn.refusal = error_from_frame(code, message)  # why those pages failed: the client reports it
            return
        raise error_from_frame(code, message)

    return on_error


def status_answer(conn: Connection, statuses: list[Optional[Status]], call: Call) -> AnswerHandler:
    """The answer handler of ``n:u32 status:u8[n]`` answers (PUT, DELETE, COMMIT)."""

    def on_answer(pages: list[int], frame: Frame) -> None:
        payload = conn.read_payload(frame, call.io_deadline)
        for page, status in zip(pages, answers.page_statuses(payload, len(pages))):
            statuses[page] = status

    return on_answer


def _hold_ms(call: Call) -> int:
    return min(0xFFFFFFFF, int((call.deadline - time.monotonic()) * 1000) + HOLD_MARGIN_MS)


def _copy_until(hold_ms: int) -> float:
    """When copies under a hold of ``hold_ms`` asked for now must have started. The hold counts from when the
    daemon answers, which is after now: copies made before this are in it."""
    return time.monotonic() + min(hold_ms / 1000, ASSUMED_MAX_LEASE_S) - HOLD_SAFETY_S


def get_over_tcp(conn: Connection, batch: Batch, pages: list[int], call: Call) -> None:
    """GET over TCP: bodies are received straight into the targets' parts."""
    keys, parts, lengths, statuses = batch.keys, batch.parts, batch.lengths, batch.statuses
    max_page = conn.hello.max_page_bytes
    groups = pipeline.group_pages(pages, len(batch.ns.encode(conn.version)) + 4, lambda p: _GET_REQUEST_ENTRY.size,
                                  lambda p: protocol.GET_ENTRY.size + min(lengths[p], max_page),
                                  conn.hello.max_frame_bytes)

    def build(group: list[int]) -> tuple[list[Bytes], int]:
        table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
        window = sum(protocol.GET_ENTRY.size + min(lengths[p], max_page) for p in group)
        return [batch.ns.encode(conn.version), protocol.U32.pack(len(group)), table], window

    # Each page's checksum is taken while the next one arrives (checksum_later); checked once all have come.
    sums: list[tuple[int, concurrent.futures.Future[int], int]] = []

    def on_answer(group: list[int], frame: Frame) -> None:
        head = conn.read_bytes(answers.get_table_bytes(len(group)), call.io_deadline)
        for page, entry in zip(group, answers.get_table(head, len(group), frame.payload_length)):
            status = entry.status
            if status != Status.OK:
                statuses[page] = status
                continue
            if entry.length != lengths[page]:
                raise HiCacheProtocolError(f"a page of {lengths[page]} bytes was answered OK with {entry.length}")
            for part in parts[page]:
                conn.recv_into(part, call.io_deadline)
            sums.append((page, checksum_later(conn.checksum, parts[page]), entry.crc))

    try:
        pipeline.run(conn, Op.GET, groups, build, on_answer, chunk_error(conn, statuses), call.deadline,
                     call.io_deadline)
    finally:
        for page, crc, expected in sums:  # waited for even on failure: the targets stay in use until then
            statuses[page] = Status.OK if crc.result() == expected else Status.CORRUPT


def lease_into(conn: Connection, slab: SlabMapping, batch: Batch, pages: list[int], call: Call) -> list[int]:
    """LEASE, copy each leased page from the mapped slab into its target, RELEASE. Returns the pages the daemon
    could not lease (REJECTED: only in L3 and no room in the slab), to be fetched with GET.

    On version 2 the lease asks for no checksums and the copy is not verified: the bytes cross no wire, and the
    lease keeps the page from being reused until it is released, after the copy. On version 1 (whose
    checksum, CRC-32C, the daemon has at hand) the copy is verified."""
    keys, parts, lengths, statuses = batch.keys, batch.parts, batch.lengths, batch.statuses
    verify = conn.version < protocol.VERSION_2
    copied: dict[int, list[int]] = {}  # lease id -> pages copied under it
    hold_ms = _hold_ms(call)
    hold_until = _copy_until(hold_ms)
    groups = pipeline.group_pages(pages, len(batch.ns.encode(conn.version)) + 8, lambda p: _GET_REQUEST_ENTRY.size,
                                  lambda p: protocol.LEASE_ENTRY.size, conn.hello.max_frame_bytes)
    lease_ids: list[int] = []
    rejected: list[int] = []

    def build(group: list[int]) -> tuple[list[Bytes], int]:
        table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
        return [batch.ns.encode(conn.version), protocol.U32.pack(len(group)), table, protocol.U32.pack(hold_ms)], 0

    def on_answer(group: list[int], frame: Frame) -> None:
        payload = conn.read_payload(frame, call.io_deadline)
        lease_id, count = answers.held_id(payload)
        if lease_id != 0:  # 0: no lease was taken (the connection holds its limit); every page is REJECTED
            lease_ids.append(lease_id)
        for page, entry in zip(group, answers.lease_entries(payload, len(group), count)):
            status = entry.status
            if status == Status.REJECTED:
                rejected.append(page)
                continue
            if status != Status.OK:
                statuses[page] = status
                continue
            length, offset = entry.length, entry.offset
            if length != lengths[page] or not slab.contains(offset, length):
                raise HiCacheProtocolError(f"a lease of {length} bytes at offset {offset} for a page of "
                                           f"{lengths[page]} bytes, in a slab file of {slab.size} bytes")
            if time.monotonic() > hold_until:
                statuses[page] = Status.TIMED_OUT  # the lease may have ended: its bytes may be another page's
                continue
            copied.setdefault(lease_id, []).append(page)
            with slab.read_view[offset:offset + length] as leased:
                copy_into_parts(parts[page], leased)
            matches = not verify or checksum_of_parts(conn.checksum, parts[page]) == entry.crc
            statuses[page] = Status.OK if matches else Status.CORRUPT

    try:
        pipeline.run(conn, Op.LEASE, groups, build, on_answer, chunk_error(conn, statuses), call.deadline,
                     call.io_deadline, 0 if verify else protocol.LEASE_NO_CHECKSUMS)
    finally:
        # A lease the daemon no longer held when released had expired: what was copied under it is unsure.
        for lease_id in release(conn, lease_ids, call):
            for page in copied.get(lease_id, ()):
                statuses[page] = Status.FAILED
    return rejected


def release(conn: Connection, ids: list[int], call: Call) -> list[int]:
    """RELEASEs leases or reservations; if that cannot be done in time, drops the connection, which ends them.
    Returns the ids the daemon did not release (``released`` 0: already ended, so expired), or all of them when
    it could not say."""
    if not ids or conn.broken:
        return list(ids)
    not_released: list[int] = []

    def on_answer(group: list[int], frame: Frame) -> None:
        if not answers.released(conn.read_payload(frame, call.io_deadline)):
            not_released.append(group[0])

    try:
        pipeline.run(conn, Op.RELEASE, [[i] for i in ids], lambda group: ([struct.pack(">Q", group[0])], 0),
                     on_answer, lambda group, code, message: not_released.append(group[0]),
                     call.io_deadline, call.io_deadline)
    except HiCacheError:
        conn.broken = True
        return list(ids)
    return not_released


def _checksum(crc: "concurrent.futures.Future[int]", call: Call) -> int:
    """A page's checksum from :func:`checksum_later`, waited for until the call's deadline."""
    try:
        return crc.result(remaining_s(call.deadline))
    except concurrent.futures.TimeoutError:
        raise HiCacheTimeoutError("the call's deadline passed while page checksums were computed") from None


def put_over_tcp(conn: Connection, batch: Batch, pages: list[int], call: Call) -> None:
    """PUT over TCP: the header and table, then the pages' parts, gathered by ``sendmsg``."""
    keys, parts, lengths = batch.keys, batch.parts, batch.lengths
    groups = pipeline.group_pages(pages, len(batch.ns.encode(conn.version)) + 4, lambda p: PUT_ENTRY.size + lengths[p],
                                  lambda p: lengths[p], conn.hello.max_frame_bytes)

    # Every page's checksum starts now, side by side; a frame waits only for its own pages' while earlier ones send.
    crcs = {p: checksum_later(conn.checksum, parts[p]) for p in pages}

    def build(group: list[int]) -> tuple[list[Bytes], int]:
        table = b"".join(PUT_ENTRY.pack(keys[p], lengths[p], _checksum(crcs[p], call))
                         for p in group)
        bodies = [part for p in group for part in parts[p]]
        return [batch.ns.encode(conn.version), protocol.U32.pack(len(group)), table, *bodies], sum(lengths[p] for p in group)

    try:
        pipeline.run(conn, Op.PUT, groups, build, status_answer(conn, batch.statuses, call),
                     chunk_error(conn, batch.statuses), call.deadline, call.io_deadline)
    finally:
        # A failed call returns to a caller that may free the sources: no checksum may still be reading them.
        for crc in crcs.values():
            if not crc.cancel():
                concurrent.futures.wait([crc])


@dataclasses.dataclass
class _Reservation:
    """A RESERVE answer's reservation: its pages (COMMIT names as many, in this order), and whether its COMMIT went
    out (a COMMIT ends it: it is not released)."""

    reservation_id: int
    pages: list[int]
    committed: bool = False


RESERVE_GROUP_BYTES = 16 << 20
"""About this many bytes of pages per reservation (at least one page)."""


def _split_by_bytes(groups: list[list[int]], lengths: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for group in groups:
        current: list[int] = []
        total = 0
        for page in group:
            if current and total + lengths[page] > RESERVE_GROUP_BYTES:
                out.append(current)
                current, total = [], 0
            current.append(page)
            total += lengths[page]
        if current:
            out.append(current)
    return out


def reserve_from(conn: Connection, slab: SlabMapping, writable: memoryview, batch: Batch, pages: list[int],
                 call: Call, note_support: Callable[[bool], None], checksums: bool = False,
                 note_checksums: Callable[[bool], None] = lambda needed: None) -> list[int]:
    """RESERVE room in the slab, copy each page there, COMMIT. The COMMIT carries no checksums (header flag 0x01:
    the daemon takes each page's from the slab, as the bytes crossed no wire; a CRC-32 pass here cost more than the
    copy), unless ``checksums``. Returns the pages left for PUT: all of them if the daemon does not know RESERVE
    (ERROR UNKNOWN_OP, told to ``note_support``); those RESERVE answered REJECTED (reserved room is never evicted, so
    a put may find room where a reservation did not); and, when a COMMIT without checksums found every page FAILED,
    those pages: a daemon older than the flag ignores it and compares the 0s sent (``note_checksums(True)``: send
    them from now on). ``note_support`` hears whether the daemon takes RESERVE once its answers say so."""
    keys, parts, lengths, statuses = batch.keys, batch.parts, batch.lengths, batch.statuses
    hold_ms = _hold_ms(call)
    hold_until = _copy_until(hold_ms)  # as for leases
    # Reservations of about RESERVE_GROUP_BYTES each: every RESERVE goes out at once (they hold no bytes), and each
    # COMMIT right after its pages are copied, so the daemon checksums one group while this thread copies the next.
    groups = _split_by_bytes(
        pipeline.group_pages(pages, len(batch.ns.encode(conn.version)) + 8, lambda p: _GET_REQUEST_ENTRY.size,
                             lambda p: protocol.RESERVE_ENTRY.size, conn.hello.max_frame_bytes), lengths)
    reservations: list[_Reservation] = []
    commits: dict[int, list[int]] = {}  # COMMIT request id -> its reservation's pages
    committed_pages: list[int] = []  # pages a COMMIT names as written
    unknown: list[int] = []
    no_room: list[int] = []  # REJECTED by RESERVE: reserved room cannot be evicted; PUT may still find room
    on_chunk_error = chunk_error(conn, statuses)

    def build(group: list[int]) -> tuple[list[Bytes], int]:
        table = b"".join(_GET_REQUEST_ENTRY.pack(keys[p], lengths[p]) for p in group)
        return [batch.ns.encode(conn.version), protocol.U32.pack(len(group)), table, protocol.U32.pack(hold_ms)], 0

    def on_answer(group: list[int], frame: Frame) -> None:
        payload = conn.read_payload(frame, call.io_deadline)
        reservation_id, count = answers.held_id(payload)
        reservations.append(_Reservation(reservation_id, group))
        copied: list[int] = []
        late = False
        for page, entry in zip(group, answers.reserve_entries(payload, len(group), count)):
            status = entry.status
            if status != Status.OK:
                statuses[page] = status
                if status == Status.REJECTED:
                    no_room.append(page)
                continue
            offset = entry.offset
            if not slab.contains(offset, lengths[page]):
                raise HiCacheProtocolError(f"room for {lengths[page]} bytes reserved at offset {offset}, in a slab "
                                           f"file of {slab.size} bytes")
            if late or time.monotonic() > hold_until:
                # The reservation may have ended and its room become another page's: write nothing.
                statuses[page] = Status.TIMED_OUT
                late = True
                continue
            position = offset
            for part in parts[page]:
                writable[position:position + part.nbytes] = part
                position += part.nbytes
            copied.append(page)
        if late:
            # A COMMIT without checksums would store the rooms left unwritten as they are: none is sent, and the
            # reservation is released (below) with nothing of it stored.
            for page in copied:
                statuses[page] = Status.TIMED_OUT
        elif reservation_id != 0:  # 0 took nothing: nothing to commit
            if checksums:
                crcs = [checksum_of_parts(conn.checksum, parts[p]) if p in copied else 0 for p in group]
                body = [struct.pack(f">QI{len(group)}I", reservation_id, len(group), *crcs)]
            else:
                body = [struct.pack(">QI", reservation_id, len(group)), bytes(4 * len(group))]
            flags = 0 if checksums else protocol.COMMIT_NO_CHECKSUMS
            commits[pipeline.send_one(conn, Op.COMMIT, body, call.deadline, flags)] = group
            committed_pages.extend(copied)
            reservations[-1].committed = True

    def on_error(group: list[int], code: int, message: str) -> None:
        if code == ErrorCode.UNKNOWN_OP:
            unknown.extend(group)
        else:
            on_chunk_error(group, code, message)

    committed = False
    try:
        pipeline.run(conn, Op.RESERVE, groups, build, on_answer, on_error, call.deadline, call.io_deadline)
        if unknown:
            note_support(False)  # this daemon predates RESERVE: PUT from now on
            return sorted(unknown)
        note_support(True)
        pipeline.read_answers(conn, Op.COMMIT, commits, status_answer(conn, statuses, call), on_chunk_error,
                              call.io_deadline)
        committed = True
        release(conn, [r.reservation_id for r in reservations if r.reservation_id != 0 and not r.committed], call)
        if not checksums and committed_pages and all(statuses[p] == Status.FAILED for p in committed_pages):
            note_checksums(True)  # a daemon that predates COMMIT's flag: PUT these, send checksums from now on
            return sorted(no_room + committed_pages)
        return sorted(no_room)
    finally:
        if not committed:
            if commits:
                conn.broken = True  # COMMIT answers are left unread: the connection cannot be reused
            release(conn, [r.reservation_id for r in reservations if r.reservation_id != 0 and not r.committed],
                    call)
