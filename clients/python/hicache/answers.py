"""The payloads of the daemon's answers (docs/protocol.md §3), parsed: plain functions, no I/O, no state.

Each function checks what the protocol fixes (counts, lengths) and raises :class:`HiCacheProtocolError` when the
answer does not follow it; ``struct.error`` for a payload cut short and ``ValueError`` for an undefined status
byte come out as they are, and the caller's pipeline turns them into HiCacheProtocolError too. A page's status is
decoded only when asked for (:attr:`GetEntry.status`, the iterator of :func:`page_statuses`), so that the pages of
an answer before an undefined status byte keep theirs, as they are handled in order. Thread-safe.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Iterator

from . import protocol
from .errors import HiCacheProtocolError
from .protocol import Bytes as Payload
from .protocol import HealthState, Status, status_of

_HELD_HEAD = struct.Struct(">QI")  # LEASE and RESERVE answers: id, count
_RELEASED = 1


@dataclasses.dataclass(frozen=True)
class GetEntry:
    """One page's row of a GET answer's table; an ``OK`` page's body of ``length`` bytes follows the table."""

    code: int
    length: int
    crc: int

    @property
    def status(self) -> Status:
        """The page's status; ValueError for a byte the protocol does not define."""
        return status_of(self.code)


@dataclasses.dataclass(frozen=True)
class LeaseEntry:
    """One page's row of a LEASE answer: where the leased page lies in the slab file (when ``OK``)."""

    code: int
    length: int
    crc: int
    offset: int

    @property
    def status(self) -> Status:
        """The page's status; ValueError for a byte the protocol does not define."""
        return status_of(self.code)


@dataclasses.dataclass(frozen=True)
class ReserveEntry:
    """One page's row of a RESERVE answer: where its reserved room lies in the slab file (when ``OK``)."""

    code: int
    offset: int

    @property
    def status(self) -> Status:
        """The page's status; ValueError for a byte the protocol does not define."""
        return status_of(self.code)


def get_table_bytes(pages: int) -> int:
    """Bytes of the head of a GET answer for ``pages`` pages: ``n:u32`` and the table, before the bodies."""
    return 4 + protocol.GET_ENTRY.size * pages


def get_table(head: Payload, pages: int, payload_length: int) -> list[GetEntry]:
    """The table of a GET answer for ``pages`` pages, from its :func:`get_table_bytes` first bytes; checks that
    the table's bodies make up the rest of the ``payload_length`` bytes."""
    (count,) = protocol.U32.unpack_from(head, 0)
    if count != pages:
        raise HiCacheProtocolError(f"a GET of {pages} pages was answered for {count}")
    entries = [GetEntry(*protocol.GET_ENTRY.unpack_from(head, 4 + protocol.GET_ENTRY.size * i))
               for i in range(count)]
    bodies = sum(entry.length for entry in entries if entry.code == Status.OK)
    if len(head) + bodies != payload_length:
        raise HiCacheProtocolError(f"a GET answer of {payload_length} bytes whose table announces "
                                   f"{len(head) + bodies}")
    return entries


def held_id(payload: Payload) -> tuple[int, int]:
    """The lease or reservation id (0: none taken) and the entry count at the head of a LEASE or RESERVE answer,
    to be kept (and released) before :func:`lease_entries` or :func:`reserve_entries` checks the rest."""
    held, count = _HELD_HEAD.unpack_from(payload, 0)
    return held, count


def lease_entries(payload: Payload, pages: int, count: int) -> list[LeaseEntry]:
    """The entries of a LEASE answer for ``pages`` pages, whose head (:func:`held_id`) announced ``count``."""
    if count != pages or len(payload) != _HELD_HEAD.size + protocol.LEASE_ENTRY.size * count:
        raise HiCacheProtocolError(f"a LEASE of {pages} pages was answered with {count} entries in "
                                   f"{len(payload)} bytes")
    return [LeaseEntry(*protocol.LEASE_ENTRY.unpack_from(payload, _HELD_HEAD.size + protocol.LEASE_ENTRY.size * i))
            for i in range(count)]


def reserve_entries(payload: Payload, pages: int, count: int) -> list[ReserveEntry]:
    """The entries of a RESERVE answer for ``pages`` pages, whose head (:func:`held_id`) announced ``count``."""
    if count != pages or len(payload) != _HELD_HEAD.size + protocol.RESERVE_ENTRY.size * count:
        raise HiCacheProtocolError(f"a RESERVE of {pages} pages was answered with {count} entries in "
                                   f"{len(payload)} bytes")
    return [ReserveEntry(*protocol.RESERVE_ENTRY.unpack_from(payload,
                                                             _HELD_HEAD.size + protocol.RESERVE_ENTRY.size * i))
            for i in range(count)]


def page_statuses(payload: Payload, pages: int) -> Iterator[Status]:
    """The statuses of an ``n:u32 status:u8[n]`` answer (PUT, DELETE, COMMIT) for ``pages`` pages, decoded as
    iterated (ValueError at an undefined status byte)."""
    (count,) = protocol.U32.unpack_from(payload, 0)
    if count != pages or len(payload) != 4 + count:
        raise HiCacheProtocolError(f"a request of {pages} pages was answered with {count} statuses in "
                                   f"{len(payload)} bytes")
    return map(status_of, payload[4:])


def released(payload: Payload) -> bool:
    """Whether a RELEASE answer says the lease or reservation was released (``released:u8`` 1); False also for
    an answer that is not one byte."""
    return len(payload) == 1 and payload[0] == _RELEASED


def leading_hits(payload: Payload) -> int:
    """The ``hits:u32`` of a LEADING_HITS answer."""
    (hits,) = protocol.U32.unpack_from(payload, 0)
    return int(hits)


@dataclasses.dataclass(frozen=True)
class PrefixHits:
    """A PREFIX_HITS answer: the longest leading run of the pages the host slab holds, L3 holds, and either holds.

    ``l3_state``: ``"none"`` (no L3 attached), ``"answered"``, ``"late"`` (L3 did not answer before the deadline) or
    ``"failed"``; unless ``"answered"``, ``l3`` is 0 and ``any`` counts the slab alone."""

    slab: int
    l3: int
    any: int
    l3_state: str


_L3_STATES = ("none", "answered", "late", "failed")


def prefix_hits(payload: Payload) -> PrefixHits:
    """A PREFIX_HITS answer (``slab:u32 l3:u32 any:u32 l3_state:u8``)."""
    if len(payload) != 13:
        raise HiCacheProtocolError(f"a PREFIX_HITS answer of {len(payload)} bytes (13 expected)")
    slab, l3, any_tier = struct.unpack_from(">III", payload, 0)
    state = payload[12]
    if state >= len(_L3_STATES):
        raise HiCacheProtocolError(f"a PREFIX_HITS answer with l3_state {state}")
    return PrefixHits(int(slab), int(l3), int(any_tier), _L3_STATES[state])


def stats_text(payload: Payload) -> str:
    """The Prometheus text of a STATS answer (``length:u32 text[length]``)."""
    (length,) = protocol.U32.unpack_from(payload, 0)
    if length != len(payload) - 4:
        raise HiCacheProtocolError(f"a STATS answer announcing {length} bytes of text carries {len(payload) - 4}")
    return bytes(payload[4:]).decode("utf-8")


def health_state(payload: Payload) -> HealthState:
    """The ``state:u8`` of a HEALTH answer; HiCacheProtocolError for another length or a state the protocol does
    not define (0 serving, 1 shutting down)."""
    if len(payload) != 1:
        raise HiCacheProtocolError(f"a HEALTH answer of {len(payload)} bytes")
    try:
        return HealthState(payload[0])
    except ValueError:
        raise HiCacheProtocolError(f"a HEALTH answer with state {payload[0]}, which the protocol does not "
                                   "define (0 serving, 1 shutting down)") from None
