"""Helpers shared by the tests that talk to a daemon."""

from __future__ import annotations

import ctypes
import os
import re
import unittest

from hicache import Namespace

from .daemon_process import DaemonProcess


def random_pages(*sizes: int) -> list[bytes]:
    return [os.urandom(size) for size in sizes]


def random_hashes(count: int) -> list[bytes]:
    return [os.urandom(32) for _ in range(count)]


def namespace_for(test: unittest.TestCase, **fields) -> Namespace:
    """A namespace of its own for each test, so that tests do not see each other's pages."""
    return Namespace(model=test.id().rsplit(".", 1)[-1][:500], **fields)


def ctypes_buffer(data_or_size) -> ctypes.Array:
    """Memory outside Python's objects, as an engine's host pool would hand out (by address)."""
    if isinstance(data_or_size, int):
        return (ctypes.c_char * data_or_size)()
    buffer = (ctypes.c_char * len(data_or_size))()
    ctypes.memmove(buffer, data_or_size, len(data_or_size))
    return buffer


def address_of(buffer: ctypes.Array) -> tuple[int, int]:
    return ctypes.addressof(buffer), ctypes.sizeof(buffer)


def request_count(stats: str, op: str) -> int:
    """How many requests of ``op`` the daemon served, from its STATS text."""
    match = re.search(r'^hicache_server_request_seconds_count\{op="%s"\} (\S+)$' % re.escape(op), stats, re.M)
    return int(float(match.group(1))) if match else 0


class DaemonModule:
    """setUpModule/tearDownModule for a module with one daemon: ``module = DaemonModule(); setUpModule = ...``."""

    def __init__(self, *args: str, token: str = ""):
        self.args = args
        self.token = token
        self.daemon: DaemonProcess | None = None

    def set_up(self) -> None:
        self.daemon = DaemonProcess(*self.args, token=self.token).start()

    def tear_down(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()

    @property
    def port(self) -> int:
        return self.daemon.port
