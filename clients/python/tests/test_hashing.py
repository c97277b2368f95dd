"""Page hashes against SGLang's get_hash_str recomputed here with hashlib, and the command line."""

import hashlib
import json
import struct
import subprocess
import sys
import unittest
from pathlib import Path

from hicache.hashing import get_hash_str, page_hashes

CLIENT_ROOT = Path(__file__).resolve().parents[1]


def sglang_get_hash_str(token_ids, prior_hash=None) -> str:
    """SGLang's get_hash_str, written out: prior hash as raw bytes, each token 4-byte little-endian unsigned."""
    hasher = hashlib.sha256()
    if prior_hash:
        hasher.update(bytes.fromhex(prior_hash))
    for t in token_ids:
        hasher.update(t.to_bytes(4, byteorder="little", signed=False))
    return hasher.hexdigest()


class HashingTest(unittest.TestCase):
    def test_first_page_is_sha256_of_its_little_endian_tokens(self):
        # Hand-checked: SHA-256 of 01000000 02000000 03000000 04000000.
        expected = hashlib.sha256(bytes.fromhex("01000000020000000300000004000000")).digest()
        self.assertEqual(page_hashes([1, 2, 3, 4], 4), [expected])

    def test_second_page_chains_from_the_raw_32_bytes_of_the_first(self):
        first = hashlib.sha256(struct.pack("<2I", 7, 8)).digest()
        second = hashlib.sha256(first + struct.pack("<2I", 9, 10)).digest()
        self.assertEqual(page_hashes([7, 8, 9, 10, 11], 2), [first, second])  # the partial page is left out

    def test_matches_sglang_chain_with_large_token_ids(self):
        tokens = [0, 1, 2**31, 2**32 - 1, 151643, 42, 99999, 3]
        prior = None
        expected = []
        for p in range(0, len(tokens), 2):
            prior = sglang_get_hash_str(tokens[p:p + 2], prior)
            expected.append(bytes.fromhex(prior))
        self.assertEqual(page_hashes(tokens, 2), expected)

    def test_prior_hash_raw_or_hex(self):
        prior = hashlib.sha256(b"x").digest()
        expected = hashlib.sha256(prior + struct.pack("<3I", 5, 6, 7)).digest()
        self.assertEqual(page_hashes([5, 6, 7], 3, prior), [expected])
        self.assertEqual(page_hashes([5, 6, 7], 3, prior.hex()), [expected])
        self.assertEqual(get_hash_str([5, 6, 7], prior.hex()), expected.hex())

    def test_negative_ids_are_int32_bit_patterns_as_java_passes_them(self):
        self.assertEqual(page_hashes([-1, -2**31], 1), page_hashes([2**32 - 1, 2**31], 1))

    def test_refuses_ids_out_of_range_and_bad_page_sizes(self):
        with self.assertRaises(ValueError):
            page_hashes([2**32], 1)
        with self.assertRaises(ValueError):
            page_hashes([1], 0)

    def test_no_whole_page_no_hash(self):
        self.assertEqual(page_hashes([1, 2, 3], 4), [])
        self.assertEqual(page_hashes([], 4), [])

    def test_command_line(self):
        lines = [{"page_size": 2, "tokens": [1, 2, 3, 4, 5]}, {"page_size": 4, "tokens": [1]},
                 {"page_size": 1, "tokens": [2**32 - 1]}]
        result = subprocess.run([sys.executable, "-m", "hicache.hashing"], cwd=CLIENT_ROOT, check=True,
                                input="\n".join(json.dumps(x) for x in lines) + "\n", capture_output=True, text=True)
        self.assertEqual(result.stderr, "")
        out = result.stdout.split("\n")
        self.assertEqual(out[0], ",".join(h.hex() for h in page_hashes([1, 2, 3, 4], 2)))
        self.assertEqual(out[1], "")
        self.assertEqual(out[2], sglang_get_hash_str([2**32 - 1]))
        self.assertEqual(len(out), 4)  # three lines and the final newline


if __name__ == "__main__":
    unittest.main()
