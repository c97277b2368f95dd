"""The key-identity contract (docs/keys.md) on the Python side: the namespace id against the vectors the Java
implementation checks too, every field in every key, and no dependence on the interpreter's hash seed."""

import dataclasses
import json
import os
import random
import subprocess
import sys
import unittest
from pathlib import Path

from hicache import Namespace
from hicache.hashing import page_hashes
from hicache.namespace import FORMAT_VERSION

from .daemon_process import REPO_ROOT

VECTORS = REPO_ROOT / "hicache-core" / "src" / "test" / "resources" / "io" / "hicache" / "core" / "key" / \
    "namespace-id-vectors.tsv"
CLIENT_ROOT = Path(__file__).resolve().parents[1]

_ORDERS = {"layer_major": 0, "token_major": 1}


def _text(cell: str) -> str:
    return "" if cell == "-" else cell


def _changes(ns: Namespace) -> dict:
    """One change per field, each to a value the bases of the property test never hold."""
    return {
        "model": dataclasses.replace(ns, model=ns.model + "-other"),
        "revision": dataclasses.replace(ns, revision=ns.revision + "x"),
        "dtype": dataclasses.replace(ns, dtype="fp8_e5m2" if ns.dtype != "fp8_e5m2" else "fp4_e2m1"),
        "quantization": dataclasses.replace(ns, quantization=ns.quantization + "q"),
        "order": dataclasses.replace(ns, order=1 - ns.order),
        "page_tokens": dataclasses.replace(ns, page_tokens=ns.page_tokens + 1),
        "tp_rank": dataclasses.replace(ns, tp_rank=(ns.tp_rank + 1) % ns.tp_size),
        "tp_size": dataclasses.replace(ns, tp_size=ns.tp_size * 2),
        "tenant": dataclasses.replace(ns, tenant=ns.tenant + "t"),
        "extra": dataclasses.replace(ns, extra=ns.extra + "e"),
    }


def _random_namespace(rng: random.Random) -> Namespace:
    size = 2 << rng.randrange(3)
    return Namespace(model=f"model-{rng.randrange(1000)}", dtype=rng.choice(["bfloat16", "fp8_e4m3"]),
                     order=rng.randrange(2), tp_rank=rng.randrange(size), tp_size=size,
                     extra=rng.choice(["", "lora-1"]), revision=rng.choice(["", "abc123"]),
                     quantization=rng.choice(["", "kivi"]), page_tokens=rng.choice([0, 16, 64]),
                     tenant=rng.choice(["", "t1"]))


def print_keys() -> str:
    """Namespace ids and page keys of fixed inputs: run under several hash seeds."""
    rng = random.Random(7)
    lines = []
    seen = {}
    for _ in range(32):
        ns = _random_namespace(rng)
        seen[ns] = ns.id  # a dict keyed by namespaces: its hashing varies with the seed, the ids must not
        tokens = [rng.randrange(128_000) for _ in range(64)]
        lines += [f"{ns.id}/{h.hex()}" for h in page_hashes(tokens, 16)]
    lines.append(f"namespaces {len(seen)}")
    return "\n".join(lines)


class KeyContractTest(unittest.TestCase):
    def test_ids_match_the_vectors_java_checks(self):
        if not VECTORS.is_file():
            raise unittest.SkipTest(f"no vectors at {VECTORS} (set HICACHE_REPO to a checkout)")
        checked = 0
        for line in VECTORS.read_text(encoding="utf-8").splitlines():
            if not line or line.startswith("#"):
                continue
            v = line.split("\t")
            ns = Namespace(model=_text(v[1]), format_version=int(v[0]), revision=_text(v[2]), dtype=v[3],
                           quantization=_text(v[4]), order=_ORDERS[v[5]], page_tokens=int(v[6]), tp_rank=int(v[7]),
                           tp_size=int(v[8]), tenant=_text(v[9]), extra=_text(v[10]))
            self.assertEqual(ns.id, v[11], line)
            checked += 1
        self.assertGreaterEqual(checked, 30)

    def test_aliases_name_the_same_namespace_and_an_older_format_another(self):
        self.assertEqual(Namespace("m", dtype="bf16").id, Namespace("m", dtype="bfloat16").id)
        current = Namespace("m")
        self.assertEqual(current.format_version, FORMAT_VERSION)
        older = dataclasses.replace(current, format_version=1)
        self.assertNotEqual(current.id, older.id)
        with self.assertRaises(ValueError):
            dataclasses.replace(older, revision="r")
        with self.assertRaises(ValueError):
            dataclasses.replace(current, format_version=3)

    def test_changing_any_one_field_changes_the_id_and_the_encoding(self):
        rng = random.Random(40)
        for _ in range(200):
            base = _random_namespace(rng)
            for field, changed in _changes(base).items():
                self.assertNotEqual(base.id, changed.id, f"{field} of {base}")
                self.assertNotEqual(base.encode(), changed.encode(), field)

    def test_processes_with_different_hash_seeds_compute_the_same_keys(self):
        here = print_keys()
        for seed in ("0", "1", "4242"):
            env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(CLIENT_ROOT))
            out = subprocess.run([sys.executable, "-c", "from tests.test_keys import print_keys; print(print_keys())"],
                                 cwd=CLIENT_ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)
            self.assertEqual(out.stdout.strip(), here, f"PYTHONHASHSEED={seed}")


if __name__ == "__main__":
    unittest.main()
