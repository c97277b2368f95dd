"""A bounded pool of daemon connections shared by the client's threads."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator, Optional

from .connection import Connection
from .errors import HiCacheError, HiCacheTimeoutError


class ConnectionPool:
    """At most ``size`` connections, each lent to one call at a time. Thread-safe.

    A call that finds every connection lent waits for one until its deadline. A connection that failed, or
    that a call left in an unknown state (any exception escaping the call), is closed instead of coming back;
    the next call opens a new one.
    """

    def __init__(self, opener: Callable[[float], Connection], size: int):
        if size < 1:
            raise ValueError(f"pool_size must be at least 1, was {size}")
        self._opener = opener
        self._size = size
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False

    @contextlib.contextmanager
    def borrow(self, deadline: float) -> Iterator[Connection]:
        """A connection for the body of a ``with``; opened (handshake included) if none is idle."""
        if self._closed:
            raise HiCacheError("the client is closed")
        if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise HiCacheTimeoutError(f"all {self._size} pooled connections stayed busy until the deadline")
        connection = None
        try:
            connection = self._take_idle()
            if connection is None:
                connection = self._opener(deadline)
            yield connection
        except BaseException:
            if connection is not None:
                connection.broken = True
            raise
        finally:
            if connection is not None:
                self._give_back(connection)
            self._slots.release()

    def _take_idle(self) -> Optional[Connection]:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if not connection.looks_closed():
                return connection
            connection.close()  # the daemon closed it while it was idle (restart, idle timeout)

    def _give_back(self, connection: Connection) -> None:
        with self._lock:
            if not connection.broken and not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Closes the idle connections now, and lent ones when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
