"""The namespace of a page: everything besides its tokens that decides its bytes."""

from __future__ import annotations

import dataclasses
import functools
import struct

from .protocol import encode_string

LAYER_MAJOR = 0
TOKEN_MAJOR = 1
MAX_TEXT_CHARS = 512


def _java_chars(text: str) -> int:
    """Length in UTF-16 units, which is how the daemon (Java) counts the characters of a model id."""
    return len(text.encode("utf-16-le")) // 2


@dataclasses.dataclass(frozen=True)
class Namespace:
    """Model, KV dtype, page byte order (0 layer-major, 1 token-major), TP rank and size, extra key.

    Pages of different namespaces never see each other, even with the same hash. ``dtype`` is one of the
    daemon's names (``bfloat16``/``bf16``, ``float16``/``fp16``/``half``, ``float32``/``fp32``,
    ``fp8_e4m3``, ``fp8_e5m2``, ``fp4_e2m1``); the daemon checks it. ``extra`` holds anything else that changes
    a rank's bytes (LoRA adapter, cache salt, pipeline stage). Immutable, hence thread-safe.
    """

    model: str
    dtype: str = "bfloat16"
    order: int = LAYER_MAJOR
    tp_rank: int = 0
    tp_size: int = 1
    extra: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not 1 <= _java_chars(self.model) <= MAX_TEXT_CHARS:
            raise ValueError(f"model must be 1 to {MAX_TEXT_CHARS} characters, was {self.model!r}")
        if not isinstance(self.extra, str) or _java_chars(self.extra) > MAX_TEXT_CHARS:
            raise ValueError(f"extra must be at most {MAX_TEXT_CHARS} characters")
        if not isinstance(self.dtype, str) or not self.dtype.strip():
            raise ValueError(f"dtype must name a KV dtype, was {self.dtype!r}")
        if self.order not in (LAYER_MAJOR, TOKEN_MAJOR):
            raise ValueError(f"order must be 0 (layer-major) or 1 (token-major), was {self.order!r}")
        if not 1 <= self.tp_size <= 0xFFFF:
            raise ValueError(f"tp_size must be in [1, 65535], was {self.tp_size}")
        if not 0 <= self.tp_rank < self.tp_size:
            raise ValueError(f"tp_rank must be in [0, tp_size={self.tp_size}), was {self.tp_rank}")
        self.encode()  # encoded now, once: refuses a dtype the protocol cannot carry

    @functools.cached_property
    def _encoded(self) -> bytes:
        """What :meth:`encode` returns, computed once (a frozen dataclass does not stop ``cached_property``)."""
        return (encode_string(self.model) + encode_string(self.dtype)
                + struct.pack(">BHH", self.order, self.tp_rank, self.tp_size) + encode_string(self.extra))

    def encode(self) -> bytes:
        """The namespace as the protocol writes it: model, dtype, order:u8, tp_rank:u16, tp_size:u16, extra."""
        return self._encoded
