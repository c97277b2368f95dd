"""Same-host access to the daemon's host slab file (the ``slab_path`` of HELLO), mapped with ``mmap``.

Reads go through a read-only mapping; writes (RESERVE/COMMIT) through a read-write one, made on first use if
the file may be opened for writing. The mappings are shared by the client's threads: they only read or write
disjoint ranges that the daemon lent to one call, so no lock is needed past construction.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import Optional


def file_identity(path: str) -> Optional[tuple[int, int]]:
    """(device, inode) of ``path``, or None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux; elsewhere pages fault in as they are touched


class SlabMapping:
    """The slab file mapped read-only, plus a read-write mapping made on demand. Thread-safe."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            self.identity = (st.st_dev, st.st_ino)
            # MAP_POPULATE: the page tables for the whole file at once (about 40 ms a GiB, 2 MiB of tables a GiB);
            # faulted in page by page, a first copy from or to a region ran at a quarter of a memory copy's speed.
            self._read_map = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)
        self.size = len(self._read_map)
        self.read_view = memoryview(self._read_map).toreadonly()  # mapped PROT_READ: a write would be SIGSEGV
        self._lock = threading.Lock()
        self._write_map: Optional[mmap.mmap] = None
        self._write_view: Optional[memoryview] = None
        self.write_error: Optional[str] = None

    def write_view(self) -> Optional[memoryview]:
        """A read-write view of the whole file, or None if the file cannot be opened for writing (see write_error)."""
        with self._lock:
            if self._write_view is None and self.write_error is None:
                try:
                    with open(self.path, "r+b") as f:
                        self._write_map = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | _POPULATE,
                                                    prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    self._write_view = memoryview(self._write_map)
                except (OSError, ValueError) as e:
                    self.write_error = f"cannot map {self.path} for writing: {e}"
            return self._write_view

    def contains(self, offset: int, length: int) -> bool:
        return 0 <= offset and offset + length <= self.size

    def close(self) -> None:
        """Unmaps the file; a view still held elsewhere keeps its mapping alive until it is released."""
        for view, mapping in ((self.read_view, self._read_map), (self._write_view, self._write_map)):
            try:
                if view is not None:
                    view.release()
                if mapping is not None:
                    mapping.close()
            except BufferError:
                pass  # a slice of it is still alive somewhere; the mapping goes with the last one
