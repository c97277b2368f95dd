"""The backend's settings (SGLang's ``--hicache-storage-backend-extra-config``) and the page namespace.

A page's namespace decides which engines share it: the daemon keeps pages of different namespaces apart even with
the same hash. The namespace is built here exactly as a Java engine names the same pages with
``io.hicache.core.key.Namespace``: model id, KV dtype (its canonical name, ``KvDtype.configName()``), page byte
order (``PageByteOrder``: 0 layer-major, 1 token-major), TP rank and size (0 of 1 for MLA, whose KV is the same on
every rank) and the extra key, to which pipeline and context-parallel ranks are appended (``pp1``, ``cp0``) as
``docs/architecture.md`` asks ("give each one its own extra key").
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Mapping, Optional

from ..namespace import LAYER_MAJOR, TOKEN_MAJOR, Namespace
from ..protocol import DEFAULT_PORT

DEFAULT_HOST = "127.0.0.1"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_POOL_SIZE = 4
DEFAULT_DTYPE = "bfloat16"

OWN_KEYS = ("host", "port", "token", "timeout_s", "pool_size", "local", "model", "dtype", "extra", "cluster_etcd",
            "cluster_name", "weights_revision", "quantization", "tenant", "tls", "tls_ca", "tls_cert", "tls_key",
            "retention_priority", "retention_s")
"""The extra_config keys this backend reads."""
SGLANG_KEYS = frozenset({
    # the dynamic backend's own keys
    "backend_name", "module_path", "class_name", "interface_v1",
    # HiRadixCache's keys (popped by recent SGLang, passed through by older ones)
    "prefetch_threshold", "prefetch_timeout_base", "prefetch_timeout_per_ki_token", "prefetch_timeout_max",
    "hicache_storage_pass_prefix_keys",
})
"""extra_config keys that belong to SGLang: accepted silently."""

# Canonical names are the daemon's and Java's (KvDtype.configName()); aliases as KvDtype.parse and torch spell them.
_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
    "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2",
    "fp4_e2m1": "fp4_e2m1", "float4_e2m1fn_x2": "fp4_e2m1",
}

# Layout (SGLang's --hicache-mem-layout) -> page byte order, as io.hicache.core.page.HostLayout maps them.
LAYOUT_ORDERS = {
    "layer_first": LAYER_MAJOR,  # flat page [part][layer][token]
    "page_first": TOKEN_MAJOR,  # flat page [part][token][layer]
    "page_first_direct": LAYER_MAJOR,  # flat page [part][layer][token]
}


def canonical_dtype(name: Any) -> Optional[str]:
    """The daemon's name of a KV dtype given as a name (``bf16``, ``fp8_e4m3``) or a torch dtype
    (``torch.bfloat16``); None if it names no KV dtype the daemon knows (``uint8``: SGLang's storage dtype for
    fp8 caches, which says nothing about the format)."""
    if name is None:
        return None
    text = str(name).strip().lower()
    if text.startswith("torch."):
        text = text[len("torch."):]
    return _DTYPES.get(text)


def _parse_local(value: Any) -> Optional[bool]:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "auto", "none"):
        return None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"extra_config 'local' must be true, false or \"auto\", was {value!r}")


@dataclasses.dataclass(frozen=True)
class BackendSettings:
    """The extra_config keys of this backend, checked, with their defaults."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    pool_size: int = DEFAULT_POOL_SIZE
    local: Optional[bool] = None
    model: Optional[str] = None
    dtype: Optional[str] = None
    extra: str = ""
    weights_revision: str = ""
    """The weights' revision (a commit, a checkpoint digest): SGLang does not tell it, so pages of two checkpoints
    served under one model name are told apart only when this is set (docs/keys.md)."""
    quantization: str = ""
    """The KV quantization scheme when the dtype does not say it all; empty for none."""
    tenant: str = ""
    unknown_keys: tuple[str, ...] = ()
    interface_v1: bool = False
    interface_v1_note: str = ""
    """Why ``interface_v1`` may not be what was meant (a string such as ``"0"``), else empty."""
    cluster_etcd: tuple[str, ...] = ()
    """etcd's endpoints when the daemons form a cluster (docs/cluster.md); empty: the one daemon at host:port."""
    cluster_name: str = "hicache"
    tls: bool = False
    """Speak TLS to the daemon (its ``server.tls-cert``); ``tls_ca`` names the PEM authorities to trust (the
    system's when empty), ``tls_cert``/``tls_key`` a client certificate (a daemon with ``server.tls-client-ca``)."""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    retention_priority: int = 0
    """The retention priority (0-99, docs/protocol.md RETAIN) given to the pages this engine stores, unless SGLang's
    extra_info names a ``priority``; 0 with no prefix keys: no RETAIN is sent."""
    retention_s: float = 0.0
    """How long that priority holds after each use of a page."""

    @classmethod
    def from_extra_config(cls, extra_config: Optional[Mapping[str, Any]]) -> "BackendSettings":
        """Reads and checks the keys; raises ValueError naming the key for a bad value."""
        config = dict(extra_config or {})

        def get(key: str, default: Any) -> Any:
            value = config.get(key)
            return default if value is None else value

        host = str(get("host", DEFAULT_HOST)).strip()
        if not host:
            raise ValueError("extra_config 'host' is empty")
        try:
            port = int(get("port", DEFAULT_PORT))
        except (TypeError, ValueError):
            raise ValueError(f"extra_config 'port' must be an integer, was {config.get('port')!r}") from None
        if not 1 <= port <= 65535:
            raise ValueError(f"extra_config 'port' must be in [1, 65535], was {port}")
        try:
            timeout_s = float(get("timeout_s", DEFAULT_TIMEOUT_S))
        except (TypeError, ValueError):
            raise ValueError(f"extra_config 'timeout_s' must be a number, was {config.get('timeout_s')!r}") from None
        if not timeout_s > 0:
            raise ValueError(f"extra_config 'timeout_s' must be positive, was {timeout_s}")
        try:
            pool_size = int(get("pool_size", DEFAULT_POOL_SIZE))
        except (TypeError, ValueError):
            raise ValueError(f"extra_config 'pool_size' must be an integer, was {config.get('pool_size')!r}") from None
        if pool_size < 1:
            raise ValueError(f"extra_config 'pool_size' must be at least 1, was {pool_size}")
        model = config.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"extra_config 'model' must be a non-empty string, was {model!r}")
        dtype = config.get("dtype")
        if dtype is not None:
            canonical = canonical_dtype(dtype)
            if canonical is None:
                raise ValueError(f"extra_config 'dtype' {dtype!r} is not a KV dtype the daemon knows; use one of "
                                 f"{', '.join(sorted(set(_DTYPES.values())))}")
            dtype = canonical
        extra = get("extra", "")
        if not isinstance(extra, str):
            raise ValueError(f"extra_config 'extra' must be a string, was {extra!r}")
        token = get("token", "")
        if not isinstance(token, str):
            raise ValueError("extra_config 'token' must be a string")
        interface_v1, interface_v1_note = read_interface_v1(config)
        etcd = get("cluster_etcd", "")
        if isinstance(etcd, str):
            etcd = [e.strip() for e in etcd.split(",") if e.strip()]
        if not isinstance(etcd, (list, tuple)) or not all(isinstance(e, str) for e in etcd):
            raise ValueError(f"extra_config 'cluster_etcd' must be endpoints (\"http://h:2379,...\"), was {etcd!r}")
        cluster_name = get("cluster_name", "hicache")
        if not isinstance(cluster_name, str) or not cluster_name:
            raise ValueError(f"extra_config 'cluster_name' must be a non-empty string, was {cluster_name!r}")
        texts = {}
        for key in ("weights_revision", "quantization", "tenant"):
            value = get(key, "")
            if not isinstance(value, str):
                raise ValueError(f"extra_config {key!r} must be a string, was {value!r}")
            texts[key] = value
        for key in ("tls_ca", "tls_cert", "tls_key"):
            value = get(key, "")
            if not isinstance(value, str):
                raise ValueError(f"extra_config {key!r} must be a path, was {value!r}")
            texts[key] = value
        tls = get("tls", bool(texts["tls_ca"] or texts["tls_cert"]))
        if not isinstance(tls, bool):
            raise ValueError(f"extra_config 'tls' must be true or false, was {tls!r}")
        if bool(texts["tls_cert"]) != bool(texts["tls_key"]):
            raise ValueError("extra_config 'tls_cert' and 'tls_key' go together")
        try:
            retention_priority = int(get("retention_priority", 0))
            retention_s = float(get("retention_s", 0.0))
        except (TypeError, ValueError):
            raise ValueError("extra_config 'retention_priority' must be an integer and 'retention_s' a number") from None
        if not 0 <= retention_priority <= 99:
            raise ValueError(f"extra_config 'retention_priority' must be in [0, 99], was {retention_priority}")
        if not 0 <= retention_s <= 4_000_000:
            raise ValueError(f"extra_config 'retention_s' must be in [0, 4000000] seconds, was {retention_s}")
        unknown = tuple(sorted(k for k in config if k not in OWN_KEYS and k not in SGLANG_KEYS))
        return cls(host=host, port=port, token=token, timeout_s=timeout_s, pool_size=pool_size,
                   local=_parse_local(config.get("local")), model=model, dtype=dtype, extra=extra,
                   unknown_keys=unknown, interface_v1=interface_v1, interface_v1_note=interface_v1_note,
                   cluster_etcd=tuple(etcd), cluster_name=cluster_name, tls=tls,
                   retention_priority=retention_priority, retention_s=retention_s, **texts)


_FALSE_LOOKING = frozenset({"0", "false", "no", "off", "none", "null"})


def read_interface_v1(config: Mapping[str, Any]) -> tuple[bool, str]:
    """``interface_v1`` exactly as SGLang reads it, and a note when that reading is likely a surprise.

    SGLang chooses the zero-copy calls with ``bool(extra_config.get("interface_v1", 0))``
    (``HiCacheController.attach_storage_backend``), so the backend must read it the same way or it would describe
    a path SGLang does not take: ``1``/``true`` turn it on, ``0``/``false``/``null``/absent turn it off, and any
    non-empty string turns it on, ``"0"`` and ``"false"`` included."""
    value = config.get("interface_v1", 0)
    enabled = bool(value)
    note = ""
    if isinstance(value, str) and value.strip().lower() in _FALSE_LOOKING:
        note = (f"extra_config \"interface_v1\" is the string {value!r}, which SGLang reads with bool() as "
                "true: it moves pages with batch_get_v1/batch_set_v1 (zero copy); to turn that off, write the "
                "number 0 or false, without quotes")
    return enabled, note


def extra_key(extra: str, pp_rank: int, pp_size: int, cp_rank: int, cp_size: int) -> str:
    """The namespace's extra key: the configured one, then ``pp<rank>`` when pipeline parallel, then
    ``cp<rank>`` when attention context parallel, joined with ``/`` (``"lora-a/pp1"``, ``"pp0/cp1"``)."""
    parts = [extra] if extra else []
    if pp_size > 1:
        parts.append(f"pp{pp_rank}")
    if cp_size > 1:
        parts.append(f"cp{cp_rank}")
    return "/".join(parts)


def build_namespace(model: str, dtype: str, order: int, tp_rank: int, tp_size: int, is_mla: bool,
                    extra: str = "", pp_rank: int = 0, pp_size: int = 1, cp_rank: int = 0,
                    cp_size: int = 1, revision: str = "", quantization: str = "", page_tokens: int = 0,
                    tenant: str = "") -> Namespace:
    """The namespace of one rank's pages, as ``Namespace.builder(model)`` with the same fields names them in Java
    (a Java cache states its page size, so ``page_tokens`` must be the pool's for the two to share pages). MLA pages
    are the same on every TP rank: rank 0 of 1."""
    if is_mla:
        tp_rank, tp_size = 0, 1
    return Namespace(model=model, dtype=dtype, order=order, tp_rank=tp_rank, tp_size=tp_size,
                     extra=extra_key(extra, pp_rank, pp_size, cp_rank, cp_size), revision=revision,
                     quantization=quantization, page_tokens=page_tokens, tenant=tenant)


def page_hash(key: Any) -> Optional[bytes]:
    """SGLang's page key (``get_hash_str``: 64 hex characters) as the daemon's 32 raw bytes; raw 32 bytes pass
    through. None for anything else (the caller decides)."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
        return data if len(data) == 32 else None
    if isinstance(key, str) and len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            return None
    return None


_COMPONENT = re.compile(r"[A-Za-z0-9_-]+")


def component_key(key: Any) -> Optional[str]:
    """The component of a key SGLang names ``"<64-hex page hash>.<component>"`` (``"draft"``), else None.

    SGLang keeps a second pool's page under its page hash and the pool's name joined with a dot (the
    ``{key}.{pool_name}`` convention of ``HiCacheStorage``): from March 2026 (PR #21125) to July 2026 (PR #30393),
    ``HiCacheController`` stored the speculative-decoding draft model's KV of each page as ``"<hash>.draft"``
    through ``batch_set`` / ``batch_get`` on every backend it has no special path for, ``dynamic`` included."""
    if not isinstance(key, str) or len(key) < 66 or key[64] != "." or page_hash(key[:64]) is None:
        return None
    component = key[65:]
    return component if _COMPONENT.fullmatch(component) else None


def fallback_hash(key: Any) -> bytes:
    """The 32 bytes used for a key that is not a 64-hex page hash (a draft page's ``"<hash>.draft"``, or anything
    else): SHA-256 of its text. Such pages work between SGLang engines configured alike, never with a Java engine
    (whose keys are the raw page hashes)."""
    return hashlib.sha256(str(key).encode("utf-8", "surrogatepass")).digest()
