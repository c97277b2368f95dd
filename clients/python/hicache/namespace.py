"""The namespace of a page: everything besides its tokens that decides its bytes (docs/keys.md)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import struct

from .protocol import VERSION_3, encode_string

LAYER_MAJOR = 0
TOKEN_MAJOR = 1
MAX_TEXT_CHARS = 512
MAX_PAGE_TOKENS = 1 << 20
FORMAT_VERSION = 2
"""The key format version of namespaces made here (``io.hicache.core.key.Namespace.FORMAT_VERSION``)."""

# The daemon's (Java's KvDtype) canonical names and the aliases KvDtype.parse accepts, case-insensitively.
_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32",
    "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2",
    "fp4_e2m1": "fp4_e2m1",
}
_ORDER_NAMES = {LAYER_MAJOR: "layer_major", TOKEN_MAJOR: "token_major"}


def _java_chars(text: str) -> int:
    """Length in UTF-16 units, which is how the daemon (Java) counts the characters of a model id."""
    return len(text.encode("utf-16-le")) // 2


@dataclasses.dataclass(frozen=True)
class Namespace:
    """Model and weights revision, KV dtype and quantization, page byte order (0 layer-major, 1 token-major) and page
    size in tokens, TP rank and size, tenant, extra key: the key-identity contract of docs/keys.md.

    Pages of different namespaces never see each other, even with the same hash. ``dtype`` is one of the
    daemon's names (``bfloat16``/``bf16``, ``float16``/``fp16``/``half``, ``float32``/``fp32``,
    ``fp8_e4m3``, ``fp8_e5m2``, ``fp4_e2m1``); the daemon checks it. ``revision`` names the weights (a commit, a
    checkpoint digest): set it, since no engine tells it. ``quantization`` names a KV quantization scheme the dtype
    does not say (scales per token or channel). ``page_tokens`` 0 and empty texts mean "not stated": such a namespace
    shares pages only with namespaces that do not state them either. ``extra`` holds anything else that changes a
    rank's bytes (LoRA adapter, cache salt, pipeline stage). ``format_version`` is the key format (2; 1 names pages an
    older release stored and has none of the newer fields). Immutable, hence thread-safe.
    """

    model: str
    dtype: str = "bfloat16"
    order: int = LAYER_MAJOR
    tp_rank: int = 0
    tp_size: int = 1
    extra: str = ""
    revision: str = ""
    quantization: str = ""
    page_tokens: int = 0
    tenant: str = ""
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not 1 <= _java_chars(self.model) <= MAX_TEXT_CHARS:
            raise ValueError(f"model must be 1 to {MAX_TEXT_CHARS} characters, was {self.model!r}")
        for name in ("extra", "revision", "quantization", "tenant"):
            value = getattr(self, name)
            if not isinstance(value, str) or _java_chars(value) > MAX_TEXT_CHARS:
                raise ValueError(f"{name} must be a string of at most {MAX_TEXT_CHARS} characters, was {value!r}")
        if not isinstance(self.dtype, str) or not self.dtype.strip():
            raise ValueError(f"dtype must name a KV dtype, was {self.dtype!r}")
        if self.order not in (LAYER_MAJOR, TOKEN_MAJOR):
            raise ValueError(f"order must be 0 (layer-major) or 1 (token-major), was {self.order!r}")
        if not 1 <= self.tp_size <= 0xFFFF:
            raise ValueError(f"tp_size must be in [1, 65535], was {self.tp_size}")
        if not 0 <= self.tp_rank < self.tp_size:
            raise ValueError(f"tp_rank must be in [0, tp_size={self.tp_size}), was {self.tp_rank}")
        if not isinstance(self.page_tokens, int) or not 0 <= self.page_tokens <= MAX_PAGE_TOKENS:
            raise ValueError(f"page_tokens must be in [0, {MAX_PAGE_TOKENS}] (0: not stated), was {self.page_tokens!r}")
        if self.format_version not in (1, FORMAT_VERSION):
            raise ValueError(f"format_version must be 1 or {FORMAT_VERSION}, was {self.format_version!r}")
        if self.format_version == 1 and not self._new_fields_unset:
            raise ValueError("key format version 1 has no revision, quantization, page size or tenant")
        self.encode()  # encoded now, once: refuses a dtype the protocol cannot carry

    @property
    def _new_fields_unset(self) -> bool:
        """Whether the fields of key format 2 are all unstated."""
        return not self.revision and not self.quantization and self.page_tokens == 0 and not self.tenant

    @property
    def _neutral(self) -> bool:
        """Whether protocol versions 1 and 2 can carry this namespace: current format, format 2's fields unstated."""
        return self._new_fields_unset and self.format_version == FORMAT_VERSION

    @functools.cached_property
    def _encoded(self) -> bytes:
        """The fields every protocol version writes, computed once (a frozen dataclass does not stop
        ``cached_property``)."""
        return (encode_string(self.model) + encode_string(self.dtype)
                + struct.pack(">BHH", self.order, self.tp_rank, self.tp_size) + encode_string(self.extra))

    @functools.cached_property
    def _encoded_v3(self) -> bytes:
        return (self._encoded + struct.pack(">H", self.format_version) + encode_string(self.revision)
                + encode_string(self.quantization) + struct.pack(">I", self.page_tokens) + encode_string(self.tenant))

    def encode(self, version: int = VERSION_3) -> bytes:
        """The namespace as protocol ``version`` writes it: model, dtype, order:u8, tp_rank:u16, tp_size:u16, extra;
        version 3 adds format:u16, revision, quantization, page_tokens:u32 and tenant. ValueError for a namespace
        that versions 1 and 2 cannot carry (one that states a revision, quantization, page size or tenant)."""
        if version >= VERSION_3:
            return self._encoded_v3
        if not self._neutral:
            raise ValueError(f"the daemon speaks protocol version {version}, which cannot carry a namespace's "
                             f"revision, quantization, page size or tenant: upgrade the daemon")
        return self._encoded

    @functools.cached_property
    def id(self) -> str:
        """32 lowercase hex characters, equal to ``io.hicache.core.key.Namespace.id()`` for the same fields (the
        daemon names files and objects with it): SHA-256 of the length-prefixed fields, cut to 16 bytes. No hash seed
        enters it. ValueError for a dtype the daemon does not know."""
        dtype = _DTYPES.get(self.dtype.strip().lower())
        if dtype is None:
            raise ValueError(f"{self.dtype!r} is not a KV dtype the daemon knows ({', '.join(sorted(set(_DTYPES.values())))})")
        order = _ORDER_NAMES[self.order]
        if self.format_version == 1:
            fields = ["hicache-namespace-v1", self.model, dtype, order, str(self.tp_rank), str(self.tp_size),
                      self.extra]
        else:
            fields = [f"hicache-namespace-v{self.format_version}", self.model, self.revision, dtype, self.quantization,
                      order, str(self.page_tokens), str(self.tp_rank), str(self.tp_size), self.tenant, self.extra]
        digest = hashlib.sha256()
        for field in fields:
            data = field.encode("utf-8")
            digest.update(struct.pack(">H", len(data)) + data)
        return digest.digest()[:16].hex()
