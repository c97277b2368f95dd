"""SGLang's hybrid models and its backup path on a GPU machine, with PyTorch and a daemon on the same host.

1. Hybrid prefixes through the daemon and back: pinned torch host pools of SGLang's hybrid shapes (the KV, a
   sliding-window KV pool, a Mamba state pool and a DSA indexer pool; the shapes of ``fake_sglang`` and
   ``fake_sglang_hybrid``, over pinned memory), filled from the GPU, backed up and prefetched as SGLang's
   ``HybridCacheController`` does (``fake_sglang_hybrid.FakeHybridController``), into a second set of pools, copied
   back to the GPU and compared there, every byte, on the same-host path and over TCP.
2. The backup path's rows: ``batch_set_v1`` and ``batch_get_v1`` of 16 pages of 8 MiB (64 tokens of 32 layers x 8
   KV heads x 128, bf16, page_first) from a pinned pool on the same host, against one thread's memcpy of the same
   pages from the same pool, rounds alternating, medians.

    python3 clients/python/interop/gpu_hybrid.py --daemon "bash .gpu/java -cp '.gpu/lib/*' io.hicache.cli.HiCacheCli serve" --out DIR

Writes DIR/gpu_hybrid.json and prints a table. Exits 1 if any byte differs or any page fails.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import torch  # noqa: E402

import fake_sglang  # noqa: E402
import fake_sglang_hybrid as hybrid  # noqa: E402
from daemon_process import DaemonProcess  # noqa: E402
from hicache.sglang import HiCacheDaemonStorage  # noqa: E402

ROUNDS = 7


def pinned(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


def over_pinned(array_type, tensor: torch.Tensor):
    return array_type.from_address(tensor.data_ptr())


class PinnedKvPool(fake_sglang.FakeMHATokenToKVPoolHost):
    """SGLang's MHA host pool (page_first) over one pinned tensor."""

    def __init__(self, layer_num: int, page_size: int, pages: int):
        super().__init__("page_first", layer_num=layer_num, head_num=8, head_dim=128, size=pages * page_size,
                         page_size=page_size, dtype=fake_sglang.BFLOAT16)
        self.tensors = [pinned(ctypes.sizeof(self.kv_buffer))]
        self.kv_buffer = over_pinned(type(self.kv_buffer), self.tensors[0])
        self.base = self.tensors[0].data_ptr()


class PinnedMambaPool(hybrid.FakeMambaPoolHost):
    """SGLang's ``MambaPoolHost`` over pinned tensors: a temporal state and two conv states per slot and layer."""

    def __init__(self):
        super().__init__(size=16, layer_num=24, temporal_bytes=64 << 10, conv_bytes=(24 << 10, 8 << 10))
        self.tensors = [pinned(ctypes.sizeof(b)) for b in self.buffers]
        self.buffers = [over_pinned(type(b), t) for b, t in zip(self.buffers, self.tensors)]


class PinnedIndexerPool(hybrid.FakeDSAIndexerPoolHost):
    """SGLang's ``DSAIndexerPoolHost`` over a pinned tensor."""

    def __init__(self, page_size: int, pages: int):
        super().__init__(size=pages * page_size, page_size=page_size, layer_num=32, stride=64 * 132)
        self.tensors = [pinned(ctypes.sizeof(self.buffer))]
        self.buffer = over_pinned(type(self.buffer), self.tensors[0])


def pools(page_size: int, pages: int) -> dict:
    return {"kv": PinnedKvPool(16, page_size, pages), "swa": PinnedKvPool(4, page_size, pages),
            "mamba": PinnedMambaPool(), "indexer": PinnedIndexerPool(page_size, pages)}


def backend(port: int, local: bool, model: str) -> HiCacheDaemonStorage:
    extra = {"port": port, "local": local, "timeout_s": 60, "model": model}
    return HiCacheDaemonStorage(fake_sglang.storage_config(model_name=model, extra_config=extra), extra)


def hybrid_round_trip(port: int, local: bool) -> dict:
    """A prefix of 12 pages (64 tokens each) backed up by one engine and prefetched by another; compared on the GPU."""
    page, pages = 64, 12
    model = f"gpu/hybrid/{'local' if local else 'tcp'}"
    source, target = pools(page, 2 * pages), pools(page, 2 * pages)
    on_gpu = {name: [torch.randint(0, 256, (t.numel(),), dtype=torch.uint8, device="cuda") for t in pool.tensors]
              for name, pool in source.items()}
    for name, pool in source.items():
        for tensor, data in zip(pool.tensors, on_gpu[name]):
            tensor.copy_(data)  # device to pinned host, as a backup of the device pools would
    torch.cuda.synchronize()
    writer = hybrid.FakeHybridController(backend(port, local, model), source["kv"], source["swa"], source["mamba"],
                                         source["indexer"], swa_window_pages=4)
    reader = hybrid.FakeHybridController(backend(port, local, model), target["kv"], target["swa"], target["mamba"],
                                         target["indexer"], swa_window_pages=4)
    keys = [os.urandom(32).hex() for _ in range(pages)]
    start = time.perf_counter()
    stored = writer.backup(keys, list(range(pages)), 3, list(range(pages - 4, pages)))
    backup_s = time.perf_counter() - start
    hit = reader.storage_hit_query(keys + [os.urandom(32).hex() for _ in range(4)])
    start = time.perf_counter()
    # into other places: KV and indexer pages from page `pages` on, the state into slot 9, the window likewise
    got = reader.prefetch(keys, list(range(pages, 2 * pages)), 9, list(range(2 * pages - 4, 2 * pages)))
    prefetch_s = time.perf_counter() - start
    back = {name: [t.to("cuda") for t in pool.tensors] for name, pool in target.items()}
    torch.cuda.synchronize()
    wrong = 0
    src, dst = source["kv"], target["kv"]
    part = src.layer_num * page * src.head_num * src.head_dim * 2  # one page's K (or V) in page_first
    half = src.size * src.layer_num * src.head_num * src.head_dim * 2
    for i in range(pages):
        for p in range(2):
            a, b = p * half + i * part, p * half + (pages + i) * part
            wrong += not torch.equal(on_gpu["kv"][0][a:a + part], back["kv"][0][b:b + part])
    swa = source["swa"]
    spart = swa.layer_num * page * swa.head_num * swa.head_dim * 2
    shalf = swa.size * swa.layer_num * swa.head_num * swa.head_dim * 2
    for k in range(4):
        for p in range(2):
            a, b = p * shalf + (pages - 4 + k) * spart, p * shalf + (2 * pages - 4 + k) * spart
            wrong += not torch.equal(on_gpu["swa"][0][a:a + spart], back["swa"][0][b:b + spart])
    for data, got_back, width in zip(on_gpu["mamba"], back["mamba"], source["mamba"].widths):
        wrong += not torch.equal(data[3 * width:4 * width], got_back[9 * width:10 * width])
    ipb = source["indexer"].page_bytes
    wrong += not torch.equal(on_gpu["indexer"][0][:pages * ipb], back["indexer"][0][pages * ipb:2 * pages * ipb])
    for ctl in (writer, reader):
        ctl.backend.close()
    nbytes = sum(t.numel() for pool in source.values() for t in pool.tensors) // 2
    return {"path": "local" if local else "tcp", "pages": pages, "stored": stored, "hit_pages": hit, "read": got,
            "parts_wrong": wrong, "backup_s": backup_s, "prefetch_s": prefetch_s, "pool_bytes": nbytes}


def backup_rows(port: int) -> list:
    """batch_set_v1 / batch_get_v1 of 16 pages of 8 MiB on the same host against one thread's memcpy of them."""
    page, pages = 64, 16
    pool = PinnedKvPool(32, page, 2 * pages)  # 8 MiB pages
    pool.tensors[0].copy_(torch.randint(0, 256, (pool.tensors[0].numel(),), dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    store = backend(port, True, "gpu/backup-path")
    store.register_mem_pool_host(pool)
    slots = torch.arange(pages * page, dtype=torch.int64)
    other = torch.arange(pages * page, 2 * pages * page, dtype=torch.int64)
    ptrs, sizes = pool.get_page_buffer_meta(fake_sglang.FakeIndices(range(pages * page)))
    target = pinned(sum(sizes))
    stored_keys = [os.urandom(32).hex() for _ in range(pages)]
    if not all(store.batch_set_v1(stored_keys, slots)):
        raise RuntimeError("the pages to read could not be stored")
    nbytes = sum(sizes)

    def memcpy() -> float:
        at = target.data_ptr()
        start = time.perf_counter()
        for ptr, size in zip(ptrs, sizes):
            ctypes.memmove(at, ptr, size)
            at += size
        return time.perf_counter() - start

    def set_v1() -> float:
        keys = [os.urandom(32).hex() for _ in range(pages)]
        start = time.perf_counter()
        ok = store.batch_set_v1(keys, slots)
        seconds = time.perf_counter() - start
        if not all(ok):
            raise RuntimeError("batch_set_v1 failed a page")
        return seconds

    def get_v1() -> float:
        start = time.perf_counter()
        ok = store.batch_get_v1(stored_keys, other)
        seconds = time.perf_counter() - start
        if not all(ok):
            raise RuntimeError("batch_get_v1 failed a page")
        return seconds

    rows = []
    for name, subject in (("python_sglang_get_v1_8m", get_v1), ("python_sglang_set_v1_8m", set_v1)):
        subject(), memcpy()  # warm-up: the client's slab mappings, the pool's first touches
        pairs = [(subject(), memcpy()) for _ in range(ROUNDS)]
        value = statistics.median(nbytes / s / 1e9 for s, _ in pairs)
        reference = statistics.median(nbytes / m / 1e9 for _, m in pairs)
        ratio = statistics.median(m / s for s, m in pairs)
        rows.append({"metric": name, "value": round(value, 3), "unit": "GB/s", "reference": "python_memcpy",
                     "reference_value": round(reference, 3), "ratio": round(ratio, 3), "aim": 0.5, "rounds": ROUNDS})
    store.close()
    return rows


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--daemon", required=True, help="the command that runs `hicache serve`")
    args.add_argument("--out", required=True)
    a = args.parse_args()
    os.environ["HICACHE_DAEMON_CMD"] = a.daemon
    daemon = DaemonProcess("--server.max-page-bytes", "32MiB", host_size="8GiB")
    daemon.start()
    try:
        trips = [hybrid_round_trip(daemon.port, local) for local in (True, False)]
        rows = backup_rows(daemon.port)
    finally:
        daemon.stop()
    device = torch.cuda.get_device_name(0)
    expected = {"kv": 12, "mamba": 1, "swa": 4, "indexer": 12}
    failed = [t for t in trips if t["parts_wrong"] or t["stored"] != expected or t["read"] != expected
              or t["hit_pages"] != 12]
    print(f"{device}, torch {torch.__version__}, {os.cpu_count()} CPUs")
    for t in trips:
        print(f"hybrid {t['path']:5}: stored {t['stored']}, hit {t['hit_pages']} pages, read {t['read']}, "
              f"parts wrong {t['parts_wrong']}; backup {t['backup_s'] * 1000:.1f} ms, prefetch "
              f"{t['prefetch_s'] * 1000:.1f} ms")
    for r in rows:
        print(f"{r['metric']:26} {r['value']:7.2f} GB/s  vs memcpy {r['reference_value']:7.2f} GB/s  ratio "
              f"{r['ratio']:.2f} (aim >= {r['aim']})")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "gpu_hybrid.json").write_text(json.dumps(
        {"device": device, "torch": torch.__version__, "cpus": os.cpu_count(), "hybrid": trips, "rows": rows},
        indent=2))
    print("FAILED" if failed else "every byte checked: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
