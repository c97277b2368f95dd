"""The Python side of the Java interoperability test (hicache-cli's PythonInteropTest).

Reads one JSON request on stdin, writes one JSON answer on stdout:

  {"op": "put" | "get", "port": P, "model": M, "dtype": D, "order": O, "tp_rank": R, "tp_size": S,
   "page_size": N, "page_bytes": B, "tokens": [...], "local": true | false}

It names the pages of ``tokens`` with hicache's SGLang hash chain and the namespace given, and puts or gets them;
page bytes are a function of the page's hash that the Java side computes too: byte k of the page with hash h is
``(h[k % 32] + k) & 0xFF``. The answer is {"statuses": [...]} and, for a get, "mismatches": pages whose bytes differ.
"""

import json
import sys

import hicache


def body(page_hash: bytes, length: int) -> bytearray:
    out = bytearray(length)
    for k in range(length):
        out[k] = (page_hash[k % 32] + k) & 0xFF
    return out


def main() -> int:
    request = json.load(sys.stdin)
    ns = hicache.Namespace(request["model"], request["dtype"], request["order"], request["tp_rank"],
                           request["tp_size"])
    hashes = hicache.page_hashes(request["tokens"], request["page_size"])
    length = request["page_bytes"]
    with hicache.HiCacheClient(port=request["port"], local=request["local"]) as client:
        if request["op"] == "put":
            statuses = client.put(ns, hashes, [body(h, length) for h in hashes])
            json.dump({"statuses": [s.name for s in statuses]}, sys.stdout)
        else:
            targets = [bytearray(length) for _ in hashes]
            statuses = client.get(ns, hashes, targets)
            mismatches = sum(1 for h, t in zip(hashes, targets) if t != body(h, length))
            json.dump({"statuses": [s.name for s in statuses], "mismatches": mismatches}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
