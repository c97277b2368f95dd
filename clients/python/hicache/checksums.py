"""Page checksums of the wire protocol: CRC-32 (zlib, C speed) and CRC-32C (pure Python, slow).

A version 2 connection agrees on CRC-32 (checksum kind 1), which Python computes in C through ``zlib.crc32``.
A version 1 connection must use CRC-32C (Castagnoli), which the standard library does not have, so
:func:`crc32c` is written here in pure Python. Both functions are pure and thread-safe.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import zlib
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

CHECKSUM_CRC32C = 0
"""Checksum kind 0 of HELLO version 2: CRC-32C (Castagnoli); the only one of version 1."""
CHECKSUM_CRC32 = 1
"""Checksum kind 1 of HELLO version 2: CRC-32 (ISO-HDLC), as zlib computes it."""

_CRC32C_POLY_REFLECTED = 0x82F63B78


def _crc32c_tables() -> tuple[tuple[int, ...], ...]:
    """Eight 256-entry tables for slicing-by-8: table k advances a byte that is k bytes further from the end."""
    first = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (_CRC32C_POLY_REFLECTED if c & 1 else 0)
        first.append(c)
    tables = [first]
    for _ in range(1, 8):
        previous = tables[-1]
        tables.append([(previous[i] >> 8) ^ first[previous[i] & 0xFF] for i in range(256)])
    return tuple(tuple(t) for t in tables)


_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _crc32c_tables()


def crc32c(data: ReadableBuffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of ``data``, continuing from ``crc``.

    Table-driven (slicing-by-8) pure Python: correct but slow, some 10 to 30 MB/s, against gigabytes per second
    for ``zlib.crc32``. It is used only on version 1 connections, where the protocol leaves no other choice.
    ``data`` is any C-contiguous buffer. ``crc32c(b, crc32c(a)) == crc32c(a + b)``, and
    ``crc32c(b"123456789") == 0xE3069283`` (the standard check value).
    """
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    with view:
        crc ^= 0xFFFFFFFF
        whole = len(view) & ~7
        if whole and sys.byteorder == "little":
            t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
            with view[:whole] as head, head.cast("Q") as words:
                for word in words:
                    x = crc ^ word
                    crc = (t7[x & 0xFF] ^ t6[(x >> 8) & 0xFF] ^ t5[(x >> 16) & 0xFF] ^ t4[(x >> 24) & 0xFF]
                           ^ t3[(x >> 32) & 0xFF] ^ t2[(x >> 40) & 0xFF] ^ t1[(x >> 48) & 0xFF] ^ t0[x >> 56])
        else:
            whole = 0
        t0 = _T0
        with view[whole:] as tail:
            for byte in tail:
                crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def crc32(data: ReadableBuffer, crc: int = 0) -> int:
    """CRC-32 (ISO-HDLC) of ``data``, continuing from ``crc``: ``zlib.crc32``, at C speed."""
    return zlib.crc32(data, crc)


def checksum_function(kind: int) -> Callable[[ReadableBuffer, int], int]:
    """The function ``f(data, crc=0) -> int`` of checksum ``kind`` (:data:`CHECKSUM_CRC32C` or :data:`CHECKSUM_CRC32`)."""
    if kind == CHECKSUM_CRC32:
        return zlib.crc32
    if kind == CHECKSUM_CRC32C:
        return crc32c
    raise ValueError(f"unknown checksum kind {kind} (0: CRC-32C, 1: CRC-32)")


PARALLEL_MIN_BYTES = 4 << 20
"""Pages at least this big have their checksums taken on :func:`checksum_threads` (zlib releases the GIL for them).
Below it a thread's hand-off costs more than it saves: on 2 cores, TCP gets of 1 MiB pages ran at 1.23 GB/s with
threads and 1.40 inline, of 8 MiB pages at 1.22 with threads and 1.04 inline."""
_THREADS_LOCK = threading.Lock()
_THREADS: Optional[concurrent.futures.ThreadPoolExecutor] = None


def checksum_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The process's checksum threads (``hicache-checksum-N``; up to 8, or the CPU count): a CRC-32 of a large page
    runs at less than a memory copy's speed on one core (5.4 against 7.0 GB/s for 8 MiB on the Intel development
    machine), so a batch's pages are summed side by side, and a GET's while the next page arrives. Made on first
    use; Python joins them at exit. Thread-safe."""
    global _THREADS
    with _THREADS_LOCK:
        if _THREADS is None:
            _THREADS = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                                                             thread_name_prefix="hicache-checksum")
        return _THREADS


def checksum_later(kind: int, parts: Sequence[memoryview]) -> "concurrent.futures.Future[int]":
    """:func:`checksum_of_parts` of a page, on :func:`checksum_threads` when it is large, else at once."""
    if sum(part.nbytes for part in parts) < PARALLEL_MIN_BYTES or kind != CHECKSUM_CRC32:
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        done.set_result(checksum_of_parts(kind, parts))
        return done
    return checksum_threads().submit(checksum_of_parts, kind, parts)


def checksum_of_parts(kind: int, parts: Iterable[ReadableBuffer]) -> int:
    """The checksum of the concatenation of ``parts`` (buffers), without joining them."""
    function = checksum_function(kind)
    crc = 0
    for part in parts:
        crc = function(part, crc)
    return crc
