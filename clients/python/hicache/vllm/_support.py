"""Logging that does not flood, and the connector's counters. Both thread-safe."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Hashable, Optional

LOG_INTERVAL_S = 10.0
"""At most one message per kind of failure in this many seconds; the next one says how many were left out."""


class RateLimitedLog:
    """Logs a message of a given kind at most once every :data:`LOG_INTERVAL_S`, counting the ones left out."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._lock = threading.Lock()
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


class Counters:
    """Cumulative counters: lookups, blocks offered, loaded, failed to load, saved..."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                if amount:
                    self._counts[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
