"""SGLang's page-hash chain (``get_hash_str``), as HiCache's Java ``PageHasher`` computes it.

::

    hash(page i) = SHA-256( hash(page i-1) as its 32 raw bytes    -- absent for the first page
                            || token[0] || token[1] || ...)        -- each token as 4-byte little-endian unsigned

SGLang chains from ``bytes.fromhex(prior_hex)``, i.e. the raw 32 bytes, and so does Java (``PageHash.writeTo``);
so do :func:`page_hashes` and :func:`get_hash_str` here. Only whole pages are hashed. Token ids are unsigned
32-bit; a negative id in [-2^31, 0) is taken as its two's-complement bit pattern, as Java passes ids of 2^31 and
more in an ``int``. Pure functions, thread-safe.

Run as ``python3 -m hicache.hashing``: reads JSON lines ``{"page_size": N, "tokens": [...]}`` (optionally
``"prior": "<64 hex>"``) on stdin and prints, per line, the page hashes in hex, comma-separated (an empty line when
there is no whole page; ``ERROR <why>`` for a line that cannot be hashed).
"""

from __future__ import annotations

import array
import hashlib
import json
import sys
from typing import Iterable, Optional, Sequence, TextIO, Union

HASH_BYTES = 32
_U32 = "I" if array.array("I").itemsize == 4 else "L"


def _token_bytes(tokens: Sequence[int]) -> memoryview:
    """The tokens as consecutive 4-byte little-endian unsigned integers."""
    try:
        packed = array.array(_U32, tokens)
    except (OverflowError, TypeError):
        for i, t in enumerate(tokens):
            if not isinstance(t, int) or isinstance(t, bool) or not -(1 << 31) <= t < (1 << 32):
                raise ValueError(f"token {i} is {t!r}, not an unsigned 32-bit id (or a negative int32)") from None
        packed = array.array(_U32, (t & 0xFFFFFFFF for t in tokens))
    if sys.byteorder != "little":
        packed.byteswap()
    return memoryview(packed).cast("B")


def _prior_bytes(prior: Union[bytes, bytearray, str, None]) -> Optional[bytes]:
    if prior is None:
        return None
    data = bytes.fromhex(prior) if isinstance(prior, str) else bytes(prior)
    if len(data) != HASH_BYTES:
        raise ValueError(f"a prior hash is {HASH_BYTES} bytes (64 hex characters); this one is {len(data)} bytes")
    return data


def page_hashes(tokens: Sequence[int], page_size: int, prior: Union[bytes, str, None] = None) -> list[bytes]:
    """The 32-byte hashes of the whole pages of ``tokens``, the first chained from ``prior`` (raw or hex) if given."""
    if not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"page_size must be a positive int, was {page_size!r}")
    chained = _prior_bytes(prior)
    pages = len(tokens) // page_size
    data = _token_bytes(tokens[:pages * page_size])
    page_bytes = 4 * page_size
    hashes = []
    for p in range(pages):
        digest = hashlib.sha256()
        if chained is not None:
            digest.update(chained)
        digest.update(data[p * page_bytes:(p + 1) * page_bytes])
        chained = digest.digest()
        hashes.append(chained)
    return hashes


def get_hash_str(token_ids: Sequence[int], prior_hash: Optional[str] = None) -> str:
    """SGLang's ``get_hash_str``: the hex SHA-256 of ``bytes.fromhex(prior_hash)`` (if any) and the tokens."""
    (digest,) = page_hashes(token_ids, len(token_ids), prior_hash) if token_ids else [_empty_page(prior_hash)]
    return digest.hex()


def _empty_page(prior_hash: Optional[str]) -> bytes:
    digest = hashlib.sha256()
    prior = _prior_bytes(prior_hash)
    if prior is not None:
        digest.update(prior)
    return digest.digest()


def main(stdin: Optional[Iterable[str]] = None, stdout: Optional[TextIO] = None) -> int:
    """The command line: one JSON object in, one line of comma-separated hex hashes out, per line."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    failed = False
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            hashes = page_hashes(request["tokens"], request["page_size"], request.get("prior"))
            stdout.write(",".join(h.hex() for h in hashes) + "\n")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            failed = True
            stdout.write(f"ERROR {type(e).__name__}: {e}\n")
        stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
