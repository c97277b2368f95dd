"""Logging that does not flood: one message per kind of failure per interval. Thread-safe. Shared by the SGLang
backend and the vLLM connector."""

from __future__ import annotations

import logging
import threading
import time
from typing import Hashable, Optional

LOG_INTERVAL_S = 10.0
"""At most one message per kind of failure in this many seconds; the next one says how many were left out."""


class RateLimitedLog:
    """Logs a message of a given kind at most once every :data:`LOG_INTERVAL_S`, counting the ones left out."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S):
        self._logger = logger
        self._interval_s = interval_s
        self._lock = threading.Lock()
        # kind -> (monotonic time of the last message, messages left out since)
        self._last: dict[Hashable, tuple[Optional[float], int]] = {}

    def log(self, level: int, kind: Hashable, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            last, skipped = self._last.get(kind, (None, 0))
            if last is not None and now - last < self._interval_s:
                self._last[kind] = (last, skipped + 1)
                return
            self._last[kind] = (now, 0)
        if skipped:
            message += " (%d similar messages left out in the last %.0f s)"
            args = (*args, skipped, self._interval_s)
        self._logger.log(level, message, *args)

    def warning(self, kind: Hashable, message: str, *args: object) -> None:
        self.log(logging.WARNING, kind, message, *args)

    def error(self, kind: Hashable, message: str, *args: object) -> None:
        self.log(logging.ERROR, kind, message, *args)
