"""The client over TCP (local=False) against a real daemon: every call, every kind of page memory."""

import array
import dataclasses
import mmap
import threading
import unittest

from hicache import (ErrorCode, HealthState, HiCacheClient, HiCacheServerError, Namespace, Status, page_hashes)
from hicache.pipeline import CHUNK_BYTES

from .support import (DaemonModule, address_of, ctypes_buffer, namespace_for, random_hashes, random_pages,
                      request_count)

MODULE = DaemonModule()
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down


class TcpClientTest(unittest.TestCase):
    def setUp(self):
        self.client = HiCacheClient(port=MODULE.port, local=False, timeout_s=20)
        self.addCleanup(self.client.close)
        self.ns = namespace_for(self)

    def put_pages(self, pages, hashes=None):
        hashes = hashes or random_hashes(len(pages))
        self.assertEqual(self.client.put(self.ns, hashes, pages), [Status.OK] * len(pages))
        return hashes

    def test_speaks_version_3_with_crc32(self):
        hello = self.client.handshake()
        self.assertEqual((hello.version, hello.checksum), (3, 1))
        self.assertGreater(hello.max_page_bytes, 0)

    def test_round_trip_of_buffers_of_several_sizes(self):
        pages = random_pages(1, 7, 4096, 65539, 1 << 20)
        hashes = self.put_pages(pages)
        targets = [bytearray(len(pages[0])), memoryview(bytearray(len(pages[1]))), mmap.mmap(-1, len(pages[2])),
                   ctypes_buffer(len(pages[3])), array.array("B", bytes(len(pages[4])))]
        self.assertEqual(self.client.get(self.ns, hashes, targets), [Status.OK] * 5)
        for page, target in zip(pages, targets):
            self.assertEqual(bytes(target), page)

    def test_round_trip_through_ctypes_addresses(self):
        pages = random_pages(4096, 12345)
        sources = [ctypes_buffer(p) for p in pages]
        hashes = self.put_pages([address_of(s) for s in sources])
        targets = [ctypes_buffer(len(p)) for p in pages]
        self.assertEqual(self.client.get(self.ns, hashes, [address_of(t) for t in targets]), [Status.OK] * 2)
        for page, target in zip(pages, targets):
            self.assertEqual(target.raw, page)

    def test_round_trip_of_pages_in_two_parts(self):
        k_halves, v_halves = random_pages(2048, 3000), random_pages(2048, 3000)
        k_memory = [ctypes_buffer(k) for k in k_halves]
        hashes = self.put_pages([[address_of(k), v] for k, v in zip(k_memory, v_halves)])
        k_targets = [ctypes_buffer(len(k)) for k in k_halves]
        v_targets = [bytearray(len(v)) for v in v_halves]
        statuses = self.client.get(self.ns, hashes, [[address_of(k), v] for k, v in zip(k_targets, v_targets)])
        self.assertEqual(statuses, [Status.OK] * 2)
        for i in range(2):
            self.assertEqual(k_targets[i].raw, k_halves[i])
            self.assertEqual(bytes(v_targets[i]), v_halves[i])
        # The parts of a page need not be split alike on the way in and out.
        whole = bytearray(len(k_halves[1]) + len(v_halves[1]))
        thirds = [memoryview(whole)[:100], memoryview(whole)[100:4000], memoryview(whole)[4000:]]
        self.assertEqual(self.client.get(self.ns, hashes[1:], [thirds]), [Status.OK])
        self.assertEqual(bytes(whole), k_halves[1] + v_halves[1])

    def test_a_second_put_is_exists(self):
        pages = random_pages(100, 200)
        hashes = self.put_pages(pages)
        fresh = random_hashes(1)
        self.assertEqual(self.client.put(self.ns, hashes + fresh, pages + random_pages(10)),
                         [Status.EXISTS, Status.EXISTS, Status.OK])

    def test_leading_hits_count_the_stored_prefix(self):
        hashes = page_hashes(list(range(64)), 8)  # a chain of 8 pages
        pages = random_pages(*[256] * 8)
        stored = [0, 1, 2, 4, 5]
        self.put_pages([pages[i] for i in stored], [hashes[i] for i in stored])
        self.assertEqual(self.client.leading_hits(self.ns, hashes), 3)
        self.assertEqual(self.client.leading_hits(self.ns, hashes[1:]), 2)
        self.assertEqual(self.client.leading_hits(self.ns, hashes[3:]), 0)
        self.assertEqual(self.client.leading_hits(self.ns, []), 0)

    def test_delete(self):
        pages = random_pages(500, 600)
        hashes = self.put_pages(pages)
        self.assertEqual(self.client.delete(self.ns, hashes[:1]), [Status.OK])
        self.assertEqual(self.client.delete(self.ns, hashes), [Status.MISS, Status.OK])
        self.assertEqual(self.client.get(self.ns, hashes, [bytearray(500), bytearray(600)]), [Status.MISS] * 2)

    def test_clear_removes_one_namespace_and_clear_all_every_one(self):
        other = Namespace(self.ns.model, extra="other")
        pages = random_pages(300)
        hashes = self.put_pages(pages)
        self.assertEqual(self.client.put(other, hashes, pages), [Status.OK])
        self.client.clear(self.ns)
        self.assertEqual(self.client.get(self.ns, hashes, [bytearray(300)]), [Status.MISS])
        self.assertEqual(self.client.get(other, hashes, [bytearray(300)]), [Status.OK])
        self.client.clear_all()
        self.assertEqual(self.client.get(other, hashes, [bytearray(300)]), [Status.MISS])

    def test_stats_and_health(self):
        self.put_pages(random_pages(10))
        stats = self.client.stats()
        self.assertIn("hicache_server_connections", stats)
        self.assertGreaterEqual(request_count(stats, "put"), 1)
        self.assertEqual(self.client.health(), HealthState.SERVING)

    def test_a_page_of_the_wrong_size_is_size_mismatch(self):
        hashes = self.put_pages(random_pages(4096))
        self.assertEqual(self.client.get(self.ns, hashes, [bytearray(2048)]), [Status.SIZE_MISMATCH])
        self.assertEqual(self.client.get(self.ns, hashes, [bytearray(4097)]), [Status.SIZE_MISMATCH])

    def test_a_page_over_max_page_bytes_is_rejected(self):
        too_large = self.client.handshake().max_page_bytes + 1
        hashes = random_hashes(2)
        self.assertEqual(self.client.put(self.ns, hashes, [bytes(too_large), b"small"]),
                         [Status.REJECTED, Status.OK])

    def test_namespaces_are_isolated(self):
        hashes = self.put_pages(random_pages(64))
        others = [Namespace(self.ns.model + "x"), Namespace(self.ns.model, dtype="float16"),
                  Namespace(self.ns.model, order=1), Namespace(self.ns.model, tp_rank=0, tp_size=2),
                  Namespace(self.ns.model, extra="lora-a")]
        for other in others:
            self.assertEqual(self.client.get(other, hashes, [bytearray(64)]), [Status.MISS], other)
            self.assertEqual(self.client.leading_hits(other, hashes), 0, other)
        # Spellings of one dtype are one namespace (docs/protocol.md §1).
        self.assertEqual(self.client.get(Namespace(self.ns.model, dtype=" BF16 "), hashes, [bytearray(64)]),
                         [Status.OK])

    def test_a_get_of_pages_another_client_deleted_is_a_miss(self):
        pages = random_pages(1000, 1000)
        hashes = self.put_pages(pages)
        with HiCacheClient(port=MODULE.port, local=False) as other:
            self.assertEqual(other.delete(self.ns, hashes[1:]), [Status.OK])
        targets = [bytearray(1000), bytearray(1000)]
        self.assertEqual(self.client.get(self.ns, hashes, targets), [Status.OK, Status.MISS])
        self.assertEqual(bytes(targets[0]), pages[0])

    def test_a_bad_namespace_is_a_malformed_error_and_the_client_goes_on(self):
        with self.assertRaises(HiCacheServerError) as caught:
            self.client.get(Namespace("m", dtype="int3"), random_hashes(1), [bytearray(4)])
        self.assertEqual(caught.exception.code, ErrorCode.MALFORMED)
        self.assertIn("namespace", caught.exception.message)
        self.assertEqual(self.client.health(), HealthState.SERVING)

    def test_a_batch_larger_than_a_frame_goes_out_in_several_frames(self):
        page_bytes = 1 << 20
        count = CHUNK_BYTES // page_bytes + 8
        pages = random_pages(*[page_bytes] * count)
        hashes = self.put_pages(pages)
        before = request_count(self.client.stats(), "get")
        targets = [bytearray(page_bytes) for _ in pages]
        self.assertEqual(self.client.get(self.ns, hashes, targets), [Status.OK] * count)
        self.assertEqual(request_count(self.client.stats(), "get") - before, 2)
        self.assertTrue(all(bytes(t) == p for t, p in zip(targets, pages)))
        self.client.clear(self.ns)

    def test_threads_share_one_client(self):
        client = HiCacheClient(port=MODULE.port, local=False, pool_size=3)
        self.addCleanup(client.close)
        failures = []

        def work():
            pages = random_pages(5000, 7000)
            hashes = random_hashes(2)
            targets = [bytearray(5000), bytearray(7000)]
            for _ in range(5):
                client.delete(self.ns, hashes)
                if client.put(self.ns, hashes, pages) != [Status.OK] * 2:
                    failures.append("put")
                if client.get(self.ns, hashes, targets) != [Status.OK] * 2 or [bytes(t) for t in targets] != pages:
                    failures.append("get")

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])

    def test_version_1_and_version_2_clients_share_pages(self):
        v1 = HiCacheClient(port=MODULE.port, local=False, max_version=1)
        self.addCleanup(v1.close)
        self.assertEqual(v1.handshake().version, 1)
        pages = random_pages(3000, 5000)
        hashes = random_hashes(2)
        self.assertEqual(v1.put(self.ns, hashes[:1], pages[:1]), [Status.OK])
        self.assertEqual(self.client.put(self.ns, hashes[1:], pages[1:]), [Status.OK])
        for client in (v1, self.client):
            targets = [bytearray(3000), bytearray(5000)]
            self.assertEqual(client.get(self.ns, hashes, targets), [Status.OK] * 2)
            self.assertEqual([bytes(t) for t in targets], pages)

    def test_every_namespace_field_keeps_pages_apart_and_version_2_clients_share_the_neutral_ones(self):
        v2 = HiCacheClient(port=MODULE.port, local=False, max_version=2)
        self.addCleanup(v2.close)
        self.assertEqual(v2.handshake().version, 2)
        page, hashes = random_pages(4096)[0], random_hashes(1)
        self.assertEqual(v2.put(self.ns, hashes, [page]), [Status.OK])
        target = bytearray(4096)
        self.assertEqual(self.client.get(self.ns, hashes, [target]), [Status.OK], "neutral fields: one namespace")
        self.assertEqual(bytes(target), page)
        for field, value in (("revision", "r2"), ("quantization", "kivi"), ("page_tokens", 16), ("tenant", "t"),
                             ("format_version", 1)):
            other = dataclasses.replace(self.ns, **{field: value})
            self.assertEqual(self.client.get(other, hashes, [bytearray(4096)]), [Status.MISS], field)
            self.assertEqual(self.client.leading_hits(other, hashes), 0, field)

    def test_arguments_are_checked(self):
        with self.assertRaises(ValueError):
            self.client.get(self.ns, [b"short"], [bytearray(4)])
        with self.assertRaises(ValueError):
            self.client.put(self.ns, random_hashes(2), [b"x"])
        with self.assertRaises(ValueError):
            self.client.get(self.ns, random_hashes(1), [b"read-only"])
        with self.assertRaises(ValueError):
            self.client.put(self.ns, random_hashes(1), [b""])
        self.assertEqual(self.client.get(self.ns, [], []), [])
        hex_hash = random_hashes(1)[0].hex()
        self.assertEqual(self.client.put(self.ns, [hex_hash], [b"by hex"]), [Status.OK])
        target = bytearray(6)
        self.assertEqual(self.client.get(self.ns, [bytes.fromhex(hex_hash)], [target]), [Status.OK])
        self.assertEqual(bytes(target), b"by hex")


if __name__ == "__main__":
    unittest.main()
