#!/usr/bin/env python3
"""Writes the namespace-id test vectors for KeyContractTest and the Python client's test_keys.

An independent implementation of the namespace id of docs/keys.md: SHA-256 over the fields, each as a 2-byte
big-endian length and its UTF-8 bytes, under a tag naming the key format; the id is the first 16 bytes, as 32
lowercase hex characters. Format 2: tag "hicache-namespace-v2", model, weights revision, dtype, quantization, page
byte order, page tokens (decimal), tp rank, tp size, tenant, extra key. Format 1 (older releases): tag
"hicache-namespace-v1", model, dtype, byte order, tp rank, tp size, extra key.

Output: one vector per line, tab-separated (no field holds a tab or a newline):
    format  model  revision  dtype  quantization  order  page_tokens  tp_rank  tp_size  tenant  extra  expected_id
with "-" for an empty text.

Run:  python3 namespace_id_vectors.py > ../resources/io/hicache/core/key/namespace-id-vectors.tsv
"""
import hashlib
import random
import sys


def namespace_id(fmt, model, revision, dtype, quant, order, page_tokens, rank, size, tenant, extra):
    if fmt == 1:
        fields = ["hicache-namespace-v1", model, dtype, order, str(rank), str(size), extra]
    else:
        fields = [f"hicache-namespace-v{fmt}", model, revision, dtype, quant, order, str(page_tokens), str(rank),
                  str(size), tenant, extra]
    digest = hashlib.sha256()
    for field in fields:
        data = field.encode("utf-8")
        digest.update(len(data).to_bytes(2, "big") + data)
    return digest.digest()[:16].hex()


def main():
    rows = [
        (2, "meta-llama/Llama-3.1-8B", "", "bfloat16", "", "layer_major", 0, 0, 1, "", ""),
        (2, "meta-llama/Llama-3.1-8B", "0e9e39f", "bfloat16", "", "layer_major", 64, 0, 1, "", ""),
        (2, "meta-llama/Llama-3.1-8B", "0e9e39f", "fp8_e4m3", "per-token-scale", "token_major", 16, 3, 8, "acme",
         "lora-a/part=mamba"),
        (2, "模型/ü", "rev-ß", "float16", "", "layer_major", 1, 0, 2, "tenant-é", "cp1"),
        (1, "meta-llama/Llama-3.1-8B", "", "bfloat16", "", "layer_major", 0, 0, 1, "", ""),
        (1, "m", "", "fp4_e2m1", "", "token_major", 0, 1, 2, "", "salt"),
    ]
    rng = random.Random(40)
    dtypes = ["bfloat16", "float16", "float32", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]
    for _ in range(24):
        size = rng.choice([1, 2, 4, 8])
        rows.append((2, f"model-{rng.randrange(1000)}", rng.choice(["", "main", f"{rng.getrandbits(40):010x}"]),
                     rng.choice(dtypes), rng.choice(["", "kivi-2bit"]), rng.choice(["layer_major", "token_major"]),
                     rng.choice([0, 1, 16, 64, 512]), rng.randrange(size), size, rng.choice(["", "t1", "t2"]),
                     rng.choice(["", "lora-7", "pp1"])))
    out = sys.stdout
    out.write("# written by src/test/python/namespace_id_vectors.py: do not edit by hand\n")
    for r in rows:
        cells = [str(r[0])] + [(str(c) if str(c) else "-") for c in r[1:]] + [namespace_id(*r)]
        out.write("\t".join(cells) + "\n")


if __name__ == "__main__":
    main()
