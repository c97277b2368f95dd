"""Batched requests on one connection: split into frames, pipelined, answers matched by request id.

A batch of pages becomes one frame, or several when it would not fit in ``max_frame_bytes``. Frames are sent
back to back and their answers read in whatever order the daemon sends them (docs/protocol.md §1: a request that
waits on L3 is answered after later ones). At most :data:`WINDOW_BYTES` of answers (or of request bodies) are
left outstanding, below the daemon's default ``server.max-in-flight-bytes`` (128 MiB), so that neither side waits on
the other. Stateless functions; they use the connection they are given, which one call owns.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable, Sequence

from . import protocol
from .connection import Connection, Frame, remaining_s, timeout_ms_until
from .errors import HiCacheProtocolError, error_from_frame
from .protocol import Bytes, Op

WINDOW_BYTES = 64 << 20
"""Most bytes of answers (GET) or request bodies (PUT) outstanding on a connection at once."""
CHUNK_BYTES = 32 << 20
"""A frame is closed once its answer (GET) or its pages (PUT) reach this many bytes, so two fit in the window."""


def group_pages(pages: Iterable[int], fixed_bytes: int, request_bytes: Callable[[int], int],
                window_bytes: Callable[[int], int], max_frame_bytes: int) -> list[list[int]]:
    """Splits ``pages`` into frames: each frame's request (header, ``fixed_bytes`` of payload, then each page's
    ``request_bytes``) within ``max_frame_bytes`` and its window share within
    :data:`CHUNK_BYTES`, except that a frame always takes at least one page."""
    fixed_bytes += protocol.HEADER_BYTES  # max_frame_bytes counts the header, not the length field
    groups: list[list[int]] = []
    current: list[int] = []
    request_total = fixed_bytes
    window_total = 0
    for page in pages:
        request = request_bytes(page)
        window = window_bytes(page)
        if current and (request_total + request > max_frame_bytes or window_total + window > CHUNK_BYTES):
            groups.append(current)
            current, request_total, window_total = [], fixed_bytes, 0
        current.append(page)
        request_total += request
        window_total += window
    if current:
        groups.append(current)
    return groups


AnswerHandler = Callable[[list[int], Frame], None]
"""Reads one answer's payload (exactly ``frame.payload_length`` bytes) for the given pages."""
ErrorHandler = Callable[[list[int], int, str], None]
"""Handles an ERROR answer (code, message) to the frame of the given pages; may raise."""


def run(conn: Connection, op: Op, groups: list[list[int]],
        build: Callable[[list[int]], tuple[Sequence[Bytes], int]], on_answer: AnswerHandler,
        on_error: ErrorHandler, deadline: float, io_deadline: float, flags: int = 0) -> None:
    """Sends one ``op`` frame per group and handles every answer.

    ``build(pages)`` gives the payload as a list of buffers and the bytes it holds in the window; it is called
    just before the frame is sent. ``deadline`` is sent as each frame's ``timeout_ms`` and bounds the sending;
    reading may go on until ``io_deadline``, a little later, to receive the daemon's own TIMED_OUT answers.
    ``flags`` go in every frame's header.
    """
    outstanding: dict[int, tuple[list[int], int]] = {}
    in_window = 0

    def read_one() -> None:
        nonlocal in_window
        frame = conn.read_frame(io_deadline)
        entry = outstanding.pop(frame.request_id, None)
        if entry is None:
            payload = conn.read_payload(frame, io_deadline) if frame.op == Op.ERROR else None
            if payload is not None and frame.request_id == 0:
                conn.broken = True  # errors about the connection (BUSY, TOO_LARGE) close it
                raise error_from_frame(*protocol.parse_error(payload))
            if payload is None:
                conn.discard(frame.payload_length, io_deadline)
            return  # an answer nobody waits for any more
        pages, window = entry
        in_window -= window
        _handle(conn, op, frame, pages, on_answer, on_error, io_deadline)

    for pages in groups:
        payload, window = build(pages)
        while outstanding and in_window + window > WINDOW_BYTES:
            read_one()
        remaining_s(deadline)
        request_id = conn.new_request_id()
        payload_length = sum(memoryview(b).nbytes for b in payload)
        prefix = protocol.frame_prefix(op, request_id, timeout_ms_until(deadline), payload_length, flags)
        conn.send([prefix, *payload], deadline)  # bytes still unsent at the deadline could not be stored in time
        outstanding[request_id] = (pages, window)
        in_window += window
    while outstanding:
        read_one()


def send_one(conn: Connection, op: Op, payload: Sequence[Bytes], deadline: float, flags: int = 0) -> int:
    """Sends one ``op`` frame without waiting for its answer; returns its request id (for :func:`read_answers`).

    Its answer must not arrive while :func:`run` reads another op's answers on the connection (run drops answers it
    does not wait for): send writes only after every earlier request was sent, whose answers then come first, as
    the daemon runs a connection's writes in order (docs/protocol.md §1). ``reserve_from`` relies on that."""
    remaining_s(deadline)
    request_id = conn.new_request_id()
    payload_length = sum(memoryview(b).nbytes for b in payload)
    conn.send([protocol.frame_prefix(op, request_id, timeout_ms_until(deadline), payload_length, flags), *payload],
              deadline)
    return request_id


def read_answers(conn: Connection, op: Op, waiting: dict[int, list[int]], on_answer: AnswerHandler,
                 on_error: ErrorHandler, io_deadline: float) -> None:
    """Reads the answers to the ``op`` frames sent with :func:`send_one` (request id -> pages), in any order."""
    while waiting:
        frame = conn.read_frame(io_deadline)
        pages = waiting.pop(frame.request_id, None)
        if pages is None:
            payload = conn.read_payload(frame, io_deadline) if frame.op == Op.ERROR else None
            conn.broken = True
            if payload is not None and frame.request_id == 0:
                raise error_from_frame(*protocol.parse_error(payload))  # about the connection (BUSY, TOO_LARGE)
            raise HiCacheProtocolError(f"an answer to request {frame.request_id}, which was not sent")
        _handle(conn, op, frame, pages, on_answer, on_error, io_deadline)


def _handle(conn: Connection, op: Op, frame: Frame, pages: list[int], on_answer: AnswerHandler,
            on_error: ErrorHandler, io_deadline: float) -> None:
    """One answer to an ``op`` frame of ``pages``: an ERROR to ``on_error``, the answer to ``on_answer``."""
    if frame.op == Op.ERROR:
        code, message = protocol.parse_error(conn.read_payload(frame, io_deadline))
        on_error(pages, code, message)
    elif frame.op == op | protocol.ANSWER_FLAG:
        try:
            on_answer(pages, frame)
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            conn.broken = True
            raise HiCacheProtocolError(f"an answer to request 0x{op:x} that does not parse: {e}") from None
    else:
        conn.broken = True
        raise HiCacheProtocolError(f"request 0x{op:x} was answered with op 0x{frame.op:x}")


def exchange(conn: Connection, op: Op, payload: bytes, deadline: float, io_deadline: float) -> bytearray:
    """Sends one request and returns its answer's payload; raises the daemon's ERROR as an exception."""
    answers: list[bytearray] = []

    def on_answer(_pages: list[int], frame: Frame) -> None:
        answers.append(conn.read_payload(frame, io_deadline))

    def on_error(_pages: list[int], code: int, message: str) -> None:
        raise error_from_frame(code, message)

    run(conn, op, [[0]], lambda _pages: ([payload], 0), on_answer, on_error, deadline, io_deadline)
    return answers[0]
