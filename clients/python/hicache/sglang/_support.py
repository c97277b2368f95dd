"""Logging that does not flood, and the backend's counters. Both thread-safe."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Hashable, Optional

LOG_INTERVAL_S = 10.0
"""At most one message per kind of failure in this many seconds; the next one says how many were left out."""
HISTORY = 4096
"""Per-batch observations kept for ``get_stats`` between two calls (older ones are dropped)."""


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


class Counters:
    """Cumulative counters (pages, calls, failures) and per-batch observations for SGLang's metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._prefetch_pgs: collections.deque[int] = collections.deque(maxlen=HISTORY)
        self._backup_pgs: collections.deque[int] = collections.deque(maxlen=HISTORY)
        self._prefetch_bandwidth: collections.deque[float] = collections.deque(maxlen=HISTORY)
        self._backup_bandwidth: collections.deque[float] = collections.deque(maxlen=HISTORY)

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                if amount:
                    self._counts[name] += amount

    def observe_prefetch(self, pages: int, nbytes: int, seconds: float) -> None:
        with self._lock:
            self._prefetch_pgs.append(pages)
            if nbytes and seconds > 0:
                self._prefetch_bandwidth.append(nbytes / seconds / 1e9)

    def observe_backup(self, pages: int, nbytes: int, seconds: float) -> None:
        with self._lock:
            self._backup_pgs.append(pages)
            if nbytes and seconds > 0:
                self._backup_bandwidth.append(nbytes / seconds / 1e9)

    def snapshot(self) -> dict[str, int]:
        """The cumulative counters."""
        with self._lock:
            return dict(self._counts)

    def drain_into(self, metrics: Any) -> None:
        """Moves the per-batch observations into a ``StorageMetrics`` (its four lists) and empties them."""
        with self._lock:
            metrics.prefetch_pgs.extend(self._prefetch_pgs)
            metrics.backup_pgs.extend(self._backup_pgs)
            metrics.prefetch_bandwidth.extend(self._prefetch_bandwidth)
            metrics.backup_bandwidth.extend(self._backup_bandwidth)
            self._prefetch_pgs.clear()
            self._backup_pgs.clear()
            self._prefetch_bandwidth.clear()
            self._backup_bandwidth.clear()
