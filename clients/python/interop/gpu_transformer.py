"""A real transformer's KV through HiCache's tiers and back, with bit-identical decoding (issue 40, part 5).

A small Llama-shaped decoder in plain PyTorch (random weights from a fixed seed, bf16 on the device) prefills
prompts; each layer's K (after RoPE) and V go into an SGLang-shaped host pool (``fake_sglang``'s
``FakeMHATokenToKVPoolHost`` over a pinned torch tensor, in that pool's own layout), are stored in a daemon that
this script starts (file L3) through the SGLang backend (``HiCacheDaemonStorage.batch_set_v1``, SGLang's chained
SHA-256 page keys), and are restored through every tier (host pool only; the daemon's slab, L2; its file L3 after
a graceful restart with an empty slab). Greedy decoding from each restored KV must give the logits of every step
bit for bit (``torch.equal``) and the same tokens as decoding from the KV kept in memory. Full recomputation
(prompt plus generated tokens, from scratch) must agree within a stated bf16 bound. Planted bugs (a page_first
pool read as layer_first, K and V swapped, the layers reversed, stale pages served when the weights revision is
left out of the namespace) must each be caught by the same comparison.

    python3 clients/python/interop/gpu_transformer.py --daemon "bash .gpu/java -cp '.gpu/lib/*' io.hicache.cli.HiCacheCli serve" --out DIR

Without ``--daemon`` it runs the checkout's ``./hicache serve`` (built). The daemon must speak the protocol of the
client beside this script (``weights_revision`` needs its version 3: a ``.gpu/lib`` built before it fails every
page). ``--device cpu --quick`` runs a small model in about 10 s on a CPU; the full one takes about 3 minutes on two
CPU cores and 15 s on an H200. ``--check-against-transformers`` (needs the ``transformers`` package; nothing else runs)
loads the same weights into ``transformers.LlamaForCausalLM`` and compares float32 logits, to show the model is
Llama's. Writes DIR/gpu_transformer.json, prints a table last, and exits 0 only if every tier is bit-identical,
recomputation is within its bound and every planted bug was detected. Only the standard library, torch and the
repository's client are imported (transformers only in its own mode).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import logging
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

# cuBLAS is deterministic for a given shape only with a fixed workspace; set before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fake_sglang  # noqa: E402
import hicache  # noqa: E402
from daemon_process import DaemonProcess  # noqa: E402
from hicache.sglang import HiCacheDaemonStorage  # noqa: E402
from hicache.sglang.config import BackendSettings  # noqa: E402

SEED = 1234
"""Seed of revision A's weights and of the prompts."""
STALE_SEED = 4321
"""Revision B: revision A with one layer (the middle one) drawn from this seed instead."""
BOUND_ULPS = 8
"""The recomputation bound, in bf16 units in the last place at the reference logits' largest magnitude (see
:func:`recompute_bound`)."""
TRANSFORMERS_TOLERANCE = 1e-4


# ------------------------------------------------------------------------------------------------------ the model

@dataclasses.dataclass(frozen=True)
class Shape:
    layers: int = 8
    hidden: int = 1024
    heads: int = 16
    kv_heads: int = 4
    head_dim: int = 64
    intermediate: int = 2816
    vocab: int = 32000
    rope_theta: float = 500000.0
    eps: float = 1e-5

    @property
    def tag(self) -> str:
        return (f"{self.layers}L-h{self.hidden}-q{self.heads}-kv{self.kv_heads}x{self.head_dim}-"
                f"i{self.intermediate}-v{self.vocab}")


FULL = Shape()
QUICK = Shape(layers=4, hidden=256, heads=8, kv_heads=2, head_dim=32, intermediate=688, vocab=4096)


def layer_seed(seed: int, layer: int) -> int:
    return seed * 1_000_003 + layer + 1


def make_weights(shape: Shape, seed: int, reseed: Optional[dict[int, int]] = None) -> dict[str, torch.Tensor]:
    """float32 CPU weights under ``transformers``' Llama state-dict names, from ``torch.Generator``s: one for the
    embeddings, final norm and head, one per layer (``reseed`` maps a layer to another seed: a changed revision).
    Projections are N(0, 1/fan_in), norms 1 + N(0, 0.01), embeddings N(0, 1)."""
    h, d, i = shape.hidden, shape.head_dim, shape.intermediate

    def normal(g: torch.Generator, *size: int, std: float) -> torch.Tensor:
        return torch.randn(*size, generator=g) * std

    g = torch.Generator().manual_seed(seed)
    w = {"model.embed_tokens.weight": normal(g, shape.vocab, h, std=1.0),
         "model.norm.weight": 1 + normal(g, h, std=0.1),
         "lm_head.weight": normal(g, shape.vocab, h, std=h ** -0.5)}
    for layer in range(shape.layers):
        gl = torch.Generator().manual_seed((reseed or {}).get(layer, layer_seed(seed, layer)))
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = 1 + normal(gl, h, std=0.1)
        w[p + "self_attn.q_proj.weight"] = normal(gl, shape.heads * d, h, std=h ** -0.5)
        w[p + "self_attn.k_proj.weight"] = normal(gl, shape.kv_heads * d, h, std=h ** -0.5)
        w[p + "self_attn.v_proj.weight"] = normal(gl, shape.kv_heads * d, h, std=h ** -0.5)
        w[p + "self_attn.o_proj.weight"] = normal(gl, h, shape.heads * d, std=(shape.heads * d) ** -0.5)
        w[p + "post_attention_layernorm.weight"] = 1 + normal(gl, h, std=0.1)
        w[p + "mlp.gate_proj.weight"] = normal(gl, i, h, std=h ** -0.5)
        w[p + "mlp.up_proj.weight"] = normal(gl, i, h, std=h ** -0.5)
        w[p + "mlp.down_proj.weight"] = normal(gl, h, i, std=i ** -0.5)
    return w


KV = list  # per layer (K, V), each [tokens, kv_heads, head_dim]; K after RoPE


class Llama:
    """Llama's decoder: embedding; per layer RMSNorm -> GQA attention with RoPE -> residual -> RMSNorm -> SwiGLU
    MLP -> residual; final RMSNorm; LM head. Computes as ``transformers``' eager Llama does (RMSNorm and softmax
    in float32, RoPE's cos/sin made in float32 and cast)."""

    def __init__(self, shape: Shape, weights: dict[str, torch.Tensor], device: str, dtype: torch.dtype):
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.w = {name: t.to(device=device, dtype=dtype) for name, t in weights.items()}
        d = shape.head_dim
        self.inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float().to(device) / d))

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.shape.eps)
        return weight * x32.to(x.dtype)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype)[:, None, :], emb.sin().to(self.dtype)[:, None, :]  # [T, 1, D]

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int) -> torch.Tensor:
        """q [T, heads, D]; k, v [S, kv_heads, D] with S = past + T. Query head h reads KV head h // (heads /
        kv_heads). Causal: query t sees keys up to past + t."""
        t, s = q.shape[0], k.shape[0]
        group = self.shape.heads // self.shape.kv_heads
        k = k.repeat_interleave(group, dim=1).transpose(0, 1)  # [heads, S, D]
        v = v.repeat_interleave(group, dim=1).transpose(0, 1)
        scores = torch.matmul(q.transpose(0, 1), k.transpose(1, 2)) * (self.shape.head_dim ** -0.5)  # [heads, T, S]
        if t > 1:
            hidden = torch.arange(s, device=q.device)[None, :] > (past + torch.arange(t, device=q.device))[:, None]
            scores = scores.masked_fill(hidden, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(probs, v).transpose(0, 1)  # [T, heads, D]

    def forward(self, tokens: torch.Tensor, past: Optional[KV] = None,
                logits_from: int = 0) -> tuple[torch.Tensor, KV]:
        """Logits of positions ``logits_from`` on of ``tokens`` (after ``past``), and the KV of past + tokens."""
        s, w = self.shape, self.w
        t = tokens.shape[0]
        start = past[0][0].shape[0] if past else 0
        cos, sin = self.rope(torch.arange(start, start + t, device=self.device))
        x = F.embedding(tokens, w["model.embed_tokens.weight"])
        kv: KV = []
        for layer in range(s.layers):
            p = f"model.layers.{layer}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"]).view(t, s.heads, s.head_dim)
            k = F.linear(h, w[p + "self_attn.k_proj.weight"]).view(t, s.kv_heads, s.head_dim)
            v = F.linear(h, w[p + "self_attn.v_proj.weight"]).view(t, s.kv_heads, s.head_dim)
            q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
            if past:
                k = torch.cat((past[layer][0], k))
                v = torch.cat((past[layer][1], v))
            kv.append((k, v))
            attn = self.attention(q, k, v, start).reshape(t, s.heads * s.head_dim)
            x = x + F.linear(attn, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            gate, up = F.linear(h, w[p + "mlp.gate_proj.weight"]), F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(gate) * up, w[p + "mlp.down_proj.weight"])
        x = self.rms_norm(x[logits_from:], w["model.norm.weight"])
        return F.linear(x, w["lm_head.weight"]), kv

    def prefill(self, tokens: torch.Tensor, past: Optional[KV] = None) -> tuple[torch.Tensor, KV]:
        """Logits of the last token, and the KV of past + tokens."""
        logits, kv = self.forward(tokens, past, logits_from=tokens.shape[0] - 1)
        return logits[-1], kv

    @torch.no_grad()
    def decode(self, kv: KV, first: int, steps: int) -> tuple[torch.Tensor, list[int]]:
        """Greedy decoding of ``steps`` tokens after a cached prefix: feeds ``first`` (the token the prefill chose),
        then each argmax. Returns the logits of every step [steps, vocab] and the tokens chosen."""
        token, logits_all, tokens = first, [], []
        for _ in range(steps):
            logits, kv = self.forward(torch.tensor([token], device=self.device), kv)
            logits_all.append(logits[-1])
            token = int(torch.argmax(logits[-1]))
            tokens.append(token)
        return torch.stack(logits_all), tokens


# ------------------------------------------------------------------------------------------------ the host pool

class TorchHostPool(fake_sglang.FakeMHATokenToKVPoolHost):
    """SGLang's MHA host pool (``fake_sglang``'s shapes and ``get_page_buffer_meta`` formulas) over a torch tensor,
    pinned when the model is on a GPU. The buffer is [2, L, N, H, D] (layer_first), [2, N, L, H, D] (page_first)
    or [2, P, L, page, H, D] (page_first_direct): K is part 0, V part 1."""

    def __init__(self, layout: str, shape: Shape, slots: int, page: int, pin: bool):
        super().__init__(layout, layer_num=shape.layers, head_num=shape.kv_heads, head_dim=shape.head_dim,
                         size=slots, page_size=page, dtype=fake_sglang.BFLOAT16)
        nbytes = ctypes.sizeof(self.kv_buffer)
        self.tensor = torch.zeros(nbytes, dtype=torch.uint8, pin_memory=pin)
        self.kv_buffer = (ctypes.c_char * nbytes).from_address(self.tensor.data_ptr())
        self.base = self.tensor.data_ptr()

    def view(self, layout: Optional[str] = None) -> torch.Tensor:
        """The buffer as bf16 in ``layout``'s shape (the pool's own unless told: a planted bug reads another)."""
        layout = layout or self.layout
        L, N, H, D, ps = self.layer_num, self.size, self.head_num, self.head_dim, self.page_size
        bf16 = self.tensor.view(torch.bfloat16)
        if layout == "layer_first":
            return bf16.view(2, L, N, H, D)
        if layout == "page_first":
            return bf16.view(2, N, L, H, D)
        return bf16.view(2, N // ps, L, ps, H, D)

    def write(self, kv: KV, first: int) -> None:
        """Device to host: the KV of ``len`` tokens into slots ``first`` on, as a backup of the device pool."""
        count, L, ps = kv[0][0].shape[0], self.layer_num, self.page_size
        view = self.view()
        for part in range(2):
            stacked = torch.stack([kv[layer][part] for layer in range(L)])  # [L, T, H, D] on the device
            if self.layout == "layer_first":
                view[part, :, first:first + count].copy_(stacked)
            elif self.layout == "page_first":
                view[part, first:first + count].copy_(stacked.transpose(0, 1))
            else:
                pages = stacked.reshape(L, count // ps, ps, *stacked.shape[2:]).transpose(0, 1)
                view[part, first // ps:(first + count) // ps].copy_(pages)

    def read(self, first: int, count: int, device: str, as_layout: Optional[str] = None, swap_kv: bool = False,
             reverse_layers: bool = False) -> KV:
        """Host to device: the KV of slots ``first`` .. ``first + count``; contiguous blocks are copied, then
        arranged per layer on the device. The keyword arguments plant bugs."""
        layout = as_layout or self.layout
        L, ps = self.layer_num, self.page_size
        view = self.view(layout)
        parts = []
        for part in ((1, 0) if swap_kv else (0, 1)):
            if layout == "layer_first":
                per_layer = [view[part, layer, first:first + count].to(device, copy=True) for layer in range(L)]
            elif layout == "page_first":
                block = view[part, first:first + count].to(device, copy=True)  # [T, L, H, D]
                per_layer = [block[:, layer].contiguous() for layer in range(L)]
            else:
                block = view[part, first // ps:(first + count) // ps].to(device, copy=True)  # [P, L, ps, H, D]
                per_layer = [block[:, layer].reshape(count, *block.shape[3:]) for layer in range(L)]
            parts.append(per_layer)
        kv = [(parts[0][layer], parts[1][layer]) for layer in range(L)]
        return kv[::-1] if reverse_layers else kv

    def check_rows(self, kv: KV, first: int) -> int:
        """Rows of the first and last pages, as the pool's own ``row_offset`` finds them, against the KV: the
        torch views above must put each row where the pool's formulas say. Returns the rows checked."""
        count, ps = kv[0][0].shape[0], self.page_size
        tokens = sorted({0, 1, ps - 1, min(ps, count - 1), count - 1})
        checked = 0
        for part in range(2):
            for layer in range(self.layer_num):
                for t in tokens:
                    expected = bytes(kv[layer][part][t].contiguous().cpu().view(torch.uint8).flatten().tolist())
                    got = self.row(part, layer, first + t)
                    if got != expected:
                        raise AssertionError(f"{self.layout} pool: row part {part} layer {layer} slot {first + t} is "
                                             f"not where the pool's formulas put it")
                    checked += 1
        return checked


# ------------------------------------------------------------------------------------------- daemon and backend

class FileL3Daemon(DaemonProcess):
    """``daemon_process.DaemonProcess`` (127.0.0.1, port 0, its own slab folder) with a file L3 at ``root``
    instead of none. The L3 folder outlives the daemon: the next one started on it serves its pages."""

    def __init__(self, root: str, host_size: str):
        super().__init__(host_size=host_size)
        self.root = root

    def command(self) -> tuple[list[str], dict]:
        command, env = super().command()
        command[command.index("--server.store") + 1] = "file"
        # DaemonProcess starts the daemon in its own folder: paths of --daemon relative to this process's folder
        # (".gpu/java", ".gpu/lib/*", each part of a class path) are made absolute, or they would not be found.
        return [absolute_paths(word) for word in command] + ["--file.root", self.root], env


def absolute_paths(word: str) -> str:
    """``word`` with each ``:``-separated part that is a relative path under an existing folder made absolute."""
    if word.startswith("-") or "/" not in word:
        return word
    return ":".join(os.path.abspath(part) if part and not os.path.isabs(part) and "/" in part
                    and os.path.isdir(os.path.dirname(part)) else part for part in word.split(":"))


def revision_key_supported() -> bool:
    """Whether the backend reads the extra_config key ``weights_revision`` (it is being added to
    ``hicache/sglang/config.py``): not refused and not among the keys it ignores."""
    try:
        settings = BackendSettings.from_extra_config({"weights_revision": "probe"})
    except (ValueError, TypeError):
        return False
    return "weights_revision" not in settings.unknown_keys


def open_backend(port: int, pool: TorchHostPool, model: str, revision: str) -> HiCacheDaemonStorage:
    """The SGLang backend as SGLang's ``dynamic`` backend builds it (zero copy: ``interface_v1``), on ``pool``."""
    extra = {"port": port, "timeout_s": 60, "interface_v1": 1}
    if REVISION_KEY:
        extra.update(model=model, weights_revision=revision)
    else:
        # TODO(issue 40): switch to extra_config "weights_revision" (model=model, weights_revision=revision) once
        # hicache/sglang/config.py reads it; until then the revision is part of the model id, which keeps the two
        # revisions' pages apart the same way.
        extra.update(model=f"{model}@{revision}")
    config = fake_sglang.storage_config(model_name=model, extra_config=extra,
                                        is_page_first_layout=pool.layout != "layer_first")
    backend = HiCacheDaemonStorage(config, extra)
    backend.register_mem_pool_host(pool)
    return backend


REVISION_KEY = revision_key_supported()

SERVER_COUNTERS = ("hicache_server_hits_host_total", "hicache_server_hits_store_total", "hicache_server_misses_total")


def server_counters(port: int) -> Optional[dict[str, float]]:
    """The daemon's page-serving counters: from the slab, from L3, found nowhere; None if it cannot say."""
    try:
        with hicache.HiCacheClient("127.0.0.1", port, timeout_s=10) as client:
            text = client.stats()
    except hicache.HiCacheError as e:
        logging.getLogger(__name__).warning("the daemon's counters cannot be read: %s", e)
        return None
    counts = dict.fromkeys(SERVER_COUNTERS, 0.0)
    for line in text.splitlines():
        for name in SERVER_COUNTERS:
            if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"):
                counts[name] += float(line.rsplit(" ", 1)[1])
    return counts


def counter_delta(before: Optional[dict[str, float]], after: Optional[dict[str, float]]) -> dict[str, int]:
    """What the daemon served between two readings (-1 each when a reading failed)."""
    short = {"hicache_server_hits_host_total": "from_slab", "hicache_server_hits_store_total": "from_l3",
             "hicache_server_misses_total": "misses"}
    if before is None or after is None:
        return dict.fromkeys(short.values(), -1)
    return {short[name]: int(after[name] - before[name]) for name in SERVER_COUNTERS}


# ------------------------------------------------------------------------------------------------------- checks

def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def compare(reference: tuple[torch.Tensor, list[int]], got: tuple[torch.Tensor, list[int]]) -> dict:
    """Bit-identity of every step's logits and the same tokens; the largest difference otherwise."""
    (ref_logits, ref_tokens), (logits, tokens) = reference, got
    identical = torch.equal(ref_logits, logits) and ref_tokens == tokens
    diff = float((ref_logits.float() - logits.float()).abs().max())
    steps_equal = sum(bool(torch.equal(a, b)) for a, b in zip(ref_logits, logits))
    return {"bit_identical": bool(identical), "max_abs_diff": diff, "steps": len(ref_tokens),
            "steps_bit_identical": steps_equal, "tokens_equal": ref_tokens == tokens}


def bf16_ulp(x: float) -> float:
    """bf16's unit in the last place at magnitude ``x`` (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(x)) - 7) if x > 0 else 2.0 ** -133


def recompute_bound(ref_logits: torch.Tensor) -> float:
    """Decoding one token at a time and recomputing the whole sequence in one forward run the same bf16 model
    through different kernels (matrix-vector against matrix-matrix products, attention over one query against
    many), so sums are taken in another order and every bf16 rounding after them may land one ulp apart; those
    differences pass through every layer. The logits themselves are bf16, so the smallest difference possible is
    one ulp at their magnitude; the bound allows BOUND_ULPS of them at the largest reference logit (logits of up to
    about 5 here: one ulp is 1/32, the bound 0.25; decoding and recomputation were seen up to 0.055 apart, under
    2 ulps, on an H200 and on a CPU)."""
    return BOUND_ULPS * bf16_ulp(float(ref_logits.float().abs().max()))


# ------------------------------------------------------------------------------------------------------ the run

@dataclasses.dataclass
class Case:
    name: str
    tokens: torch.Tensor  # CPU int64
    kv: KV  # reference KV, kept in memory
    first: int  # token the prefill chose: fed first when decoding
    keys: list[str]  # SGLang page keys (hex)
    reference: Optional[tuple[torch.Tensor, list[int]]] = None


class Run:
    def __init__(self, args: argparse.Namespace, shape: Shape):
        self.args = args
        self.shape = shape
        self.device = args.device
        self.page = args.page_size
        self.tokens = args.prompt_tokens
        self.steps = args.steps
        self.model_name = f"hicache-interop/random-llama-{shape.tag}"
        self.rev_a = f"seed-{SEED}"
        self.stale_layer = shape.layers // 2
        self.rev_b = f"seed-{SEED}+layer{self.stale_layer}:seed-{STALE_SEED}"
        self.tiers: list[dict] = []
        self.bugs: list[dict] = []
        self.failures: list[str] = []
        base = Path(args.work or args.out).resolve()
        base.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="gpu-transformer-work-", dir=base))  # removed at the end
        self.l3_root = str(self.work / "l3")
        self.page_bytes = 2 * shape.layers * self.page * shape.kv_heads * shape.head_dim * 2

    def log(self, text: str) -> None:
        print(text, flush=True)

    # ------------------------------------------------------------------------------------------- preparation

    def prepare(self) -> None:
        s, T, page = self.shape, self.tokens, self.page
        if T % page or (T // 2) % page:
            raise SystemExit(f"--prompt-tokens {T} must be a multiple of 2 x --page-size {page}")
        started = time.perf_counter()
        self.model = Llama(s, make_weights(s, SEED), self.device, torch.bfloat16)
        self.log(f"model {s.tag} ({sum(t.numel() for t in self.model.w.values()) / 1e6:.0f} M parameters, bf16) on "
                 f"{self.device_name()}, revision {self.rev_a}: {time.perf_counter() - started:.1f} s to make")
        g = torch.Generator().manual_seed(SEED)
        a = torch.randint(0, s.vocab, (T,), generator=g)
        b = torch.randint(0, s.vocab, (T,), generator=g)
        c = torch.cat((a[:T // 2], torch.randint(0, s.vocab, (T - T // 2,), generator=g)))
        started = time.perf_counter()
        with torch.no_grad():
            logits_a, kv_a = self.model.prefill(a.to(self.device))
            logits_b, kv_b = self.model.prefill(b.to(self.device))
            # The shared-prefix prompt reuses A's KV of its first half (as an engine reuses a cached prefix) and
            # prefills only the rest.
            prefix = [(k[:T // 2], v[:T // 2]) for k, v in kv_a]
            logits_c, kv_c = self.model.prefill(c[T // 2:].to(self.device), prefix)
        sync(self.device)
        self.prefill_seconds = time.perf_counter() - started
        self.cases = [Case(name, tokens, kv, int(torch.argmax(logits)), self.keys(tokens))
                      for name, tokens, kv, logits in (("A", a, kv_a, logits_a), ("B", b, kv_b, logits_b),
                                                       ("A-prefix+C", c, kv_c, logits_c))]
        assert self.cases[2].keys[:T // 2 // page] == self.cases[0].keys[:T // 2 // page]
        started = time.perf_counter()
        for case in self.cases:
            case.reference = self.model.decode(case.kv, case.first, self.steps)
        sync(self.device)
        self.reference_decode_seconds = time.perf_counter() - started
        self.log(f"prefill of 2 x {T} + {T // 2} tokens: {self.prefill_seconds:.2f} s; reference decoding of "
                 f"3 x {self.steps} steps from the KV in memory: {self.reference_decode_seconds:.2f} s")

    def keys(self, tokens: torch.Tensor) -> list[str]:
        return [h.hex() for h in hicache.page_hashes(tokens.tolist(), self.page)]

    def device_name(self) -> str:
        if self.device.startswith("cuda"):
            return torch.cuda.get_device_name(torch.device(self.device))
        return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"

    def pool(self, layout: str) -> TorchHostPool:
        return TorchHostPool(layout, self.shape, 4 * self.tokens, self.page, pin=self.device.startswith("cuda"))

    def slots(self, first: int) -> torch.Tensor:
        return torch.arange(first, first + self.tokens, dtype=torch.int64)

    # ----------------------------------------------------------------------------------------------- a tier

    def restore_and_decode(self, tier: str, layout: str, case: Case, pool: TorchHostPool, first: int,
                           fetch=None, model: Optional[Llama] = None, reference=None, **bug) -> dict:
        """``fetch()`` (the daemon's pages into the pool, or nothing), the pool's slots to the device, greedy
        decoding, compared with ``reference`` (the case's decoding from the KV in memory)."""
        model = model or self.model
        sync(self.device)
        started = time.perf_counter()
        got_pages = fetch() if fetch else len(case.keys)
        fetched = time.perf_counter()
        kv = pool.read(first, self.tokens, self.device, **bug)
        sync(self.device)
        restored = time.perf_counter()
        result = compare(reference or case.reference, model.decode(kv, case.first, self.steps))
        sync(self.device)
        result.update(tier=tier, layout=layout, case=case.name, pages=got_pages,
                      pages_expected=len(case.keys), bytes=got_pages * pool.page_bytes,
                      fetch_seconds=fetched - started, to_device_seconds=restored - fetched,
                      seconds=restored - started, decode_seconds=time.perf_counter() - restored)
        return result

    def tier_row(self, result: dict) -> None:
        self.tiers.append(result)
        ok = result["bit_identical"] and result["pages"] == result["pages_expected"]
        self.log(f"  {result['tier']:9} {result['layout']:17} {result['case']:11} pages {result['pages']:>3}/"
                 f"{result['pages_expected']:<3} restore {result['seconds'] * 1e3:8.1f} ms  "
                 f"{'bit-identical' if result['bit_identical'] else 'DIFFERS max|d| %.4g' % result['max_abs_diff']}")
        if not ok:
            self.failures.append(f"{result['tier']} {result['layout']} {result['case']}: not bit-identical or "
                                 f"pages missing ({result['pages']}/{result['pages_expected']})")

    def bug_row(self, name: str, what: str, result: dict, baseline_ok: bool = True, **extra) -> None:
        """A planted bug is detected when decoding differs, and only counts when the same pages restored without
        the bug decoded bit-identically (``baseline_ok``): otherwise the difference proves nothing."""
        detected = not result["bit_identical"] and baseline_ok
        self.bugs.append({"bug": name, "what": what, "detected": detected, "max_abs_diff": result["max_abs_diff"],
                          "steps_bit_identical": result["steps_bit_identical"], "steps": result["steps"],
                          "tokens_equal": result["tokens_equal"], **extra})
        self.log(f"  planted bug {name}: {what}: {'detected' if detected else 'NOT DETECTED'} "
                 f"(max|d| {result['max_abs_diff']:.4g}, {result['steps_bit_identical']}/{result['steps']} steps "
                 f"equal)")
        if not baseline_ok:
            self.failures.append(f"planted bug {name}: untested, the pages it reads were not restored correctly "
                                 f"without it")
        elif not detected:
            self.failures.append(f"planted bug {name} not detected")

    # --------------------------------------------------------------------------------------------- phase 1

    def host_and_l2(self, daemon: DaemonProcess, layout: str) -> None:
        T = self.tokens
        source = self.pool(layout)
        sync(self.device)
        started = time.perf_counter()
        for i, case in enumerate(self.cases):
            source.write(case.kv, i * T)
        sync(self.device)
        to_host = time.perf_counter() - started
        rows = sum(source.check_rows(case.kv, i * T) for i, case in enumerate(self.cases))
        self.log(f"{layout}: device -> host pool {to_host * 1e3:.1f} ms; {rows} rows where the pool's formulas put "
                 f"them")
        for i, case in enumerate(self.cases):  # host tier: device -> host pool -> device, no daemon
            self.tier_row(self.restore_and_decode("host", layout, case, source, i * T))
        writer = open_backend(daemon.port, source, self.model_name, self.rev_a)
        for i, case in enumerate(self.cases):
            started = time.perf_counter()
            stored = writer.batch_set_v1(case.keys, self.slots(i * T))
            seconds = time.perf_counter() - started
            self.log(f"  stored {case.name}: {sum(stored)}/{len(stored)} pages in {seconds * 1e3:.1f} ms")
            if not all(stored):
                self.failures.append(f"{layout} {case.name}: {len(stored) - sum(stored)} pages not stored")
        counters = writer.counters()
        self.stored[layout] = {"set_pages_ok": counters.get("set_pages_ok", 0),
                               "set_pages_present": counters.get("set_pages_present", 0),
                               "set_pages_exists": counters.get("set_pages_exists", 0)}
        self.log(f"  the backend wrote {self.stored[layout]['set_pages_ok']} pages; "
                 f"{self.stored[layout]['set_pages_present']} of the shared prefix were there already")
        writer.close()
        self.daemon_l2(daemon, layout, "L2")

    def daemon_l2(self, daemon: DaemonProcess, layout: str, tier: str) -> TorchHostPool:
        """Every case's pages from the daemon into a fresh pool (case i in the slots of case i + 1: not where they
        were written), restored and decoded. Returns the pool."""
        T = self.tokens
        target = self.pool(layout)
        reader = open_backend(daemon.port, target, self.model_name, self.rev_a)
        before = server_counters(daemon.port)
        for i, case in enumerate(self.cases):
            first = ((i + 1) % len(self.cases)) * T
            fetch = lambda case=case, first=first: sum(reader.batch_get_v1(case.keys, self.slots(first)))  # noqa: E731
            self.tier_row(self.restore_and_decode(tier, layout, case, target, first, fetch))
        served = counter_delta(before, server_counters(daemon.port))
        self.served.append({"tier": tier, "layout": layout, **served})
        self.log(f"  the daemon served {served['from_slab']} pages from its slab, {served['from_l3']} from L3, "
                 f"{served['misses']} misses")
        wanted = sum(len(case.keys) for case in self.cases)
        if tier == "L3" and served["from_l3"] < wanted - len(self.cases[2].keys) // 2:
            self.failures.append(f"L3 {layout}: the daemon says it served {served['from_l3']} pages from L3")
        reader.close()
        self.l2_pools[layout] = target
        return target

    def planted_layout_bugs(self) -> None:
        """(a) and (b) on pages restored from the daemon's slab (case A, in slots T..2T of the L2 pools)."""
        T, case = self.tokens, self.cases[0]
        pools = self.l2_pools

        def baseline(layout: str) -> bool:  # the same pages, restored without the bug, decoded bit-identically
            return any(r["tier"] == "L2" and r["layout"] == layout and r["case"] == case.name and r["bit_identical"]
                       for r in self.tiers)

        if "page_first" in pools:
            self.bug_row("a.layout", "a page_first pool's pages read as if layer_first",
                         self.restore_and_decode("bug", "page_first", case, pools["page_first"], T,
                                                 as_layout="layer_first"), baseline("page_first"))
        if "layer_first" in pools:
            self.bug_row("a.layout-reverse", "a layer_first pool's pages read as if page_first",
                         self.restore_and_decode("bug", "layer_first", case, pools["layer_first"], T,
                                                 as_layout="page_first"), baseline("layer_first"))
        layout = next(iter(pools))
        self.bug_row("a.kv-swap", f"K and V swapped ({layout})",
                     self.restore_and_decode("bug", layout, case, pools[layout], T, swap_kv=True), baseline(layout))
        self.bug_row("b.layer-order", f"layers restored in reverse order ({layout})",
                     self.restore_and_decode("bug", layout, case, pools[layout], T, reverse_layers=True),
                     baseline(layout))

    def stale_pages(self, daemon: DaemonProcess) -> None:
        """(c) KV stored under revision A; the weights change (revision B: one layer re-drawn). With revision B in
        the namespace the pages are a miss; with the revision left out (B's engine configured as A) the stale
        pages are served, and decoding from them must differ from B's own."""
        T, case = self.tokens, self.cases[0]
        layout = self.layouts[-1]
        model_b = Llama(self.shape, make_weights(self.shape, SEED, {self.stale_layer: STALE_SEED}), self.device,
                        torch.bfloat16)
        with torch.no_grad():
            logits_b, kv_b = model_b.prefill(case.tokens.to(self.device))
        first_b = int(torch.argmax(logits_b))
        case_b = dataclasses.replace(case, kv=kv_b, first=first_b)
        case_b.reference = model_b.decode(kv_b, first_b, self.steps)
        pool = self.pool(layout)
        right = open_backend(daemon.port, pool, self.model_name, self.rev_b)
        wrong = open_backend(daemon.port, pool, self.model_name, self.rev_a)
        namespaces_differ = right.namespace != wrong.namespace
        hits_b = right.batch_exists(case.keys)
        got_b = sum(right.batch_get_v1(case.keys, self.slots(0)))
        self.stale = {"layout": layout, "revision_a": self.rev_a, "revision_b": self.rev_b,
                      "changed_layer": self.stale_layer, "weights_revision_key": REVISION_KEY,
                      "namespace_a": repr(wrong.namespace), "namespace_b": repr(right.namespace),
                      "namespaces_differ": namespaces_differ, "hits_with_revision_b": hits_b,
                      "pages_got_with_revision_b": got_b, "pages": len(case.keys)}
        self.log(f"stale pages ({layout}): revision B ({self.rev_b}) finds {hits_b} of the {len(case.keys)} pages "
                 f"revision A stored (batch_exists), gets {got_b}")
        if not namespaces_differ or hits_b or got_b:
            self.failures.append(f"revision B saw revision A's pages (hits {hits_b}, got {got_b})")
        # Control: B's own KV under revision B comes back bit-identical (the namespace keeps both).
        pool.write(kv_b, 2 * T)
        stored = right.batch_set_v1(case.keys, self.slots(2 * T))
        fetch = lambda: sum(right.batch_get_v1(case.keys, self.slots(T)))  # noqa: E731
        control = self.restore_and_decode("L2 rev B", layout, case_b, pool, T, fetch, model=model_b)
        self.stale["control_stored"] = sum(stored)
        self.stale["control_bit_identical"] = control["bit_identical"]
        self.tier_row(control)
        # The bug: revision left out (B's engine names its pages as A did), so A's stale pages are served to B.
        fetch = lambda: sum(wrong.batch_get_v1(case.keys, self.slots(0)))  # noqa: E731
        result = self.restore_and_decode("bug", layout, case_b, pool, 0, fetch, model=model_b)
        # It counts only if the stale pages were served, and B's own pages came back bit-identical through the
        # same path (else the difference would prove nothing).
        self.bug_row("c.stale-page", "weights revision left out: revision A's pages served to revision B's model",
                     result, result["pages"] == len(case.keys) and control["bit_identical"],
                     stale_pages_served=result["pages"])
        right.close()
        wrong.close()

    # ------------------------------------------------------------------------------------------ recompute

    def recompute(self) -> None:
        """Prompt + generated tokens in one forward from scratch; logits at the decoded positions against the
        reference decoding's."""
        diffs, agree, total, bound, margin_checked, margin_agree = [], 0, 0, 0.0, 0, 0
        started = time.perf_counter()
        per_case = []
        for case in self.cases:
            ref_logits, ref_tokens = case.reference
            inputs = torch.tensor([case.first] + ref_tokens[:-1])
            with torch.no_grad():
                logits, _ = self.model.forward(torch.cat((case.tokens, inputs)).to(self.device),
                                               logits_from=self.tokens)
            diff = float((logits.float() - ref_logits.float()).abs().max())
            case_bound = recompute_bound(ref_logits)
            argmax = logits.argmax(-1).tolist()
            same = sum(a == b for a, b in zip(argmax, ref_tokens))
            top2 = ref_logits.float().topk(2, dim=-1).values
            clear = (top2[:, 0] - top2[:, 1]) > 2 * case_bound  # argmax cannot move within the bound
            margin_checked += int(clear.sum())
            margin_agree += sum(int(c) and a == b for c, a, b in zip(clear.tolist(), argmax, ref_tokens))
            diffs.append(diff)
            agree += same
            total += len(ref_tokens)
            bound = max(bound, case_bound)
            per_case.append({"case": case.name, "max_abs_diff": diff, "bound": case_bound,
                             "max_abs_logit": float(ref_logits.float().abs().max()), "argmax_agree": same,
                             "steps": len(ref_tokens)})
        sync(self.device)
        within = all(r["max_abs_diff"] <= r["bound"] for r in per_case)
        self.recomputed = {"max_abs_diff": max(diffs), "bound": bound, "bound_ulps": BOUND_ULPS,
                           "within_bound": within, "argmax_agree": agree, "steps": total,
                           "argmax_agreement": agree / total, "clear_margin_steps": margin_checked,
                           "clear_margin_argmax_agree": margin_agree, "cases": per_case,
                           "seconds": time.perf_counter() - started,
                           "why": " ".join(recompute_bound.__doc__.split()).replace("BOUND_ULPS", str(BOUND_ULPS))}
        self.log(f"recompute: max|d| {max(diffs):.4g} (bound {bound:.4g} = {BOUND_ULPS} bf16 ulps at the largest "
                 f"logit), argmax agrees {agree}/{total}")
        if not within:
            self.failures.append(f"recomputation differs by {max(diffs):.4g}, over the bound {bound:.4g}")
        if margin_agree != margin_checked:
            self.failures.append("recomputation's argmax moved where the reference's top-2 margin exceeds 2 bounds")

    # ----------------------------------------------------------------------------------------------- main

    def run(self) -> dict:
        self.layouts = self.args.layouts.split(",")
        self.stored, self.served, self.l2_pools = {}, [], {}
        self.prepare()
        os.environ["HICACHE_TEST_TMPDIR"] = str(self.work)  # the daemons' slab folders
        # Every page stored (per layout A, B and C's second half; revision B's A), twice over, in MiB.
        pages = len(self.layouts) * 5 * self.tokens // 2 // self.page + self.tokens // self.page
        slab = max(64, 2 * pages * self.page_bytes // (1 << 20) + 32)
        daemon = FileL3Daemon(self.l3_root, f"{slab}MiB")
        self.daemon_start(daemon)
        try:
            where = "extra_config key weights_revision" if REVISION_KEY else "model id (TODO: weights_revision)"
            self.log(f"daemon 1 on 127.0.0.1:{daemon.port}, file L3 in {self.l3_root}, slab {slab} MiB; "
                     f"weights revision in the {where}")
            for layout in self.layouts:
                self.host_and_l2(daemon, layout)
            self.planted_layout_bugs()
            self.stale_pages(daemon)
        finally:
            self.daemon_stop(daemon, "daemon 1")
        daemon = FileL3Daemon(self.l3_root, f"{slab}MiB")
        self.daemon_start(daemon)
        try:
            self.log(f"daemon 2 on 127.0.0.1:{daemon.port}: same file L3, empty slab")
            for layout in self.layouts:
                self.daemon_l2(daemon, layout, "L3")
        finally:
            self.daemon_stop(daemon, "daemon 2")
        self.recompute()
        return self.report()

    def daemon_start(self, daemon: DaemonProcess) -> None:
        try:
            daemon.start()
        except unittest.SkipTest as e:
            raise SystemExit(f"no daemon: {e}") from None

    def daemon_stop(self, daemon: DaemonProcess, name: str) -> None:
        started = time.perf_counter()
        daemon.stop()  # SIGTERM: requests in flight finish, every page reaches L3 first
        rc = daemon.process.returncode if daemon.process is not None else None
        self.daemon_exits = getattr(self, "daemon_exits", []) + [{"daemon": name, "exit": rc,
                                                                  "seconds": time.perf_counter() - started}]
        self.log(f"{name} stopped (SIGTERM): exit {rc} in {time.perf_counter() - started:.1f} s")
        if rc not in (0, 143, -15):
            self.failures.append(f"{name} did not stop gracefully (exit {rc})")

    def report(self) -> dict:
        summary = {}
        for tier in ("host", "L2", "L3"):
            rows = [r for r in self.tiers if r["tier"] == tier]
            summary[tier] = {"bit_identical": all(r["bit_identical"] for r in rows) and bool(rows),
                             "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=None),
                             "steps": sum(r["steps"] for r in rows), "runs": len(rows),
                             "pages": sum(r["pages"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
                             "seconds": sum(r["seconds"] for r in rows),
                             "fetch_seconds": sum(r["fetch_seconds"] for r in rows),
                             "decode_seconds": sum(r["decode_seconds"] for r in rows)}
        s = self.shape
        return {"device": self.device_name(), "torch": torch.__version__, "python": platform.python_version(),
                "model": {**dataclasses.asdict(s), "dtype": "bfloat16", "seed": SEED, "name": self.model_name,
                          "parameters": sum(t.numel() for t in self.model.w.values())},
                "prompt_tokens": self.tokens, "page_size": self.page, "decode_steps": self.steps,
                "layouts": self.layouts, "page_bytes": self.page_bytes,
                "weights_revision_key": REVISION_KEY,
                "prefill_seconds": self.prefill_seconds, "reference_decode_seconds": self.reference_decode_seconds,
                "tiers": summary, "tier_runs": self.tiers, "stored": self.stored, "served": self.served,
                "daemons": self.daemon_exits, "recompute": self.recomputed, "stale": self.stale,
                "planted_bugs": {b["bug"]: b["detected"] for b in self.bugs}, "planted_bug_runs": self.bugs,
                "failures": self.failures, "passed": not self.failures}


def print_table(result: dict) -> None:
    m = result["model"]
    print()
    print(f"{result['device']}, torch {result['torch']}: Llama-shaped {m['layers']} layers, hidden {m['hidden']}, "
          f"{m['heads']} heads / {m['kv_heads']} KV heads of {m['head_dim']}, bf16; {result['prompt_tokens']}-token "
          f"prompts, {result['page_size']}-token pages of {result['page_bytes']} bytes, {result['decode_steps']} "
          f"greedy steps, layouts {', '.join(result['layouts'])}")
    print(f"{'tier':6} {'runs':>4} {'steps':>5} {'pages':>6} {'MB':>8} {'restore s':>9} {'bit-identical':>13} "
          f"{'max|diff|':>9}")
    for tier, t in result["tiers"].items():
        diff = "-" if t["max_abs_diff"] is None else f"{t['max_abs_diff']:.4g}"
        print(f"{tier:6} {t['runs']:>4} {t['steps']:>5} {t['pages']:>6} {t['bytes'] / 1e6:>8.2f} "
              f"{t['seconds']:>9.3f} {str(t['bit_identical']):>13} {diff:>9}")
    r = result["recompute"]
    print(f"recompute from scratch: max|diff| {r['max_abs_diff']:.4g} <= bound {r['bound']:.4g} "
          f"({r['bound_ulps']} bf16 ulps at the largest logit): {r['within_bound']}; argmax agrees "
          f"{r['argmax_agree']}/{r['steps']}")
    print(f"  why that bound: {r['why']}")
    st = result["stale"]
    print(f"revision B reads revision A's pages: {st['hits_with_revision_b']} hits of {st['pages']} "
          f"(namespaces differ: {st['namespaces_differ']}); B's own pages: bit-identical {st['control_bit_identical']}")
    for b in result["planted_bug_runs"]:
        print(f"planted bug {b['bug']:17} {'detected' if b['detected'] else 'NOT DETECTED':12} "
              f"max|diff| {b['max_abs_diff']:.4g}  ({b['what']})")
    for failure in result["failures"]:
        print(f"FAILED: {failure}")
    print("PASS: every tier bit-identical, recomputation within its bound, every planted bug detected"
          if result["passed"] else "FAIL")


# ----------------------------------------------------------------------------------- the transformers cross-check

def check_against_transformers(args: argparse.Namespace, shape: Shape) -> int:
    """The same weights in ``transformers.LlamaForCausalLM`` (float32, CPU): logits of a prompt, and of this model's
    incremental decoding (prefill, then one token at a time from the KV), against transformers' full forward."""
    import transformers  # only here: the GPU machine has none

    weights = make_weights(shape, SEED)
    kwargs = dict(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                  num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                  num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, rms_norm_eps=shape.eps,
                  max_position_embeddings=4096, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                  hidden_act="silu")
    try:  # transformers 5: rope_parameters; 4.x: rope_theta
        config = transformers.LlamaConfig(**kwargs, rope_parameters={"rope_type": "default",
                                                                      "rope_theta": shape.rope_theta})
    except TypeError:
        config = transformers.LlamaConfig(**kwargs, rope_theta=shape.rope_theta)
    config._attn_implementation = "eager"
    reference = transformers.LlamaForCausalLM(config).to(torch.float32).eval()
    missing, unexpected = reference.load_state_dict(weights, strict=True)
    mine = Llama(shape, weights, "cpu", torch.float32)
    tokens = torch.randint(0, shape.vocab, (args.check_tokens,), generator=torch.Generator().manual_seed(SEED))
    split = args.check_tokens - 16
    with torch.no_grad():
        theirs = reference(input_ids=tokens[None]).logits[0]
        full, _ = mine.forward(tokens)
        _, kv = mine.forward(tokens[:split])
        stepwise = []
        for t in range(split, args.check_tokens):
            logits, kv = mine.forward(tokens[t:t + 1], kv)
            stepwise.append(logits[-1])
        stepwise = torch.stack(stepwise)
    full_diff = float((full - theirs).abs().max())
    step_diff = float((stepwise - theirs[split:]).abs().max())
    scale = float(theirs.abs().max())
    passed = full_diff <= TRANSFORMERS_TOLERANCE and step_diff <= TRANSFORMERS_TOLERANCE
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "model": dataclasses.asdict(shape),
              "dtype": "float32", "device": "cpu", "tokens": args.check_tokens, "max_abs_logit": scale,
              "prefill_max_abs_diff": full_diff, "incremental_steps": args.check_tokens - split,
              "incremental_max_abs_diff": step_diff, "tolerance": TRANSFORMERS_TOLERANCE,
              "argmax_agree": int((full.argmax(-1) == theirs.argmax(-1)).sum()), "passed": passed,
              "config": config.to_dict()}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_transformer_vs_transformers.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"transformers {transformers.__version__} LlamaForCausalLM, same weights ({shape.tag}), float32 on CPU, "
          f"{args.check_tokens} tokens (largest |logit| {scale:.3f}):")
    print(f"  prefill logits: max|diff| {full_diff:.3g}; incremental decoding from the KV "
          f"({args.check_tokens - split} steps): max|diff| {step_diff:.3g}; argmax agrees "
          f"{result['argmax_agree']}/{args.check_tokens}; tolerance {TRANSFORMERS_TOLERANCE:g}: "
          f"{'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


# --------------------------------------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemon", help="the command that runs `hicache serve` (default: the checkout's "
                                         "./hicache serve, built)")
    parser.add_argument("--out", required=True, help="folder for gpu_transformer.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="a small model and short prompts")
    parser.add_argument("--check-against-transformers", action="store_true",
                        help="only compare the model with transformers' LlamaForCausalLM (float32, CPU)")
    parser.add_argument("--check-tokens", type=int, default=128, help="prompt length of that check")
    parser.add_argument("--prompt-tokens", type=int, help="tokens per prompt (default 1024; --quick 256)")
    parser.add_argument("--page-size", type=int, help="tokens per page (default 64; --quick 16)")
    parser.add_argument("--steps", type=int, help="greedy decoding steps (default 32; --quick 16)")
    parser.add_argument("--layouts", default="layer_first,page_first",
                        help="host pool layouts, comma-separated (layer_first, page_first, page_first_direct)")
    parser.add_argument("--work", help="folder in which a temporary folder holds the daemons' slabs and the file L3 "
                                       "(default OUT); that temporary folder is removed at the end")
    args = parser.parse_args()
    shape = QUICK if args.quick else FULL
    args.prompt_tokens = args.prompt_tokens or (256 if args.quick else 1024)
    args.page_size = args.page_size or (16 if args.quick else 64)
    args.steps = args.steps or (16 if args.quick else 32)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.check_against_transformers:
        return check_against_transformers(args, shape)
    if args.daemon:
        os.environ["HICACHE_DAEMON_CMD"] = args.daemon
    torch.use_deterministic_algorithms(True, warn_only=True)
    started = time.perf_counter()
    run = Run(args, shape)
    try:
        result = run.run()
    finally:
        shutil.rmtree(run.work, ignore_errors=True)
    result["total_seconds"] = time.perf_counter() - started
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_transformer.json").write_text(json.dumps(result, indent=2))
    print_table(result)
    print(f"({result['total_seconds']:.1f} s; {Path(args.out) / 'gpu_transformer.json'})")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
