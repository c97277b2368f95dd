"""The SGLang backend on a GPU machine, with PyTorch: KV made on the GPU, copied to a pinned host pool (a torch
tensor shaped as SGLang's host pool), stored in the daemon with ``batch_set_v1``, read back with ``batch_get_v1``
into the slots of a second pinned pool, copied to the GPU and compared there, every byte.

    python3 clients/python/interop/gpu_roundtrip.py --daemon "bash .gpu/java -cp '.gpu/lib/*' io.hicache.cli.HiCacheCli serve" --out DIR

Starts the daemon itself (no L3, slab in /dev/shm), runs MHA page_first and page_first_direct pools of a
Llama-3-8B-like rank (32 layers, 8 KV heads of 128, bf16, 16-token pages: 2 MiB pages) over the same-host path and
over TCP, prints a table and writes DIR/gpu_roundtrip.json. Exits 1 if any byte differs or any page fails.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import torch  # noqa: E402

import fake_sglang  # noqa: E402
from daemon_process import DaemonProcess  # noqa: E402
from hicache.sglang import HiCacheDaemonStorage  # noqa: E402

LAYERS, HEADS, HEAD_DIM, PAGE, SLOTS = 32, 8, 128, 16, 4096


class PinnedTorchPool(fake_sglang.FakeMHATokenToKVPoolHost):
    """SGLang's MHA host pool over a pinned torch tensor instead of ctypes memory (same shape, same formulas)."""

    def __init__(self, layout: str):
        super().__init__(layout, layer_num=LAYERS, head_num=HEADS, head_dim=HEAD_DIM, size=SLOTS, page_size=PAGE,
                         dtype=fake_sglang.BFLOAT16)
        nbytes = ctypes.sizeof(self.kv_buffer)
        self.tensor = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        self.kv_buffer = (ctypes.c_char * nbytes).from_address(self.tensor.data_ptr())
        self.base = self.tensor.data_ptr()


def run(layout: str, local: bool, port: int) -> dict:
    source, target = PinnedTorchPool(layout), PinnedTorchPool(layout)
    on_gpu = torch.randint(0, 256, (source.tensor.numel(),), dtype=torch.uint8, device="cuda")
    source.tensor.copy_(on_gpu)  # device to pinned host, as a backup of the device pool would
    torch.cuda.synchronize()
    extra = {"port": port, "local": local, "timeout_s": 60, "model": f"gpu/llama-like/{layout}/{local}"}
    config = fake_sglang.storage_config(model_name="gpu/llama-like", extra_config=extra)
    pages = SLOTS // PAGE
    keys = [os.urandom(32).hex() for _ in range(pages)]
    writer, reader = HiCacheDaemonStorage(config, extra), HiCacheDaemonStorage(config, extra)
    writer.register_mem_pool_host(source)
    reader.register_mem_pool_host(target)
    slots = torch.arange(SLOTS, dtype=torch.int64)
    # Read into other slots: page i lands in page (i + 1) % pages of the target pool.
    shifted = torch.cat([slots[PAGE:], slots[:PAGE]])
    start = time.perf_counter()
    stored = writer.batch_set_v1(keys, slots)
    set_seconds = time.perf_counter() - start
    start = time.perf_counter()
    got = reader.batch_get_v1(keys, shifted)
    get_seconds = time.perf_counter() - start
    back = target.tensor.to("cuda")
    page_bytes = source.page_bytes
    # Compare on the GPU: each part (K, V) of page i of the source against page (i + 1) % pages of the target.
    mismatched = 0
    part_bytes = LAYERS * PAGE * HEADS * HEAD_DIM * 2
    for i in range(pages):
        for part in range(2):
            src_ptrs, _ = source.get_page_buffer_meta(fake_sglang.FakeIndices(range(i * PAGE, (i + 1) * PAGE)))
            j = (i + 1) % pages
            dst_ptrs, _ = target.get_page_buffer_meta(fake_sglang.FakeIndices(range(j * PAGE, (j + 1) * PAGE)))
            a = src_ptrs[part] - source.base
            b = dst_ptrs[part] - target.base
            if not torch.equal(on_gpu[a:a + part_bytes], back[b:b + part_bytes]):
                mismatched += 1
    writer.close()
    reader.close()
    total = pages * page_bytes
    return {"layout": layout, "path": "local" if local else "tcp", "pages": pages, "page_bytes": page_bytes,
            "stored_ok": sum(stored), "read_ok": sum(got), "parts_mismatched": mismatched,
            "set_gbps": total / set_seconds / 1e9, "get_gbps": total / get_seconds / 1e9}


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--daemon", required=True, help="the command that runs `hicache serve`")
    args.add_argument("--out", required=True)
    a = args.parse_args()
    os.environ["HICACHE_DAEMON_CMD"] = a.daemon
    results = []
    daemon = DaemonProcess(host_size="6GiB")
    daemon.start()
    try:
        for layout in ("page_first_direct", "page_first"):
            for local in (True, False):
                results.append(run(layout, local, daemon.port))
    finally:
        daemon.stop()
    failed = [r for r in results if r["parts_mismatched"] or r["stored_ok"] != r["pages"] or r["read_ok"] != r["pages"]]
    device = torch.cuda.get_device_name(0)
    print(f"{device}, torch {torch.__version__}: {SLOTS // PAGE} pages of 2 MiB, pinned host pools")
    print(f"{'layout':18} {'path':5} {'stored':>7} {'read':>5} {'mismatched':>10} {'set GB/s':>9} {'get GB/s':>9}")
    for r in results:
        print(f"{r['layout']:18} {r['path']:5} {r['stored_ok']:>7} {r['read_ok']:>5} {r['parts_mismatched']:>10} "
              f"{r['set_gbps']:>9.2f} {r['get_gbps']:>9.2f}")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "gpu_roundtrip.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                               "results": results}, indent=2))
    print("FAILED" if failed else "every byte checked: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
