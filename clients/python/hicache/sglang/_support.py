"""The backend's counters. Thread-safe. (Logging that does not flood: ``hicache._logs``.)"""

from __future__ import annotations

import collections
import threading
from typing import Any

HISTORY = 4096
"""Per-batch observations kept for ``get_stats`` between two calls (older ones are dropped)."""


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
