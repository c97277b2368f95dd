"""The Python side of the ``python`` bench suite (hicache-bench's PythonSuite).

Reads commands on stdin, one per line, and answers each with one line on stdout:

  open PORT                 connects a TCP client and a same-host client      -> ok VERSION
  fill PAGE_BYTES N         puts N pages of PAGE_BYTES (random bytes) over TCP -> ok HEX_HASH,HEX_HASH,...
  get tcp|local PAGE_BYTES  gets the N pages filled at that size               -> BYTES
  put tcp|local PAGE_BYTES  puts N pages under fresh random hashes             -> BYTES
  sglang PORT PAGE_BYTES N   opens SGLang backends (same host, TCP) on an SGLang-like host pool of 2N pages
                            (page_first, K and V apart) and stores N pages for the reads -> ok HEX_HASH,...
  sglang_set local|tcp      batch_set_v1 of the pool's first N pages under fresh keys          -> BYTES
  sglang_get local|tcp      batch_get_v1 of the stored pages into the pool's last N pages     -> BYTES
  memcpy                    one thread copies the same N pages' K and V parts from the pool    -> BYTES
  quit

Page memory is allocated once per size and reused, so a round times the client and the daemon, not Python's
allocator. A page that does not come back OK ends the worker with a message (a figure must not count failures).
"""

import ctypes
import os
import sys

import hicache
from hicache.sglang import HiCacheDaemonStorage

NAMESPACE = hicache.Namespace("bench/python", "bfloat16", hicache.LAYER_MAJOR, 0, 1)


class Worker:
    def __init__(self):
        self.clients = {}
        self.filled = {}   # page_bytes -> (hashes, pages)
        self.targets = {}  # page_bytes -> list of bytearrays

    def open(self, port):
        self.clients["tcp"] = hicache.HiCacheClient(port=port, local=False, timeout_s=60)
        self.clients["local"] = hicache.HiCacheClient(port=port, local=True, timeout_s=60)
        self.clients["tcp"].health()
        self.clients["local"].health()
        return f"ok {self.clients['tcp'].protocol_version}"

    def fill(self, page_bytes, n):
        hashes = [os.urandom(32) for _ in range(n)]
        pages = [bytearray(os.urandom(page_bytes)) for _ in range(n)]
        self.expect_ok(self.clients["tcp"].put(NAMESPACE, hashes, pages), "fill")
        self.filled[page_bytes] = (hashes, pages)
        self.targets[page_bytes] = [bytearray(page_bytes) for _ in range(n)]
        return "ok " + ",".join(h.hex() for h in hashes)

    def get(self, mode, page_bytes):
        hashes, pages = self.filled[page_bytes]
        targets = self.targets[page_bytes]
        self.expect_ok(self.clients[mode].get(NAMESPACE, hashes, targets), "get " + mode)
        return str(len(hashes) * page_bytes)

    def put(self, mode, page_bytes):
        _, pages = self.filled[page_bytes]
        hashes = [os.urandom(32) for _ in pages]
        self.expect_ok(self.clients[mode].put(NAMESPACE, hashes, pages), "put " + mode)
        return str(len(hashes) * page_bytes)

    def sglang(self, port, page_bytes, n):
        self.pool = HostPoolLike(page_bytes, 2 * n)
        self.n = n
        self.backends = {}
        for mode, local in (("local", True), ("tcp", False)):
            extra = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheDaemonStorage",
                     "interface_v1": 1, "port": port, "timeout_s": 60, "local": local, "model": "bench/sglang"}
            config = type("Config", (), {"tp_rank": 0, "tp_size": 1, "is_mla_model": False, "extra_config": extra,
                                         "is_page_first_layout": True})()
            backend = HiCacheDaemonStorage(config, {})
            backend.register_mem_pool_host(self.pool)
            self.backends[mode] = backend
        self.stored = [os.urandom(32).hex() for _ in range(n)]
        self.expect_true(self.backends["tcp"].batch_set_v1(self.stored, self.pool.slots(0, n)), "sglang fill")
        self.copy_target = (ctypes.c_char * (n * page_bytes))()
        ctypes.memset(self.copy_target, 1, n * page_bytes)  # touched once, as the slab pages are
        return "ok " + ",".join(self.stored)

    def sglang_set(self, mode):
        keys = [os.urandom(32).hex() for _ in range(self.n)]
        self.expect_true(self.backends[mode].batch_set_v1(keys, self.pool.slots(0, self.n)), "sglang_set " + mode)
        return str(self.n * self.pool.page_bytes)

    def sglang_get(self, mode):
        self.expect_true(self.backends[mode].batch_get_v1(self.stored, self.pool.slots(self.n, self.n)),
                         "sglang_get " + mode)
        return str(self.n * self.pool.page_bytes)

    def memcpy(self):
        ptrs, sizes = self.pool.get_page_buffer_meta(self.pool.slots(0, self.n))
        at = ctypes.addressof(self.copy_target)
        for ptr, size in zip(ptrs, sizes):
            ctypes.memmove(at, ptr, size)
            at += size
        return str(self.n * self.pool.page_bytes)

    @staticmethod
    def expect_true(oks, what):
        if not all(oks):
            raise RuntimeError(f"{what}: {oks.count(False)} of {len(oks)} pages failed")

    @staticmethod
    def expect_ok(statuses, what):
        bad = [s for s in statuses if s != hicache.Status.OK]
        if bad:
            raise RuntimeError(f"{what}: {len(bad)} of {len(statuses)} pages not OK, the first {bad[0].name}")


class HostPoolLike:
    """As much of SGLang's ``MHATokenToKVPoolHost`` (``pool_host/mha.py``) as the backend uses, layout page_first:
    K and V in two buffers, 64-token pages of 16 layers x 8 heads x 128 dims x bf16 (``page_bytes`` in all), one
    ``(K, V)`` address pair per page from ``get_page_buffer_meta``. Plain memory (SGLang's is pinned: the same
    for a CPU copy)."""

    layout = "page_first"
    page_size = 64

    def __init__(self, page_bytes, pages):
        self.page_bytes = page_bytes
        self.part_bytes = page_bytes // 2
        self.layer_num = 16
        self.head_num = 8
        self.head_dim = self.part_bytes // (self.page_size * self.layer_num * self.head_num * 2)
        self.dtype = "torch.bfloat16"
        self.k = (ctypes.c_char * (pages * self.part_bytes))()
        self.v = (ctypes.c_char * (pages * self.part_bytes))()
        for buffer in (self.k, self.v):
            ctypes.memmove(buffer, os.urandom(len(buffer)), len(buffer))

    def get_size_per_token(self):
        return self.page_bytes // self.page_size

    def slots(self, first_page, pages):
        return list(range(first_page * self.page_size, (first_page + pages) * self.page_size))

    def get_page_buffer_meta(self, indices):
        ptrs = []
        for slot in list(indices)[::self.page_size]:
            page = slot // self.page_size
            ptrs += [ctypes.addressof(self.k) + page * self.part_bytes, ctypes.addressof(self.v) + page * self.part_bytes]
        return ptrs, [self.part_bytes] * len(ptrs)


def main():
    worker = Worker()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            if words[0] == "open":
                answer = worker.open(int(words[1]))
            elif words[0] == "fill":
                answer = worker.fill(int(words[1]), int(words[2]))
            elif words[0] in ("get", "put"):
                answer = getattr(worker, words[0])(words[1], int(words[2]))
            elif words[0] == "sglang":
                answer = worker.sglang(int(words[1]), int(words[2]), int(words[3]))
            elif words[0] in ("sglang_set", "sglang_get"):
                answer = getattr(worker, words[0])(words[1])
            elif words[0] == "memcpy":
                answer = worker.memcpy()
            else:
                answer = "error unknown command " + words[0]
        except Exception as e:  # the Java side reports it and stops
            answer = f"error {type(e).__name__}: {e}"
        print(answer, flush=True)
    for client in worker.clients.values():
        client.close()
    for backend in getattr(worker, "backends", {}).values():
        backend.close()


if __name__ == "__main__":
    main()
