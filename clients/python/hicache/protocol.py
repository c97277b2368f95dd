"""The HiCache wire protocol (HCWP) versions 1 to 3, as docs/protocol.md defines it: constants and encoding.

Every integer is big-endian. Every message is one frame::

    frame  = length:u32  header  payload              length counts header and payload
    header = op:u8  flags:u8  reserved:u16  request_id:u64  timeout_ms:u32      (16 bytes)

This module only builds and parses bytes; it does no I/O and keeps no state, so it is thread-safe.
"""

from __future__ import annotations

import enum
import struct
from typing import Union

from .checksums import CHECKSUM_CRC32, CHECKSUM_CRC32C, crc32c  # noqa: F401  (re-exported)

Bytes = Union[bytes, bytearray, memoryview]
"""The bytes of a frame or of a part of one, as built for sending or read from the socket."""

MAGIC = 0x48435750
"""The first field of HELLO: "HCWP"."""
VERSION_1 = 1
VERSION_2 = 2
VERSION_3 = 3  # version 2 with whole namespaces (docs/keys.md)
HASH_BYTES = 32
MAX_STRING_BYTES = 2048
DEFAULT_PORT = 7370

FRAME_PREFIX = struct.Struct(">IBBHQI")
"""length:u32, then the 16-byte header: op, flags, reserved, request_id, timeout_ms."""
HEADER_BYTES = 16
LEASE_NO_CHECKSUMS = 0x01
"""Version 2 header flag of LEASE: the answer's checksums are 0 and the daemon computes none (docs/protocol.md §3)."""
COMMIT_NO_CHECKSUMS = 0x01
"""Version 2 header flag of COMMIT: the client sends no checksums; the daemon takes them from the slab (§3)."""
PREFIX_BYTES = FRAME_PREFIX.size  # 20: the length field and the header
NO_OFFSET = 0xFFFFFFFFFFFFFFFF
"""LEASE and RESERVE answer this offset for pages that are not OK."""

U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
U64 = struct.Struct(">Q")
GET_ENTRY = struct.Struct(">BII")  # status, length, crc
LEASE_ENTRY = struct.Struct(">BIIQ")  # status, length, crc, offset
RESERVE_ENTRY = struct.Struct(">BQ")  # status, offset
ANSWER_FLAG = 0x80


class Op(enum.IntEnum):
    """Request op codes; an answer carries ``op | 0x80``, or ERROR."""

    HELLO = 0x01
    LEADING_HITS = 0x10
    GET = 0x11
    PUT = 0x12
    DELETE = 0x13
    CLEAR = 0x14
    CLEAR_ALL = 0x15
    STATS = 0x16
    HEALTH = 0x17
    LEASE = 0x18
    RELEASE = 0x19
    RESERVE = 0x1A  # version 2
    COMMIT = 0x1B  # version 2
    FLUSH = 0x1C
    STORE = 0x1D
    PREFIX_HITS = 0x1E  # version 3
    RETAIN = 0x1F  # version 3
    ERROR = 0xFF


class ErrorCode(enum.IntEnum):
    """The ``code`` of an ERROR frame (docs/protocol.md §4)."""

    MALFORMED = 1
    VERSION = 2
    AUTH = 3
    UNKNOWN_OP = 4
    TOO_LARGE = 5
    BUSY = 6
    SHUTTING_DOWN = 7
    INTERNAL = 8
    TIMED_OUT = 9


class Status(enum.IntEnum):
    """A page's status in batched answers (docs/protocol.md §1, "Page statuses")."""

    OK = 0
    """Stored (PUT, COMMIT), delivered (GET), removed from every tier (DELETE)."""
    EXISTS = 1
    """PUT: the page was already stored; nothing written."""
    MISS = 2
    """Not stored in any tier."""
    CORRUPT = 3
    """The bytes failed their checksum (in the daemon's L3, or on arrival here); the target is undefined."""
    SIZE_MISMATCH = 4
    """GET: stored with another length than the target's."""
    REJECTED = 5
    """PUT: over max_page_bytes, or no room could be made."""
    TIMED_OUT = 6
    """The call's deadline passed first."""
    CANCELLED = 7
    """The daemon stopped the work."""
    FAILED = 8
    """PUT: the body did not match its checksum; the L3 store failed; or the connection to the daemon was lost."""


class HealthState(enum.IntEnum):
    """The answer of HEALTH."""

    SERVING = 0
    SHUTTING_DOWN = 1


def frame_prefix(op: int, request_id: int, timeout_ms: int, payload_length: int, flags: int = 0) -> bytes:
    """The length field and header of a frame whose payload is ``payload_length`` bytes."""
    return FRAME_PREFIX.pack(HEADER_BYTES + payload_length, op, flags, 0, request_id, min(timeout_ms, 0xFFFFFFFF))


def encode_string(text: str) -> bytes:
    """``length:u16`` then the UTF-8 bytes; refuses texts over 2048 bytes, which the daemon would refuse."""
    data = text.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise ValueError(f"a protocol string is at most {MAX_STRING_BYTES} bytes of UTF-8; this one is {len(data)}")
    return U16.pack(len(data)) + data


def decode_string(payload: Bytes, offset: int) -> tuple[str, int]:
    """The string at ``payload[offset:]`` and the offset after it; ValueError if cut short or not UTF-8."""
    (length,) = U16.unpack_from(payload, offset)
    end = offset + 2 + length
    if end > len(payload):
        raise ValueError(f"a string of {length} bytes runs past the end of its frame")
    return bytes(payload[offset + 2:end]).decode("utf-8"), end


def hello_payload(version: int, token: str, checksum: int) -> bytes:
    """HELLO: magic, version, token, and (version 2 only) the checksum kind wanted."""
    payload = U32.pack(MAGIC) + U16.pack(version) + encode_string(token)
    if version >= VERSION_2:
        payload += U8.pack(checksum)
    return payload


class HelloAnswer:
    """What the daemon said in its HELLO answer. Immutable."""

    __slots__ = ("version", "max_frame_bytes", "max_page_bytes", "slab_path", "checksum")

    def __init__(self, version: int, max_frame_bytes: int, max_page_bytes: int, slab_path: str, checksum: int):
        self.version = version
        self.max_frame_bytes = max_frame_bytes
        self.max_page_bytes = max_page_bytes
        self.slab_path = slab_path
        self.checksum = checksum

    def __repr__(self) -> str:
        return (f"HelloAnswer(version={self.version}, max_frame_bytes={self.max_frame_bytes}, "
                f"max_page_bytes={self.max_page_bytes}, slab_path={self.slab_path!r}, checksum={self.checksum})")


def parse_hello_answer(payload: Bytes, requested_version: int) -> HelloAnswer:
    """Parses a HELLO answer; ValueError if it does not have the fields of ``requested_version``."""
    (version,) = U16.unpack_from(payload, 0)
    max_frame, max_page = struct.unpack_from(">II", payload, 2)
    slab_path, offset = decode_string(payload, 10)
    checksum = CHECKSUM_CRC32C
    if version >= VERSION_2:
        if offset + 1 > len(payload):
            raise ValueError("a version 2 HELLO answer without its checksum byte")
        (checksum,) = U8.unpack_from(payload, offset)
        offset += 1
    if version != requested_version:
        raise ValueError(f"asked for protocol version {requested_version}, the daemon answered {version}")
    if offset != len(payload):
        raise ValueError(f"{len(payload) - offset} bytes after the end of the HELLO answer")
    return HelloAnswer(version, max_frame, max_page, slab_path, checksum)


def parse_error(payload: Bytes) -> tuple[int, str]:
    """The ``code`` and ``message`` of an ERROR payload (a message cut short is kept as far as it goes)."""
    if len(payload) < 2:
        return 0, "an ERROR frame without a code"
    (code,) = U16.unpack_from(payload, 0)
    try:
        message, _ = decode_string(payload, 2)
    except (ValueError, struct.error):
        message = bytes(payload[4:]).decode("utf-8", "replace")
    return code, message


def status_of(code: int) -> Status:
    """The :class:`Status` of a status byte; ValueError for a byte the protocol does not define."""
    try:
        return Status(code)
    except ValueError:
        raise ValueError(f"page status {code} is not defined by the protocol") from None
