"""Python client of the HiCache daemon (wire protocol HCWP, docs/protocol.md). Standard library only."""

from typing import Any

from .checksums import crc32c
from .answers import PrefixHits
from .client import HiCacheClient, tls_context
from .errors import (HiCacheAuthError, HiCacheConnectionError, HiCacheError, HiCacheProtocolError,
                     HiCacheServerError, HiCacheTimeoutError)
from .namespace import LAYER_MAJOR, TOKEN_MAJOR, Namespace
from .protocol import ErrorCode, HealthState, Status

__all__ = [
    "HiCacheClient", "Namespace", "Status", "ErrorCode", "HealthState", "LAYER_MAJOR", "TOKEN_MAJOR",
    "HiCacheError", "HiCacheConnectionError", "HiCacheTimeoutError", "HiCacheServerError", "HiCacheAuthError",
    "HiCacheProtocolError", "page_hashes", "get_hash_str", "crc32c", "PrefixHits", "tls_context",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # hicache.hashing is loaded on first use, not here: `python3 -m hicache.hashing` must find it unloaded.
    if name in ("page_hashes", "get_hash_str"):
        from . import hashing
        return getattr(hashing, name)
    raise AttributeError(f"module 'hicache' has no attribute {name!r}")
