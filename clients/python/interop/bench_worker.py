"""The Python side of the ``python`` bench suite (hicache-bench's PythonSuite).

Reads commands on stdin, one per line, and answers each with one line on stdout:

  open PORT                 connects a TCP client and a same-host client      -> ok VERSION
  fill PAGE_BYTES N         puts N pages of PAGE_BYTES (random bytes) over TCP -> ok HEX_HASH,HEX_HASH,...
  get tcp|local PAGE_BYTES  gets the N pages filled at that size               -> BYTES
  put tcp|local PAGE_BYTES  puts N pages under fresh random hashes             -> BYTES
  quit

Page memory is allocated once per size and reused, so a round times the client and the daemon, not Python's
allocator. A page that does not come back OK ends the worker with a message (a figure must not count failures).
"""

import os
import sys

import hicache

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

    @staticmethod
    def expect_ok(statuses, what):
        bad = [s for s in statuses if s != hicache.Status.OK]
        if bad:
            raise RuntimeError(f"{what}: {len(bad)} of {len(statuses)} pages not OK, the first {bad[0].name}")


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
            else:
                answer = "error unknown command " + words[0]
        except Exception as e:  # the Java side reports it and stops
            answer = f"error {type(e).__name__}: {e}"
        print(answer, flush=True)
    for client in worker.clients.values():
        client.close()


if __name__ == "__main__":
    main()
