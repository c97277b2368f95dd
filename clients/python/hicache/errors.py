"""Exceptions of the HiCache client. Each carries the protocol's error code when the daemon sent one."""

from __future__ import annotations

from typing import Optional

from .protocol import ErrorCode


class HiCacheError(Exception):
    """Base class of every error the client raises.

    ``code`` is the daemon's :class:`ErrorCode` when the error came in an ERROR frame, else None;
    ``message`` is the daemon's message or the client's explanation.
    """

    def __init__(self, message: str, code: Optional[ErrorCode] = None):
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}" if code is not None else message)


class HiCacheConnectionError(HiCacheError):
    """The daemon could not be reached, or the connection broke during the call."""


class HiCacheTimeoutError(HiCacheError):
    """The call's deadline passed: on the client's side (``code`` None) or the daemon's (``code`` TIMED_OUT)."""


class HiCacheServerError(HiCacheError):
    """The daemon refused the request as a whole with an ERROR frame (``code`` says why)."""


class HiCacheAuthError(HiCacheServerError):
    """The daemon refused the handshake's token (ERROR AUTH)."""


class HiCacheProtocolError(HiCacheError):
    """The daemon's answer does not follow the protocol; the connection is dropped."""


def error_from_frame(code: int, message: str) -> HiCacheError:
    """The exception for an ERROR frame with ``code`` and ``message``."""
    try:
        known = ErrorCode(code)
    except ValueError:
        return HiCacheServerError(f"{message} (error code {code}, not in the protocol)")
    if known == ErrorCode.AUTH:
        return HiCacheAuthError(message, known)
    if known == ErrorCode.TIMED_OUT:
        return HiCacheTimeoutError(message, known)
    return HiCacheServerError(message, known)
