"""Time to first token: restoring a prompt's KV from the daemon against recomputing it (issue 44, part 1).

A Llama-3.1-8B-shaped model in plain PyTorch (``gpu_transformer``'s ``Llama``, random bf16 weights drawn on the
device from a fixed seed, attention through ``scaled_dot_product_attention``) prefills random prompts of 4096,
16384 and 32768 tokens. Per length it measures:

* ``prefill_ms``: the prefill that recomputes the prompt's KV on the GPU (CUDA events; one warm-up, then
  ``--repeats``, median);
* ``daemon_local_ms`` and ``daemon_tcp_ms``: the same KV restored from a daemon on this host, through the client's
  same-host path (leases on the mapped slab, ``local=True``) and through TCP on loopback (``local=False``): one
  ``get`` of every page into a pinned host tensor, then one copy to the GPU, timed from the ``get`` to the copy's
  end; each restore is checked against the prefill's KV, byte for byte;
* ``daemon_l3_ms``: one same-host restore per length from a second daemon started on the first one's file L3 after
  a graceful stop, with an empty slab and the L3 files dropped from the page cache (every page reads through L3);
* ``copy_ms``: a plain pinned-host-to-GPU copy of the same bytes, for reference.

A page is ``--page-tokens`` tokens of KV: for each layer, K (after RoPE) then V of those tokens, [token][kv
head][dim] in bf16 (2 MiB for 16 tokens of this shape), keyed by the client's ``page_hashes`` of the tokens.

    python3 clients/python/interop/gpu_ttft.py --daemon "bash .gpu/java -cp '.gpu/lib/*' io.hicache.cli.HiCacheCli serve" --out DIR

Without ``--daemon`` it runs the checkout's ``./hicache serve`` (built). The daemon's slab goes to /dev/shm when it
has room (else under the system's temporary folder), its file L3 under the system's temporary folder; both are
removed at the end. ``--device cpu --quick`` runs a small model on short prompts (a smoke run). Writes
DIR/ttft_python.json, prints a table last, and exits 0 only if every page was stored and every restore came back
bit-identical. Only the standard library, torch and the repository's client are imported. The functions above
``SdpaLlama`` need no torch (they can be imported and checked without it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import unittest
from pathlib import Path
from typing import Any, Optional, Sequence

HERE = Path(__file__).resolve().parent
for _path in (HERE, HERE.parent, HERE.parent / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import hicache  # noqa: E402

SEED = 1234
"""Seed of the weights; each prompt's tokens come from :func:`prompt_seed`."""
FULL_SHAPE = dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256,
                  rope_theta=500000.0)
"""Llama-3.1-8B."""
QUICK_SHAPE = dict(layers=4, hidden=256, heads=8, kv_heads=2, head_dim=32, intermediate=688, vocab=4096)
FULL_LENGTHS = (4096, 16384, 32768)
QUICK_LENGTHS = (256, 1024)
PUT_BATCH_PAGES = 64
CALL_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 180.0
BF16_BYTES = 2
MIB = 1 << 20
PENDING = "hicache_server_write_behind_pending_pages"
SERVED = {"hicache_server_hits_host_total": "from_slab", "hicache_server_hits_store_total": "from_l3",
          "hicache_server_misses_total": "misses"}


# -------------------------------------------------------------------------------------------- torch-free helpers

def prompt_seed(tokens: int) -> int:
    """A seed per length: prompts drawn from one seed would share their first tokens, hence their first pages,
    and a longer prompt's put would find the shorter one's pages there already."""
    return SEED * 1_000_003 + tokens


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int = BF16_BYTES) -> int:
    return layers * 2 * kv_heads * head_dim * dtype_bytes


def page_spans(pages: int, page_bytes: int) -> list[tuple[int, int]]:
    """(offset, length) of each page in a contiguous run of pages."""
    return [(i * page_bytes, page_bytes) for i in range(pages)]


def batches(count: int, size: int) -> list[range]:
    return [range(first, min(first + size, count)) for first in range(0, count, size)]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def slab_mib(total_page_bytes: int) -> int:
    """The slab for every length's pages at once plus a quarter (so nothing is evicted and every L2 restore is
    served from the slab), in MiB, a multiple of 16 MiB (the daemon's largest block at its default
    max-page-bytes) and at least 256 MiB."""
    mib = -(-total_page_bytes * 5 // 4 // MIB)
    return max(256, -(-mib // 16) * 16)


def prom_sum(text: str, name: str) -> Optional[float]:
    """The sum of metric ``name``'s samples (every label set) in Prometheus text, or None if it has none."""
    total, found = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name):]
        if rest.startswith("{"):
            rest = rest[rest.find("}") + 1:]
        elif not rest.startswith(" "):
            continue  # another metric whose name starts with this one
        words = rest.split()
        try:
            total += float(words[0])
            found = True
        except (IndexError, ValueError):
            pass
    return total if found else None


def served_counts(text: str) -> Optional[dict[str, float]]:
    counts = {short: prom_sum(text, name) for name, short in SERVED.items()}
    return None if any(v is None for v in counts.values()) else counts


def served_delta(before: Optional[dict[str, float]], after: Optional[dict[str, float]]) -> dict[str, int]:
    """Pages the daemon served between two readings (-1 each where a reading failed)."""
    if before is None or after is None:
        return dict.fromkeys(SERVED.values(), -1)
    return {k: int(after[k] - before[k]) for k in SERVED.values()}


def mount_of(path: str) -> tuple[str, str]:
    """(mount point, file system type) holding ``path``, from /proc/mounts; ("?", "?") where it cannot be read."""
    best = ("?", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                words = line.split()
                if len(words) < 3:
                    continue
                point = words[1].replace("\\040", " ")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and (best[0] == "?" or len(point) > len(best[0])):
                    best = (point, words[2])
    except OSError:
        pass
    return best


def drop_page_cache(root: str) -> int:
    """fsync, then POSIX_FADV_DONTNEED, each file under ``root``, so that the next reads of them go to the disk
    (DONTNEED drops only clean pages, hence the fsync). Per file: nothing else on the machine is touched. Returns the
    files advised (0 where the call does not exist)."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    advised = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                advised += 1
            except OSError:
                pass
            finally:
                os.close(fd)
    return advised


def ms_table(per_length: dict[int, list[float]]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Medians and all values, keyed by the length as a string (JSON's keys), as floats."""
    return ({str(t): median(v) for t, v in per_length.items() if v},
            {str(t): [float(x) for x in v] for t, v in per_length.items()})


def format_table(result: dict[str, Any]) -> list[str]:
    """The summary's lines: per length, the KV's size, prefill and restores in ms, and what each restore saves."""
    s = result["shape"]
    lines = [f"{result['device']}, torch {result['torch']}: {s['layers']} layers, hidden {s['hidden']}, "
             f"{s['heads']} heads / {s['kv_heads']} KV heads of {s['head_dim']}, bf16; {result['page_tokens']}-token "
             f"pages of {result['page_bytes']} bytes; medians of {result['repeats']} (L3: one restore)",
             f"{'tokens':>7} {'KV MiB':>8} {'prefill':>9} {'local':>9} {'tcp':>9} {'L3':>9} {'H2D copy':>9} "
             f"{'local GB/s':>10} {'tcp GB/s':>9} {'prefill/local':>13}"]

    def cell(key: str, t: str) -> str:
        v = result.get(key, {}).get(t)
        return f"{v:9.1f}" if v is not None else f"{'-':>9}"

    def rate(key: str, t: str, width: int) -> str:
        v = result.get(key, {}).get(t)
        return f"{result['bytes'][t] / v / 1e6:{width}.2f}" if v else f"{'-':>{width}}"

    for length in result["lengths"]:
        t = str(length)
        if t not in result["bytes"]:
            lines.append(f"{length:>7} (not run)")
            continue
        prefill, local = result["prefill_ms"].get(t), result.get("daemon_local_ms", {}).get(t)
        ratio = f"{prefill / local:13.2f}" if prefill and local else f"{'-':>13}"
        lines.append(f"{length:>7} {result['bytes'][t] / MIB:8.0f} {cell('prefill_ms', t)} "
                     f"{cell('daemon_local_ms', t)} {cell('daemon_tcp_ms', t)} {cell('daemon_l3_ms', t)} "
                     f"{cell('copy_ms', t)} "
                     f"{rate('daemon_local_ms', t, 10)} {rate('daemon_tcp_ms', t, 9)} {ratio}")
    lines.append("all figures in ms; a restore is get (into pinned host memory) + one copy to the device")
    for failure in result.get("failures", []):
        lines.append(f"FAILED: {failure}")
    lines.append("PASS: every page stored, every restore bit-identical" if result.get("verified") else "FAIL")
    return lines


# ------------------------------------------------------------------------------------------------ torch and model

_TORCH_ERROR: Optional[BaseException] = None
try:
    _had_cublas_config = "CUBLAS_WORKSPACE_CONFIG" in os.environ
    import torch
    import torch.nn.functional as F
    from gpu_transformer import Llama, Shape, absolute_paths
    if not _had_cublas_config:
        # gpu_transformer fixes cuBLAS's workspace for its bit-identity checks; timings want the default. cuBLAS
        # reads it when its first handle is made, which has not happened yet.
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    from daemon_process import DaemonProcess
except ImportError as e:  # no torch here: the helpers above still import
    _TORCH_ERROR = e
    Llama = DaemonProcess = object  # placeholders: the classes below are defined but not usable


class SdpaLlama(Llama):
    """``Llama`` whose prefill attention is ``scaled_dot_product_attention`` (causal, GQA in the kernel): the eager
    attention materialises [heads, T, S] scores, 64 GiB at 32K tokens. Decoding (``past``) keeps the eager one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attention_path = "sdpa enable_gqa"

    def attention(self, q, k, v, past):
        if past or q.shape[0] != k.shape[0]:
            return super().attention(q, k, v, past)
        q4, k4, v4 = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))  # [1, heads, T, D]
        if self.attention_path == "sdpa enable_gqa":
            try:
                with self._kernels(gqa=True):
                    out = F.scaled_dot_product_attention(q4, k4, v4, is_causal=True, enable_gqa=True)
                return out[0].transpose(0, 1)
            except torch.OutOfMemoryError:
                raise
            except RuntimeError as e:
                # No fused kernel took enable_gqa here: repeat the KV heads instead (a copy per layer, small next to
                # the prefill), never the math kernel, which would build the scores after all.
                print(f"  sdpa with enable_gqa refused ({str(e).splitlines()[0][:160]}); repeating KV heads instead",
                      flush=True)
                self.attention_path = "sdpa, KV heads repeated"
        group = self.shape.heads // self.shape.kv_heads
        k4, v4 = k4.repeat_interleave(group, dim=1), v4.repeat_interleave(group, dim=1)
        with self._kernels(gqa=False):
            out = F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)
        return out[0].transpose(0, 1)

    def _kernels(self, gqa: bool):
        """On a GPU, fused kernels only (flash takes GQA in the kernel); on a CPU, whatever torch picks."""
        if not str(self.device).startswith("cuda"):
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [SDPBackend.FLASH_ATTENTION] if gqa else [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                                                             SDPBackend.CUDNN_ATTENTION]
        return sdpa_kernel(backends)


def device_weights(shape: "Shape", device: str, seed: int) -> dict[str, "torch.Tensor"]:
    """bf16 weights drawn on the device (8B parameters in float32 on a CPU would take minutes and 32 GB), under
    ``make_weights``' names and with its spreads (standard deviations): projections fan_in ** -0.5, norms 1 + 0.1,
    embeddings 1. The values differ from ``make_weights``' (another generator); only the timing matters here."""
    h, d, i = shape.hidden, shape.head_dim, shape.intermediate
    g = torch.Generator(device=device).manual_seed(seed)

    def normal(*size: int, std: float, mean: float = 0.0) -> torch.Tensor:
        t = torch.randn(*size, device=device, dtype=torch.bfloat16, generator=g).mul_(std)
        return t.add_(mean) if mean else t

    w = {"model.embed_tokens.weight": normal(shape.vocab, h, std=1.0),
         "model.norm.weight": normal(h, std=0.1, mean=1.0),
         "lm_head.weight": normal(shape.vocab, h, std=h ** -0.5)}
    for layer in range(shape.layers):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = normal(h, std=0.1, mean=1.0)
        w[p + "self_attn.q_proj.weight"] = normal(shape.heads * d, h, std=h ** -0.5)
        w[p + "self_attn.k_proj.weight"] = normal(shape.kv_heads * d, h, std=h ** -0.5)
        w[p + "self_attn.v_proj.weight"] = normal(shape.kv_heads * d, h, std=h ** -0.5)
        w[p + "self_attn.o_proj.weight"] = normal(h, shape.heads * d, std=(shape.heads * d) ** -0.5)
        w[p + "post_attention_layernorm.weight"] = normal(h, std=0.1, mean=1.0)
        w[p + "mlp.gate_proj.weight"] = normal(i, h, std=h ** -0.5)
        w[p + "mlp.up_proj.weight"] = normal(i, h, std=h ** -0.5)
        w[p + "mlp.down_proj.weight"] = normal(h, i, std=i ** -0.5)
    return w


def kv_pages(kv: list, page_tokens: int) -> "torch.Tensor":
    """The KV (per layer (K, V), each [T, kv_heads, D]) as pages, flat bytes on its device: page p holds, for each
    layer, K then V of tokens p*page .. (p+1)*page, [token][kv head][dim]."""
    k0 = kv[0][0]
    tokens, heads, dim = k0.shape
    pages = tokens // page_tokens
    out = torch.empty((pages, len(kv), 2, page_tokens, heads, dim), dtype=k0.dtype, device=k0.device)
    for layer, (k, v) in enumerate(kv):
        out[:, layer, 0].copy_(k[:pages * page_tokens].view(pages, page_tokens, heads, dim))
        out[:, layer, 1].copy_(v[:pages * page_tokens].view(pages, page_tokens, heads, dim))
    return out.view(-1).view(torch.uint8)


class Daemon(DaemonProcess):
    """``DaemonProcess`` (127.0.0.1, port 0, its own slab folder) with a file L3 at ``l3_root`` when given. The L3
    folder outlives the daemon: the next one started on it serves its pages."""

    def __init__(self, host_size: str, l3_root: Optional[str]):
        super().__init__(host_size=host_size, store="file" if l3_root else "none")
        self.l3_root = l3_root

    def command(self) -> tuple[list[str], dict]:
        command, env = super().command()
        # The daemon runs in its own folder: relative paths of --daemon (".gpu/java", ".gpu/lib/*") made absolute.
        command = [absolute_paths(word) for word in command]
        return command + (["--file.root", self.l3_root] if self.l3_root else []), env


# -------------------------------------------------------------------------------------------------------- the run

class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.device = args.device
        self.cuda = self.device.startswith("cuda")
        self.shape = Shape(**(QUICK_SHAPE if args.quick else FULL_SHAPE))
        self.page_tokens = args.page_tokens
        self.lengths = args.lengths
        self.repeats = args.repeats
        s = self.shape
        self.page_bytes = kv_bytes_per_token(s.layers, s.kv_heads, s.head_dim) * self.page_tokens
        self.started = time.perf_counter()
        self.failures: list[str] = []
        self.notes: list[str] = [
            "random bf16 weights of the shape; RoPE (theta 500000) without Llama 3.1's long-context frequency "
            "scaling, which costs the same",
            "prefill_ms: the model's forward over the prompt (KV of every layer, logits of the last token), CUDA "
            "events; daemon_*_ms: one get of every page into pinned host memory plus one copy to the device, wall "
            "clock, after the write-behind to L3 finished; copy_ms: that copy alone"]
        self.pages: dict[int, torch.Tensor] = {}  # the prefill's KV per length, as pages (device, uint8)
        self.hashes: dict[int, list[bytes]] = {}
        self.prefill: dict[int, list[float]] = {}
        self.local: dict[int, list[float]] = {}
        self.tcp: dict[int, list[float]] = {}
        self.l3: dict[int, list[float]] = {}
        self.copy: dict[int, list[float]] = {}
        self.put_ms: dict[str, float] = {}
        self.served: list[dict] = []
        self.daemons: list[dict] = []
        self.extra: dict[str, Any] = {}
        self.attention_path = ""
        self.parameters = 0
        self.work: list[str] = []  # temporary folders, removed at the end

    def log(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.1f} s] {text}", flush=True)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def device_name(self) -> str:
        return torch.cuda.get_device_name(torch.device(self.device)) if self.cuda else "cpu"

    # ------------------------------------------------------------------------------------------------ prefill

    def run_prefill(self) -> None:
        s = self.shape
        started = time.perf_counter()
        with torch.no_grad():
            model = SdpaLlama(s, device_weights(s, self.device, SEED), self.device, torch.bfloat16)
        self.sync()
        self.parameters = sum(t.numel() for t in model.w.values())
        self.log(f"model {s.tag}: {self.parameters / 1e9:.2f} B parameters, bf16, on {self.device_name()} "
                 f"({time.perf_counter() - started:.1f} s to draw)")
        for length in self.lengths:
            tokens = torch.randint(0, s.vocab, (length,), generator=torch.Generator().manual_seed(prompt_seed(length)))
            on_device = tokens.to(self.device)
            times, kv = [], None
            with torch.no_grad():
                for i in range(self.repeats + 1):  # the first is the warm-up
                    kv = None  # the previous prefill's KV is freed before the next one runs
                    ms, (_, kv) = self.timed(lambda: model.prefill(on_device))
                    if i:
                        times.append(ms)
                self.pages[length] = kv_pages(kv, self.page_tokens)
            kv = None
            self.hashes[length] = hicache.page_hashes(tokens.tolist(), self.page_tokens)
            self.prefill[length] = times
            if self.cuda:
                torch.cuda.empty_cache()
                peak = f", peak {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB"
            else:
                peak = ""
            self.log(f"prefill {length:>6} tokens: median {median(times):8.1f} ms of {len(times)} "
                     f"({', '.join(f'{t:.1f}' for t in times)}); KV {self.pages[length].numel() / MIB:.0f} MiB in "
                     f"{len(self.hashes[length])} pages{peak}")
        self.attention_path = model.attention_path
        del model
        if self.cuda:
            torch.cuda.empty_cache()  # the weights go: the restores need only the pages and their buffers

    def timed(self, work):
        """(ms, work()): CUDA events on a GPU, the wall clock on a CPU."""
        if not self.cuda:
            started = time.perf_counter()
            out = work()
            return (time.perf_counter() - started) * 1e3, out
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        out = work()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)), out

    # ------------------------------------------------------------------------------------------------- daemon

    def place_slab(self, slab_bytes: int) -> str:
        """The slab's folder: /dev/shm (tmpfs, as the daemon expects) when it has room, else the system's temporary
        folder (a file in the page cache: the figures then say so in the notes)."""
        chosen = os.environ.get("HICACHE_TEST_TMPDIR")
        if chosen:
            self.notes.append(f"slab under HICACHE_TEST_TMPDIR={chosen} (as set)")
            return chosen
        shm = "/dev/shm"
        if os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > slab_bytes + 512 * MIB:
            return shm
        chosen = tempfile.gettempdir()
        free = shutil.disk_usage(shm).free if os.path.isdir(shm) else 0
        self.notes.append(f"/dev/shm has {free / 2 ** 30:.1f} GiB free, short of the {slab_bytes / 2 ** 30:.1f} GiB "
                          f"slab: slab under {chosen} ({mount_of(chosen)[1]}), not tmpfs")
        return chosen

    def start_daemon(self, name: str, host_size: str, l3_root: Optional[str]) -> Daemon:
        daemon = Daemon(host_size, l3_root)
        started = time.perf_counter()
        try:
            daemon.start()
        except unittest.SkipTest as e:
            raise SystemExit(f"no daemon: {e}") from None
        self.log(f"{name} on 127.0.0.1:{daemon.port}: slab {host_size} in {daemon.folder}, "
                 f"{'file L3 in ' + l3_root if l3_root else 'no L3'} ({time.perf_counter() - started:.1f} s to start)")
        return daemon

    def stop_daemon(self, daemon: Daemon, name: str) -> None:
        started = time.perf_counter()
        daemon.stop()  # SIGTERM: requests in flight finish, every page reaches L3 first
        rc = daemon.process.returncode if daemon.process is not None else None
        seconds = time.perf_counter() - started
        self.daemons.append({"daemon": name, "exit": rc, "stop_seconds": seconds})
        self.log(f"{name} stopped (SIGTERM): exit {rc} in {seconds:.1f} s")
        if rc not in (0, 143, -15):
            self.failures.append(f"{name} did not stop gracefully (exit {rc})")

    def clients(self, port: int) -> tuple[hicache.HiCacheClient, hicache.HiCacheClient]:
        """A same-host client (local=True: leases on the mapped slab, raises if it cannot map it) and a TCP-only one
        (local=False), both connected (the slab mapped) before anything is timed."""
        local = hicache.HiCacheClient("127.0.0.1", port, timeout_s=CALL_TIMEOUT_S, local=True)
        tcp = hicache.HiCacheClient("127.0.0.1", port, timeout_s=CALL_TIMEOUT_S, local=False)
        local.handshake()
        tcp.handshake()
        if local.local_slab_path is None or tcp.local_slab_path is not None:
            raise RuntimeError(f"same-host path: local client maps {local.local_slab_path}, TCP client maps "
                               f"{tcp.local_slab_path}")
        return local, tcp

    def namespace(self, client: hicache.HiCacheClient) -> hicache.Namespace:
        model = f"hicache-interop/ttft-random-llama-{self.shape.tag}"
        if client.protocol_version >= 3:
            return hicache.Namespace(model, dtype="bfloat16", order=hicache.LAYER_MAJOR, revision=f"seed-{SEED}",
                                     page_tokens=self.page_tokens)
        # Versions 1 and 2 carry no revision or page size: they go into the model id, which keeps pages apart the
        # same way.
        self.notes.append(f"the daemon speaks protocol version {client.protocol_version}: revision and page size in "
                          f"the model id")
        return hicache.Namespace(f"{model}@seed-{SEED}/p{self.page_tokens}", dtype="bfloat16",
                                 order=hicache.LAYER_MAJOR)

    def served_now(self, client: hicache.HiCacheClient) -> Optional[dict[str, float]]:
        try:
            return served_counts(client.stats(timeout_s=10))
        except hicache.HiCacheError as e:
            self.log(f"  the daemon's counters cannot be read: {e}")
            return None

    def wait_written_behind(self, client: hicache.HiCacheClient, what: str) -> None:
        """Until no page waits for L3: a write-behind running beside a timed restore would share its cores and
        memory bandwidth."""
        started = time.perf_counter()
        pending: Optional[float] = None
        while time.perf_counter() - started < DRAIN_TIMEOUT_S:
            try:
                pending = prom_sum(client.stats(timeout_s=10), PENDING)
            except hicache.HiCacheError as e:
                self.notes.append(f"{what}: the write-behind's progress cannot be read ({e})")
                return
            if pending is None:
                self.notes.append(f"{what}: the daemon reports no {PENDING}; restores may overlap its write-behind")
                return
            if pending == 0:
                self.log(f"  write-behind to L3 done ({time.perf_counter() - started:.1f} s waited)")
                return
            time.sleep(0.2)
        self.notes.append(f"{what}: {pending:.0f} pages still not in L3 after {DRAIN_TIMEOUT_S:.0f} s")
        self.log(f"  write-behind: {pending:.0f} pages still pending after {DRAIN_TIMEOUT_S:.0f} s; going on")

    # ------------------------------------------------------------------------------------------------ restores

    def restore(self, client: hicache.HiCacheClient, ns: hicache.Namespace, length: int, host: torch.Tensor,
                device: torch.Tensor, poison: int, what: str) -> float:
        """Poisons both buffers, then: get every page into ``host``, copy it to ``device``; timed from the get to the
        copy's end. Then checks every status and every byte against the prefill's pages. Returns ms."""
        hashes = self.hashes[length]
        base = host.data_ptr()
        targets = [(base + offset, size) for offset, size in page_spans(len(hashes), self.page_bytes)]
        host.fill_(poison)
        device.fill_(poison ^ 0xFF)  # not the host's: a copy that did not happen shows
        self.sync()
        started = time.perf_counter()
        statuses = client.get(ns, hashes, targets)
        device.copy_(host, non_blocking=True)
        self.sync()
        ms = (time.perf_counter() - started) * 1e3
        bad = [s for s in statuses if s != hicache.Status.OK]
        if bad:
            kinds = ", ".join(sorted({s.name for s in bad}))
            self.failures.append(f"{what} {length}: {len(bad)} of {len(hashes)} pages not OK ({kinds}); "
                                 f"{client.last_error or ''}")
        elif not torch.equal(device, self.pages[length]):
            differing = int((device != self.pages[length]).sum())
            self.failures.append(f"{what} {length}: {differing} bytes differ from the prefill's KV")
        return ms

    def copy_reference(self, host: torch.Tensor, device: torch.Tensor) -> list[float]:
        times = []
        for _ in range(self.repeats):
            self.sync()
            started = time.perf_counter()
            device.copy_(host, non_blocking=True)
            self.sync()
            times.append((time.perf_counter() - started) * 1e3)
        return times

    def run_daemon(self) -> None:
        total = sum(p.numel() for p in self.pages.values())
        biggest = max(p.numel() for p in self.pages.values())
        mib = slab_mib(total)
        host_size = f"{mib}MiB"
        os.environ["HICACHE_TEST_TMPDIR"] = self.place_slab(mib * MIB)
        l3_root: Optional[str] = None
        if not self.args.skip_l3:
            tmp = tempfile.gettempdir()
            if shutil.disk_usage(tmp).free > 2 * total + 2 ** 30:
                l3_root = tempfile.mkdtemp(prefix="gpu-ttft-l3-", dir=tmp)
                self.work.append(l3_root)
                point, fs = mount_of(l3_root)
                self.extra["l3"] = {"root": l3_root, "mount": point, "fs": fs}
                if fs in ("tmpfs", "ramfs"):
                    self.notes.append(f"the file L3 is on {fs} ({point}): its reads are memory reads")
            else:
                self.notes.append(f"L3 row skipped: {tmp} has {shutil.disk_usage(tmp).free / 2 ** 30:.1f} GiB free, "
                                  f"short of twice the {total / 2 ** 30:.1f} GiB of pages")
        self.extra["slab"] = {"size": host_size, "folder": os.environ["HICACHE_TEST_TMPDIR"],
                              "fs": mount_of(os.environ["HICACHE_TEST_TMPDIR"])[1]}
        # One pinned host buffer and one device buffer of the largest length's size, shared by every length: the
        # put's source and then the restores' targets.
        host = torch.empty(biggest, dtype=torch.uint8, pin_memory=self.cuda)
        device = torch.empty(biggest, dtype=torch.uint8, device=self.device)

        daemon = self.start_daemon("daemon 1", host_size, l3_root)
        try:
            local, tcp = self.clients(daemon.port)
            ns = self.namespace(tcp)
            self.extra["namespace"] = repr(ns)
            self.extra["protocol_version"] = tcp.protocol_version
            self.extra["slab_path"] = local.local_slab_path
            for length in self.lengths:
                self.put(local, ns, length, host[:self.pages[length].numel()])
            if l3_root:
                self.wait_written_behind(tcp, "daemon 1")
            for length in self.lengths:
                n = self.pages[length].numel()
                h, d = host[:n], device[:n]
                self.copy[length] = self.copy_reference(h, d)
                for name, client, out in (("daemon_local", local, self.local), ("daemon_tcp", tcp, self.tcp)):
                    before = self.served_now(tcp)
                    out[length] = [self.restore(client, ns, length, h, d, (0x5A + r) & 0xFF, name)
                                   for r in range(self.repeats)]
                    self.note_served("L2", name, length, before, self.served_now(tcp))
                self.log(f"restore {length:>6} tokens ({n / MIB:.0f} MiB): local {median(self.local[length]):8.1f} ms, "
                         f"tcp {median(self.tcp[length]):8.1f} ms, H2D copy {median(self.copy[length]):7.1f} ms, "
                         f"prefill {median(self.prefill[length]):8.1f} ms")
            if l3_root:
                self.wait_written_behind(tcp, "daemon 1, before its stop")
            local.close()
            tcp.close()
        finally:
            self.stop_daemon(daemon, "daemon 1")
        if l3_root:
            self.run_l3(host_size, l3_root, host, device)

    def put(self, client: hicache.HiCacheClient, ns: hicache.Namespace, length: int, host: torch.Tensor) -> None:
        host.copy_(self.pages[length])
        self.sync()
        hashes = self.hashes[length]
        spans = page_spans(len(hashes), self.page_bytes)
        base = host.data_ptr()
        started = time.perf_counter()
        counts: dict[str, int] = {}
        for batch in batches(len(hashes), PUT_BATCH_PAGES):
            statuses = client.put(ns, [hashes[i] for i in batch], [(base + spans[i][0], spans[i][1]) for i in batch])
            for s in statuses:
                counts[s.name] = counts.get(s.name, 0) + 1
        seconds = time.perf_counter() - started
        self.put_ms[str(length)] = seconds * 1e3
        bad = {k: v for k, v in counts.items() if k not in ("OK", "EXISTS")}
        self.log(f"put {length:>6} tokens: {len(hashes)} pages ({counts}) in {seconds * 1e3:.0f} ms")
        if bad:
            self.failures.append(f"put {length}: pages not stored: {bad}; {client.last_error or ''}")

    def note_served(self, tier: str, path: str, length: int, before, after) -> None:
        served = served_delta(before, after)
        self.served.append({"tier": tier, "path": path, "tokens": length, **served})
        if tier == "L2" and (served["from_l3"] > 0 or served["misses"] > 0):
            self.notes.append(f"{path} {length}: the daemon served {served['from_l3']} pages from L3 and missed "
                              f"{served['misses']}: those restores were not all from the slab")

    def run_l3(self, host_size: str, l3_root: str, host: torch.Tensor, device: torch.Tensor) -> None:
        """A second daemon on the same file L3, with an empty slab; the L3 files dropped from the page cache first,
        so that each length's one restore reads every page from the disk through L3."""
        started = time.perf_counter()
        advised = drop_page_cache(l3_root)
        self.extra["l3"]["files_dropped_from_page_cache"] = advised
        self.log(f"L3: {advised} files fsynced and dropped from the page cache in "
                 f"{time.perf_counter() - started:.1f} s")
        if not advised:
            self.notes.append("the L3 files could not be dropped from the page cache: L3 reads may be memory reads")
        daemon = self.start_daemon("daemon 2 (empty slab, same L3)", host_size, l3_root)
        try:
            local, tcp = self.clients(daemon.port)
            ns = self.namespace(tcp)
            for length in self.lengths:
                n = self.pages[length].numel()
                before = self.served_now(tcp)
                self.l3[length] = [self.restore(local, ns, length, host[:n], device[:n], 0xC3, "daemon_l3")]
                after = self.served_now(tcp)
                self.note_served("L3", "daemon_local", length, before, after)
                from_l3 = served_delta(before, after)["from_l3"]
                self.log(f"restore {length:>6} tokens through L3: {self.l3[length][0]:8.1f} ms "
                         f"({from_l3} of {len(self.hashes[length])} pages from L3 by the daemon's count)")
                if 0 <= from_l3 < len(self.hashes[length]):
                    self.notes.append(f"daemon_l3 {length}: the daemon counts {from_l3} of "
                                      f"{len(self.hashes[length])} pages served from L3")
            local.close()
            tcp.close()
        finally:
            self.stop_daemon(daemon, "daemon 2")

    # ------------------------------------------------------------------------------------------------- report

    def result(self, error: Optional[str] = None) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {
            "device": self.device_name(), "torch": torch.__version__, "python": platform.python_version(),
            "shape": {**dataclasses.asdict(s), "dtype": "bfloat16", "seed": SEED, "parameters": self.parameters,
                      "kv_bytes_per_token": kv_bytes_per_token(s.layers, s.kv_heads, s.head_dim)},
            "attention": self.attention_path, "page_tokens": self.page_tokens, "page_bytes": self.page_bytes,
            "lengths": list(self.lengths), "repeats": self.repeats,
            "bytes": {str(t): int(p.numel()) for t, p in self.pages.items()},
            "pages": {str(t): len(h) for t, h in self.hashes.items()},
        }
        for key, table in (("prefill", self.prefill), ("daemon_local", self.local), ("daemon_tcp", self.tcp),
                           ("daemon_l3", self.l3), ("copy", self.copy)):
            if table or key != "daemon_l3":
                out[f"{key}_ms"], out[f"{key}_all_ms"] = ms_table(table)
        complete = (error is None and all(t in self.local and t in self.tcp for t in self.lengths)
                    and (self.args.skip_l3 or "l3" not in self.extra or all(t in self.l3 for t in self.lengths)))
        failures = self.failures + ([f"the run stopped: {error}"] if error else [])
        if not complete and not failures:
            failures.append("not every restore ran")
        out.update(put_ms=self.put_ms, served=self.served, daemons=self.daemons, **self.extra,
                   verified=complete and not failures, failures=failures, notes=self.notes,
                   total_seconds=time.perf_counter() - self.started)
        return out


def parse_lengths(text: str) -> list[int]:
    return [int(word) for word in text.split(",") if word.strip()]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemon", help="the command that runs `hicache serve` (default: the checkout's "
                                         "./hicache serve, built)")
    parser.add_argument("--out", required=True, help="folder for ttft_python.json")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="a small model and prompts of 256 and 1024 tokens")
    parser.add_argument("--lengths", type=parse_lengths,
                        help=f"prompt lengths, comma-separated (default {','.join(map(str, FULL_LENGTHS))}; --quick "
                             f"{','.join(map(str, QUICK_LENGTHS))})")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure (median reported)")
    parser.add_argument("--page-tokens", type=int, default=16, help="tokens per page")
    parser.add_argument("--skip-l3", action="store_true", help="no file L3 and no L3 row")
    args = parser.parse_args(argv)
    if _TORCH_ERROR is not None:
        raise SystemExit(f"needs torch: {_TORCH_ERROR}")
    args.lengths = sorted(set(args.lengths or (QUICK_LENGTHS if args.quick else FULL_LENGTHS)))
    if args.repeats < 1 or args.page_tokens < 1:
        parser.error("--repeats and --page-tokens must be positive")
    uneven = [t for t in args.lengths if t <= 0 or t % args.page_tokens]
    if uneven:
        parser.error(f"lengths {uneven} are not positive multiples of --page-tokens {args.page_tokens}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no GPU (use --device cpu)")
    if args.daemon:
        os.environ["HICACHE_DAEMON_CMD"] = args.daemon
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = Run(args)
    error: Optional[str] = None
    try:
        run.run_prefill()
        run.run_daemon()
    except (Exception, SystemExit) as e:  # the figures so far are still written
        traceback.print_exc()
        error = f"{type(e).__name__}: {e}"
    finally:
        for folder in run.work:
            shutil.rmtree(folder, ignore_errors=True)
    result = run.result(error)
    path = out_dir / "ttft_python.json"
    path.write_text(json.dumps(result, indent=2))
    print()
    for note in result["notes"]:
        print(f"note: {note}")
    for line in format_table(result):
        print(line)
    print(f"({result['total_seconds']:.1f} s; {path})", flush=True)
    return 0 if result["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
