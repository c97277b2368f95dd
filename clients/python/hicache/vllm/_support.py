"""The connector's counters. Thread-safe. (Logging that does not flood: ``hicache._logs``.)"""

from __future__ import annotations

import collections
import threading


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
