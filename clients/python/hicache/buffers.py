"""Turning the caller's page memory into flat byte views, without copying it.

A page is given as one of:

* a buffer object: ``bytearray``, ``memoryview``, ``mmap``, a ``ctypes`` array, ``array.array``... (C-contiguous);
  for a get it must be writable;
* an ``(address, length)`` tuple of two ints: raw memory, as SGLang's host pool hands out; the caller keeps it
  valid for the call;
* a list (or tuple) of such parts that together form the page, in order (for example its K and V halves).

Stateless and thread-safe; the views returned share the caller's memory.
"""

from __future__ import annotations

import ctypes
from typing import Any


def _is_address(spec: object) -> bool:
    return (isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in spec))


def _view_of_part(part: Any, writable: bool, what: str) -> memoryview:
    if _is_address(part):
        address, length = part
        if address <= 0 or length <= 0:
            raise ValueError(f"{what}: an (address, length) part needs a positive address and length, was {part}")
        view = memoryview((ctypes.c_char * length).from_address(address))
    else:
        try:
            view = memoryview(part)
        except TypeError:
            raise TypeError(f"{what}: {type(part).__name__} is neither a buffer, an (address, length) tuple, "
                            "nor a list of those") from None
    if not view.c_contiguous:
        raise ValueError(f"{what}: the buffer is not C-contiguous; pass a contiguous one or its parts")
    if writable and view.readonly:
        raise ValueError(f"{what}: a get needs a writable buffer; {type(part).__name__} is read-only")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def page_parts(spec: Any, writable: bool, what: str = "page") -> list[memoryview]:
    """The page ``spec`` as a list of flat byte views (one per part, empty parts left out)."""
    if isinstance(spec, (list, tuple)) and not _is_address(spec):
        if not spec:
            raise ValueError(f"{what}: an empty list of parts")
        parts = [_view_of_part(p, writable, f"{what} part {i}") for i, p in enumerate(spec)]
    else:
        parts = [_view_of_part(spec, writable, what)]
    return [p for p in parts if p.nbytes]


def parts_length(parts: list[memoryview]) -> int:
    """Total bytes of ``parts``."""
    return sum(p.nbytes for p in parts)


def copy_into_parts(parts: list[memoryview], source: memoryview) -> None:
    """Copies ``source`` (exactly the parts' total length) into ``parts``, in order."""
    offset = 0
    for part in parts:
        n = part.nbytes
        part[:] = source[offset:offset + n]
        offset += n


def copy_from_parts(parts: list[memoryview], target: memoryview) -> None:
    """Copies ``parts``, in order, into ``target`` (exactly their total length)."""
    offset = 0
    for part in parts:
        n = part.nbytes
        target[offset:offset + n] = part
        offset += n
