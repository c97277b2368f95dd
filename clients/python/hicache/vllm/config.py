"""The connector's settings (``kv_connector_extra_config``), the engine's identity and namespaces, and page keys.

A page's namespace holds everything besides its tokens that decides its bytes (docs/keys.md): the model id, the
weights' revision, the KV dtype, the page byte order, the page size (vLLM's block size), the TP rank and size, and an
extra key (pipeline stage; weight quantization). vLLM's block hashes cover the tokens of the whole prefix and the
request's extra keys (LoRA adapter, multimodal inputs, cache salt), so a page key is (namespace, block hash).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Mapping, Optional, Sequence

from ..namespace import LAYER_MAJOR, Namespace
from ..protocol import DEFAULT_PORT, HASH_BYTES

DEFAULT_HOST = "127.0.0.1"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_LOOKUP_TIMEOUT_S = 1.0
DEFAULT_RETRY_AFTER_S = 5.0
DEFAULT_POOL_SIZE = 4
DEFAULT_STAGING_BYTES = 1 << 30

OWN_KEYS = ("host", "port", "token", "timeout_s", "lookup_timeout_s", "retry_after_s", "pool_size", "local",
            "model", "weights_revision", "dtype", "quantization", "tenant", "extra", "cluster_etcd", "cluster_name",
            "save_decode_blocks", "staging_bytes")
"""The ``kv_connector_extra_config`` keys this connector reads (docs/vllm.md lists them)."""

# The daemon's canonical dtype names (KvDtype.configName()) and the spellings vLLM and torch use for them.
_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2",
    "fp4_e2m1": "fp4_e2m1",
}

BLOCK_HASH_TAG = b"hicache-vllm-block-hash\x00"
"""Prefix of the SHA-256 that turns a vLLM block hash which is not 32 bytes into a page key (see :func:`page_key`)."""


def canonical_dtype(name: Any) -> Optional[str]:
    """The daemon's name of a KV dtype given as vLLM or torch spell it (``"auto"`` excluded), else None."""
    if name is None:
        return None
    text = str(name).strip().lower()
    if text.startswith("torch."):
        text = text[len("torch."):]
    return _DTYPES.get(text)


def _parse_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"kv_connector_extra_config {key!r} must be true or false, was {value!r}")


def _parse_local(value: Any) -> Optional[bool]:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "auto", "none"):
        return None
    return _parse_bool("local", text)


@dataclasses.dataclass(frozen=True)
class ConnectorSettings:
    """The ``kv_connector_extra_config`` keys of this connector, checked, with their defaults."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Deadline of each load or save (one batch of pages) in the workers."""
    lookup_timeout_s: float = DEFAULT_LOOKUP_TIMEOUT_S
    """Deadline of the scheduler's prefix lookup: the scheduler waits this long at most per request."""
    retry_after_s: float = DEFAULT_RETRY_AFTER_S
    """After a failed lookup, the scheduler answers 0 matched tokens without asking for this long."""
    pool_size: int = DEFAULT_POOL_SIZE
    local: Optional[bool] = None
    model: Optional[str] = None
    weights_revision: Optional[str] = None
    """None: vLLM's ``--revision`` (model_config.revision), or empty when that is unset."""
    dtype: Optional[str] = None
    quantization: str = ""
    tenant: str = ""
    extra: str = ""
    cluster_etcd: tuple[str, ...] = ()
    cluster_name: str = "hicache"
    save_decode_blocks: bool = True
    """Also store blocks filled by generated tokens (a later turn of the conversation hits them), not only the
    prompt's."""
    staging_bytes: int = DEFAULT_STAGING_BYTES
    """Most pinned host memory a worker uses to move pages between a GPU KV cache and the daemon."""
    unknown_keys: tuple[str, ...] = ()

    @classmethod
    def from_extra_config(cls, extra_config: Optional[Mapping[str, Any]]) -> "ConnectorSettings":
        """Reads and checks the keys; raises ValueError naming the key for a bad value."""
        config = dict(extra_config or {})

        def get(key: str, default: Any) -> Any:
            value = config.get(key)
            return default if value is None else value

        def number(key: str, default: float, positive: bool = True) -> float:
            try:
                value = float(get(key, default))
            except (TypeError, ValueError):
                raise ValueError(f"kv_connector_extra_config {key!r} must be a number, was {config.get(key)!r}") \
                    from None
            if positive and not value > 0:
                raise ValueError(f"kv_connector_extra_config {key!r} must be positive, was {value}")
            return value

        def integer(key: str, default: int, low: int, high: int) -> int:
            try:
                value = int(get(key, default))
            except (TypeError, ValueError):
                raise ValueError(f"kv_connector_extra_config {key!r} must be an integer, was {config.get(key)!r}") \
                    from None
            if not low <= value <= high:
                raise ValueError(f"kv_connector_extra_config {key!r} must be in [{low}, {high}], was {value}")
            return value

        def text(key: str, default: str = "") -> str:
            value = get(key, default)
            if not isinstance(value, str):
                raise ValueError(f"kv_connector_extra_config {key!r} must be a string, was {value!r}")
            return value

        host = text("host", DEFAULT_HOST).strip()
        if not host:
            raise ValueError("kv_connector_extra_config 'host' is empty")
        model = config.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"kv_connector_extra_config 'model' must be a non-empty string, was {model!r}")
        revision = config.get("weights_revision")
        if revision is not None and not isinstance(revision, str):
            raise ValueError(f"kv_connector_extra_config 'weights_revision' must be a string, was {revision!r}")
        dtype = config.get("dtype")
        if dtype is not None:
            canonical = canonical_dtype(dtype)
            if canonical is None:
                raise ValueError(f"kv_connector_extra_config 'dtype' {dtype!r} is not a KV dtype the daemon knows; "
                                 f"use one of {', '.join(sorted(set(_DTYPES.values())))}")
            dtype = canonical
        etcd = get("cluster_etcd", "")
        if isinstance(etcd, str):
            etcd = [e.strip() for e in etcd.split(",") if e.strip()]
        if not isinstance(etcd, (list, tuple)) or not all(isinstance(e, str) for e in etcd):
            raise ValueError(f"kv_connector_extra_config 'cluster_etcd' must be endpoints (\"http://h:2379,...\"), "
                             f"was {etcd!r}")
        cluster_name = text("cluster_name", "hicache")
        if not cluster_name:
            raise ValueError("kv_connector_extra_config 'cluster_name' is empty")
        unknown = tuple(sorted(k for k in config if k not in OWN_KEYS))
        return cls(host=host, port=integer("port", DEFAULT_PORT, 1, 65535), token=text("token"),
                   timeout_s=number("timeout_s", DEFAULT_TIMEOUT_S),
                   lookup_timeout_s=number("lookup_timeout_s", DEFAULT_LOOKUP_TIMEOUT_S),
                   retry_after_s=number("retry_after_s", DEFAULT_RETRY_AFTER_S, positive=False),
                   pool_size=integer("pool_size", DEFAULT_POOL_SIZE, 1, 1024), local=_parse_local(config.get("local")),
                   model=model, weights_revision=revision, dtype=dtype, quantization=text("quantization"),
                   tenant=text("tenant"), extra=text("extra"), cluster_etcd=tuple(etcd), cluster_name=cluster_name,
                   save_decode_blocks=_parse_bool("save_decode_blocks", get("save_decode_blocks", True)),
                   staging_bytes=integer("staging_bytes", DEFAULT_STAGING_BYTES, 1 << 20, 1 << 40),
                   unknown_keys=unknown)


def _attr(obj: Any, *path: str, default: Any = None) -> Any:
    for name in path:
        obj = getattr(obj, name, None)
        if obj is None:
            return default
    return obj


@dataclasses.dataclass(frozen=True)
class EngineIdentity:
    """What a vLLM engine's pages depend on besides their tokens, read once from its ``VllmConfig``."""

    model: str
    revision: str
    dtype: str
    block_size: int
    hash_stride: int
    """How many of ``request.block_hashes`` make one block (1 unless vLLM hashes at a finer ``hash_block_size``)."""
    tp_size: int
    pp_size: int
    is_mla: bool
    extra: str
    quantization: str
    tenant: str

    @classmethod
    def from_vllm_config(cls, vllm_config: Any, settings: ConnectorSettings) -> "EngineIdentity":
        """The identity of the engine ``vllm_config`` describes; ValueError if its model or KV dtype is unknown."""
        model_config = getattr(vllm_config, "model_config", None)
        cache_config = getattr(vllm_config, "cache_config", None)
        parallel = getattr(vllm_config, "parallel_config", None)
        model = settings.model or _attr(model_config, "model")
        if not model or not isinstance(model, str):
            raise ValueError("the HiCache vLLM connector needs a model name: vLLM's config has none; set "
                             "kv_connector_extra_config 'model'")
        revision = settings.weights_revision
        if revision is None:
            revision = str(_attr(model_config, "revision", default="") or "")
        dtype = settings.dtype
        if dtype is None:
            cache_dtype = str(_attr(cache_config, "cache_dtype", default="auto") or "auto")
            source = _attr(model_config, "dtype") if cache_dtype == "auto" else cache_dtype
            dtype = canonical_dtype(source)
            if dtype is None:
                raise ValueError(f"the KV cache dtype {source!r} (cache_dtype {cache_dtype!r}) names no format the "
                                 "daemon knows; set kv_connector_extra_config 'dtype'")
        block_size = int(_attr(cache_config, "block_size", default=0) or 0)
        if block_size <= 0:
            raise ValueError("vLLM's cache_config has no block_size")
        hash_block = _attr(cache_config, "hash_block_size") or _attr(cache_config, "prefix_match_unit")
        stride = 1
        if isinstance(hash_block, int) and 0 < hash_block < block_size:
            if block_size % hash_block:
                raise ValueError(f"block_size {block_size} is not a multiple of vLLM's hash block size {hash_block}")
            stride = block_size // hash_block
        tp_size = int(_attr(parallel, "tensor_parallel_size", default=1) or 1)
        pp_size = int(_attr(parallel, "pipeline_parallel_size", default=1) or 1)
        is_mla = bool(_attr(model_config, "use_mla", default=False))
        extra_parts = [settings.extra] if settings.extra else []
        weight_quant = _attr(model_config, "quantization")
        if weight_quant:
            # Quantized weights compute other KV than the model they were quantized from, under the same name.
            extra_parts.append(f"weights-quant={weight_quant}")
        return cls(model=model, revision=revision, dtype=dtype, block_size=block_size, hash_stride=stride,
                   tp_size=tp_size, pp_size=pp_size, is_mla=is_mla, extra="/".join(extra_parts),
                   quantization=settings.quantization, tenant=settings.tenant)

    def namespace(self, tp_rank: int, pp_rank: int) -> Namespace:
        """The namespace of one rank's pages. MLA pages are the same on every TP rank: rank 0 of 1. Each pipeline
        stage holds other layers: ``pp<rank>`` in the extra key."""
        tp_rank, tp_size = (0, 1) if self.is_mla else (tp_rank, self.tp_size)
        extra = self.extra
        if self.pp_size > 1:
            extra = "/".join(p for p in (extra, f"pp{pp_rank}") if p)
        return Namespace(model=self.model, dtype=self.dtype, order=LAYER_MAJOR, tp_rank=tp_rank, tp_size=tp_size,
                         extra=extra, revision=self.revision, quantization=self.quantization,
                         page_tokens=self.block_size, tenant=self.tenant)

    def all_namespaces(self) -> list[Namespace]:
        """Every rank's namespace: a block can be loaded only if every rank holds its page."""
        tp_ranks = [0] if self.is_mla else list(range(self.tp_size))
        return [self.namespace(tp, pp) for pp in range(self.pp_size) for tp in tp_ranks]

    def describe(self, ns: Namespace) -> str:
        return (f"[model={ns.model!r}" + (f", revision={ns.revision!r}" if ns.revision else "")
                + f", dtype={ns.dtype}" + (f", quantization={ns.quantization!r}" if ns.quantization else "")
                + f", page={ns.page_tokens} tokens, tp={ns.tp_rank}/{ns.tp_size}"
                + (f", tenant={ns.tenant!r}" if ns.tenant else "") + (f", extra={ns.extra!r}" if ns.extra else "")
                + "]")


def page_key(block_hash: Any) -> bytes:
    """The daemon's 32-byte page hash for one of vLLM's block hashes.

    vLLM's ``BlockHash`` is ``bytes``: the digest of ``--prefix-caching-hash-algo`` over (parent hash, the block's
    token ids, extra keys), 32 bytes for ``sha256`` and ``sha256_cbor``, which are used as they are. Any other hash
    (the 8 or 16 bytes of the xxhash algorithms, an ``int`` or an object with ``hash_value`` from older vLLM, a
    string) becomes SHA-256 of :data:`BLOCK_HASH_TAG` and its bytes (an int as its decimal text), so no two block
    hashes share a key and no such key can equal a 32-byte hash by accident."""
    value = getattr(block_hash, "hash_value", block_hash)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if len(data) == HASH_BYTES:
            return data
        return hashlib.sha256(BLOCK_HASH_TAG + b"bytes:" + data).digest()
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"a vLLM block hash is bytes, was {type(value).__name__}")
    if isinstance(value, int):
        return hashlib.sha256(BLOCK_HASH_TAG + b"int:" + str(value).encode("ascii")).digest()
    return hashlib.sha256(BLOCK_HASH_TAG + b"str:" + value.encode("utf-8", "surrogatepass")).digest()


def block_keys(block_hashes: Sequence[Any], stride: int, count: Optional[int] = None) -> list[bytes]:
    """The page keys of a request's first blocks: with ``stride`` hashes per block, block ``i``'s key is the key of
    hash ``(i + 1) * stride - 1``, which covers the whole prefix up to the end of block ``i``."""
    full = len(block_hashes) // stride
    if count is not None:
        full = min(full, count)
    return [page_key(block_hashes[(i + 1) * stride - 1]) for i in range(full)]
