"""The vLLM connector (``hicache.vllm``) on a GPU, with PyTorch: KV caches shaped as vLLM's attention backends shape
them, on the GPU, saved through the connector's worker side into the daemon and loaded by a second "vLLM instance"
into other block ids of a second cache; every byte compared on the GPU.

    python3 clients/python/interop/gpu_vllm.py --daemon "bash .gpu/java -cp '.gpu/lib/*' io.hicache.cli.HiCacheCli serve" --out DIR

Starts the daemon itself (no L3, slab in /dev/shm). Each case drives both sides of the connector as vLLM does
(``tests/fake_vllm.py`` names the vLLM functions): the scheduler side offers the blocks
(``get_num_new_matched_tokens``, ``update_state_after_alloc``, ``build_connector_meta``), the worker side saves
them (``save_kv_layer`` per layer, ``wait_for_save``) and loads them (``start_load_kv``,
``get_block_ids_with_load_errors``). Cases: FlashAttention ``[2, N, B, H, D]`` in NHD and HND memory order, over the
same-host path and TCP, a staging buffer smaller than the batch (chunks), FlashInfer ``[N, 2, B, H, D]``, MLA
``[N, B, D]``, and a load of which two pages were removed after the lookup (exactly those two blocks must be
reported, the others intact). Prints a table, writes DIR/gpu_vllm.json, exits 1 if any byte differs or any count is
wrong. ``--device cpu`` runs it without a GPU (smaller caches; host caches move in place and through staging).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import torch  # noqa: E402

import fake_vllm  # noqa: E402
from daemon_process import DaemonProcess  # noqa: E402
from hicache import HiCacheClient  # noqa: E402
from hicache.vllm.config import block_keys  # noqa: E402


def absolute_paths(word: str) -> str:
    """``word`` with each ``:``-separated part that is a relative path under an existing folder made absolute (the
    daemon runs in a temporary folder), as ``gpu_transformer.py`` does."""
    if word.startswith("-") or "/" not in word:
        return word
    return ":".join(os.path.abspath(part) if part and not os.path.isabs(part) and "/" in part
                    and os.path.isdir(os.path.dirname(part)) else part for part in word.split(":"))


class Sizes:
    def __init__(self, device: str):
        gpu = device != "cpu"
        self.layers = 32 if gpu else 4
        self.heads = 8 if gpu else 2
        self.head_dim = 128 if gpu else 64
        self.mla_dim = 576 if gpu else 96
        self.block = 16
        self.mla_block = 64 if gpu else 16
        self.num_blocks = 640 if gpu else 96
        self.moved = 256 if gpu else 40
        self.host_size = "6GiB" if gpu else "512MiB"


def make_cache(backend: str, layout: str, sizes: Sizes, block: int, device: str,
               fill: bool) -> tuple[dict[str, Any], list[Any]]:
    """One worker's caches: per layer a logical view of memory laid out in vLLM's stride order
    (``fake_vllm.kv_cache_shape`` / ``stride_order``), random bytes or zeros; and that memory, as bytes."""
    heads, dim = (1, sizes.mla_dim) if backend == "mla" else (sizes.heads, sizes.head_dim)
    shape = fake_vllm.kv_cache_shape(backend, sizes.num_blocks, block, heads, dim)
    strides = fake_vllm.kv_cache_strides(backend, layout, shape)
    total = 1
    for n in shape:
        total *= n
    caches, memory = {}, []
    for layer in range(sizes.layers):
        if fill:
            raw = torch.randint(0, 256, (total * 2,), dtype=torch.uint8, device=device)
        else:
            raw = torch.zeros(total * 2, dtype=torch.uint8, device=device)
        memory.append(raw)
        caches[fake_vllm.layer_name(layer)] = raw.view(torch.bfloat16).as_strided(shape, strides)
    return caches, memory


def parts_of(backend: str, tensor: Any) -> list[Any]:
    """The K and V (or MLA latent) views ``[num_blocks, ...]`` of one layer, as bytes."""
    if backend == "flash_attn":
        views = [tensor[0], tensor[1]]
    elif backend == "flashinfer":
        views = [tensor[:, 0], tensor[:, 1]]
    else:
        views = [tensor]
    return [v.view(torch.uint8) for v in views]


def connector(config: Any, role: Any, staging_on_host: bool = False) -> Any:
    groups = fake_vllm.KVCacheConfig(0, [fake_vllm.KVCacheGroupSpec([])])
    made = fake_vllm.create_connector(config, role, groups)
    if role is fake_vllm.KVConnectorRole.WORKER:
        made.worker_side.staging_on_host = staging_on_host
    return made


def sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def one_request(scheduler: Any, req_id: str, tokens: list[int], hasher: Any) -> tuple[Any, int]:
    """A new request and the tokens the scheduler side offers for it (``get_num_new_matched_tokens``, nothing
    computed locally)."""
    request = fake_vllm.Request(req_id, tokens, hasher)
    matched, _ = scheduler.get_num_new_matched_tokens(request, 0)
    return request, matched or 0


def run_case(name: str, backend: str, layout: str, local: bool, port: int, sizes: Sizes, device: str,
             staging_bytes: int = 1 << 30, staged_on_host: bool = False, drop: tuple[int, ...] = ()) -> dict[str, Any]:
    """Two rounds with other tokens each: the first warms up (pinned buffers, the daemon's slab), the second is
    timed. Both are checked."""
    block = sizes.mla_block if backend == "mla" else sizes.block
    extra = {"port": port, "local": local, "timeout_s": 120, "weights_revision": "gpu-run",
             "staging_bytes": staging_bytes}
    model = f"gpu-vllm/{name}/{os.getpid()}/{time.time_ns()}"
    config = fake_vllm.VllmConfig(
        fake_vllm.ModelConfig(model=model, dtype=fake_vllm.BFLOAT16, use_mla=backend == "mla"),
        fake_vllm.CacheConfig(block_size=block), fake_vllm.ParallelConfig(),
        fake_vllm.KVTransferConfig(kv_connector_extra_config=dict(extra)))
    hasher = fake_vllm.get_request_block_hasher(block)
    src_ids = list(range(0, 2 * sizes.moved, 2))  # every other block of the source
    dst_ids = list(range(sizes.num_blocks - 1, sizes.num_blocks - 1 - sizes.moved, -1))  # from the end, reversed
    source, _ = make_cache(backend, layout, sizes, block, device, fill=True)
    target, target_memory = make_cache(backend, layout, sizes, block, device, fill=False)
    # One "vLLM instance" writes, another reads: each a scheduler-side and a worker-side connector.
    writer_scheduler = connector(config, fake_vllm.KVConnectorRole.SCHEDULER)
    writer = connector(config, fake_vllm.KVConnectorRole.WORKER, staged_on_host)
    writer.register_kv_caches(dict(reversed(list(source.items()))))
    reader_scheduler = connector(config, fake_vllm.KVConnectorRole.SCHEDULER)
    reader = connector(config, fake_vllm.KVConnectorRole.WORKER, staged_on_host)
    reader.register_kv_caches(target)
    page_bytes = writer.worker_side.layout.page_bytes
    staged = writer.worker_side.mover is not None
    namespace = writer.worker_side.namespace
    rounds = []
    for round_ in range(2):
        tokens = [(i * 7919 + round_ * 104729 + 1) % 30000 for i in range(sizes.moved * block + 1)]
        for memory in target_memory:
            memory.zero_()
        sync(device)
        # -------- the writer: its scheduler offers nothing; its worker saves the blocks as vLLM computes them
        request, _ = one_request(writer_scheduler, f"w{round_}", tokens, hasher)
        blocks = src_ids + [2 * sizes.moved + 1]
        writer_scheduler.update_state_after_alloc(request, fake_vllm.KVCacheBlocks(blocks), 0)
        meta = writer_scheduler.build_connector_meta(fake_vllm.SchedulerOutput(
            [fake_vllm.NewRequestData(request.request_id, tokens, (blocks,), 0)],
            fake_vllm.CachedRequestData([], set(), [], [], []), {request.request_id: len(tokens)}, set()))
        saved_before = writer.stats().get("blocks_saved", 0)
        start = time.perf_counter()
        writer.bind_connector_metadata(meta)
        writer.start_load_kv(None)
        for layer_name, tensor in source.items():
            writer.wait_for_layer_load(layer_name)
            writer.save_kv_layer(layer_name, tensor, None)
        writer.wait_for_save()
        writer.clear_connector_metadata()
        writer.worker_side._wait_pending()  # the last put runs in the background: wait for it to time it
        save_seconds = time.perf_counter() - start
        saved = writer.stats().get("blocks_saved", 0) - saved_before
        # -------- the reader: its scheduler finds the blocks; its worker loads them into other blocks
        request, matched = one_request(reader_scheduler, f"r{round_}", tokens, hasher)
        if drop:
            with HiCacheClient(port=port, timeout_s=30) as client:
                keys = block_keys(request.block_hashes, 1)
                client.delete(namespace, [keys[i] for i in drop])
        blocks = dst_ids + [0]
        reader_scheduler.update_state_after_alloc(request, fake_vllm.KVCacheBlocks(blocks), matched)
        meta = reader_scheduler.build_connector_meta(fake_vllm.SchedulerOutput(
            [fake_vllm.NewRequestData(request.request_id, tokens, (blocks,), matched)],
            fake_vllm.CachedRequestData([], set(), [], [], []), {request.request_id: 1}, set()))
        loaded_before = reader.stats().get("blocks_loaded", 0)
        start = time.perf_counter()
        reader.bind_connector_metadata(meta)
        reader.start_load_kv(None)
        sync(device)
        load_seconds = time.perf_counter() - start
        errors = reader.get_block_ids_with_load_errors()
        reader.wait_for_save()
        reader.clear_connector_metadata()
        loaded = reader.stats().get("blocks_loaded", 0) - loaded_before
        # -------- every byte, on the device: source block src_ids[i] against target block dst_ids[i]
        expected_errors = {dst_ids[i] for i in drop}
        good = [i for i in range(sizes.moved) if i not in drop]
        src_index = torch.tensor([src_ids[i] for i in good], dtype=torch.int64, device=device)
        dst_index = torch.tensor([dst_ids[i] for i in good], dtype=torch.int64, device=device)
        differing = 0
        for layer_name in source:
            for a, b in zip(parts_of(backend, source[layer_name]), parts_of(backend, target[layer_name])):
                differing += int((a.index_select(0, src_index) != b.index_select(0, dst_index)).sum().item())
        rounds.append({"matched": matched, "saved": saved, "loaded": loaded, "errors": errors,
                       "expected_errors": expected_errors, "differing": differing,
                       "save_seconds": save_seconds, "load_seconds": load_seconds})
    for made in (writer, reader, writer_scheduler, reader_scheduler):
        made.shutdown()
    timed = rounds[-1]
    moved_bytes = sizes.moved * page_bytes
    ok = all(r["differing"] == 0 and r["saved"] == sizes.moved and r["matched"] == sizes.moved * block
             and r["loaded"] == sizes.moved - len(drop) and r["errors"] == r["expected_errors"] for r in rounds)
    return {"case": name, "backend": backend, "layout": layout, "path": "local" if local else "tcp",
            "staging": "pinned" if staged and device != "cpu" else "host" if staged else "in place",
            "blocks": sizes.moved, "page_bytes": page_bytes, "matched_tokens": timed["matched"],
            "saved": timed["saved"], "loaded": timed["loaded"], "load_errors": len(timed["errors"]),
            "expected_errors": len(timed["expected_errors"]),
            "errors_exact": all(r["errors"] == r["expected_errors"] for r in rounds),
            "bytes_differing": sum(r["differing"] for r in rounds),
            "save_gbps": moved_bytes / timed["save_seconds"] / 1e9,
            "load_gbps": moved_bytes / timed["load_seconds"] / 1e9, "ok": ok}


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--daemon",
                      help="the command that runs `hicache serve` (default: the checkout's ./hicache serve)")
    args.add_argument("--out", required=True)
    args.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    a = args.parse_args()
    if a.daemon:
        os.environ["HICACHE_DAEMON_CMD"] = " ".join(shlex.quote(absolute_paths(w)) for w in shlex.split(a.daemon))
    sizes = Sizes(a.device)
    daemon = DaemonProcess(host_size=sizes.host_size)
    daemon.start()
    results = []
    try:
        cases = [("fa-nhd", "flash_attn", "NHD", True, {}), ("fa-nhd-tcp", "flash_attn", "NHD", False, {}),
                 ("fa-hnd", "flash_attn", "HND", True, {}),
                 ("fa-nhd-chunks", "flash_attn", "NHD", True, {"staging_bytes": 16 * 2 * sizes.layers * sizes.block
                                                               * sizes.heads * sizes.head_dim * 2}),
                 ("flashinfer", "flashinfer", "NHD", True, {}), ("mla", "mla", "NHD", True, {}),
                 ("fa-nhd-2-dropped", "flash_attn", "NHD", True, {"drop": (5, 9)})]
        if a.device == "cpu":
            cases = [(n, b, l, loc, dict(kw, staging_bytes=max(kw.get("staging_bytes", 1 << 30), 1 << 20)))
                     for n, b, l, loc, kw in cases]
            cases += [(n + "-staged", b, l, loc, dict(kw, staged_on_host=True)) for n, b, l, loc, kw in cases]
        for name, backend, layout, local, kwargs in cases:
            results.append(run_case(name, backend, layout, local, daemon.port, sizes, a.device, **kwargs))
            print(f"  {name}: {'ok' if results[-1]['ok'] else 'FAILED'}", flush=True)
    finally:
        daemon.stop()
    device = torch.cuda.get_device_name(0) if a.device != "cpu" else "cpu"
    print(f"{device}, torch {torch.__version__}: {sizes.layers} layers, {sizes.moved} blocks a case, bf16; "
          "figures of the second (warm) round, bytes of both")
    header = (f"{'case':22} {'path':5} {'staging':8} {'page':>9} {'saved':>5} {'loaded':>6} {'errors':>6} "
              f"{'differing':>9} {'save GB/s':>9} {'load GB/s':>9}")
    print(header)
    for r in results:
        print(f"{r['case']:22} {r['path']:5} {r['staging']:8} {r['page_bytes']:>9} {r['saved']:>5} {r['loaded']:>6} "
              f"{r['load_errors']:>6} {r['bytes_differing']:>9} {r['save_gbps']:>9.2f} {r['load_gbps']:>9.2f}")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "gpu_vllm.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                           "results": results}, indent=2))
    failed = [r for r in results if not r["ok"]]
    print("FAILED: " + ", ".join(r["case"] for r in failed) if failed else "every byte checked: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
