"""The same-host path: reads through LEASE from the mapped slab file, writes through RESERVE/COMMIT."""

import ctypes
import time
import unittest

from hicache import HiCacheClient, Status, protocol

from .support import (DaemonModule, address_of, ctypes_buffer, namespace_for, random_hashes, random_pages,
                      request_count)

MODULE = DaemonModule()
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down


class LocalPathTest(unittest.TestCase):
    def setUp(self):
        self.local = HiCacheClient(port=MODULE.port, local=True)
        self.tcp = HiCacheClient(port=MODULE.port, local=False)
        self.addCleanup(self.local.close)
        self.addCleanup(self.tcp.close)
        self.ns = namespace_for(self)

    def requests(self, op: str) -> int:
        return request_count(self.tcp.stats(), op)

    def test_lease_round_trip_checks_every_byte(self):
        pages = random_pages(1, 4096, 70001, 1 << 20)
        hashes = random_hashes(len(pages))
        self.assertEqual(self.tcp.put(self.ns, hashes, pages), [Status.OK] * 4)
        leases, gets = self.requests("lease"), self.requests("get")
        read_before = self.same_host_bytes("read")
        k_part, raw_page = ctypes_buffer(30000), ctypes_buffer(4096)  # memory addressed by (address, length)
        targets = [bytearray(1), address_of(raw_page), [address_of(k_part), bytearray(40001)], bytearray(1 << 20)]
        self.assertEqual(self.local.get(self.ns, hashes, targets), [Status.OK] * 4)
        self.assertEqual(bytes(targets[0]), pages[0])
        self.assertEqual(raw_page.raw, pages[1])
        self.assertEqual(k_part.raw + bytes(targets[2][1]), pages[2])
        self.assertEqual(bytes(targets[3]), pages[3])
        self.assertEqual(self.local.local_slab_path, self.local.handshake().slab_path)
        self.assertEqual(self.requests("lease") - leases, 1)
        self.assertEqual(self.requests("get") - gets, 0)
        # the tier's own counter of bytes read without the socket moved by the pages' bytes (issue 40, part 4)
        self.assertEqual(self.same_host_bytes("read") - read_before, sum(len(p) for p in pages))

    def same_host_bytes(self, direction: str) -> float:
        for line in self.tcp.stats().splitlines():
            if line.startswith(f'hicache_server_same_host_bytes_total{{direction="{direction}"}} '):
                return float(line.split()[-1])
        raise AssertionError("hicache_server_same_host_bytes_total is not in the daemon's metrics")

    def test_lease_statuses_of_missing_and_mis_sized_pages(self):
        hashes = random_hashes(3)
        self.assertEqual(self.tcp.put(self.ns, hashes[:2], random_pages(100, 100)), [Status.OK] * 2)
        statuses = self.local.get(self.ns, hashes, [bytearray(100), bytearray(99), bytearray(100)])
        self.assertEqual(statuses, [Status.OK, Status.SIZE_MISMATCH, Status.MISS])

    def test_a_page_another_client_deleted_is_a_miss_through_the_lease_path(self):
        pages = random_pages(8192, 8192)
        hashes = random_hashes(len(pages))
        self.assertEqual(self.local.put(self.ns, hashes, pages), [Status.OK] * 2)
        self.assertEqual(self.tcp.delete(self.ns, hashes[:1]), [Status.OK])
        targets = [bytearray(8192), bytearray(8192)]
        self.assertEqual(self.local.get(self.ns, hashes, targets), [Status.MISS, Status.OK])
        self.assertEqual(bytes(targets[1]), pages[1])
        self.assertEqual(targets[0], bytearray(8192), "nothing is written into a missed page's target")

    def test_reserve_commit_round_trip(self):
        pages = random_pages(10, 4096, 123457)
        hashes = random_hashes(len(pages))
        reserves, puts = self.requests("reserve"), self.requests("put")
        halves = [[p[:len(p) // 2], ctypes_buffer(p[len(p) // 2:])] for p in pages]
        sources = [[h[0], address_of(h[1])] for h in halves]
        statuses = self.local.put(self.ns, hashes, sources)
        # The daemon of this checkout speaks version 2: a fallback to PUT here would be a regression, not a skip.
        self.assertIs(self.local.reserve_supported, True)
        self.assertEqual(statuses, [Status.OK] * 3)
        self.assertEqual(self.requests("reserve") - reserves, 1)
        self.assertEqual(self.requests("put") - puts, 0)
        targets = [bytearray(len(p)) for p in pages]
        self.assertEqual(self.tcp.get(self.ns, hashes, targets), [Status.OK] * 3)
        self.assertEqual([bytes(t) for t in targets], pages)
        # A page stored already is EXISTS, through RESERVE as through PUT.
        fresh = random_hashes(1)
        self.assertEqual(self.local.put(self.ns, hashes[:1] + fresh, [pages[0], b"new"]), [Status.EXISTS, Status.OK])

    def test_a_daemon_that_ignores_commits_without_checksums_gets_them_and_loses_nothing(self):
        # A daemon older than COMMIT's flag 0x01 ignores it and compares the 0s sent: every page FAILED. Simulated
        # with a flag bit this daemon does not know (ignored the same way).
        pages = random_pages(4096, 5000)
        hashes = random_hashes(len(pages))
        puts = self.requests("put")
        original = protocol.COMMIT_NO_CHECKSUMS
        protocol.COMMIT_NO_CHECKSUMS = 0x80
        try:
            self.assertEqual(self.local.put(self.ns, hashes, pages), [Status.OK] * 2, "retried over PUT")
            self.assertGreater(self.requests("put") - puts, 0)
            more = random_hashes(2)
            reserves = self.requests("reserve")
            self.assertEqual(self.local.put(self.ns, more, pages), [Status.OK] * 2, "committed with checksums")
            self.assertEqual(self.requests("reserve") - reserves, 1)
        finally:
            protocol.COMMIT_NO_CHECKSUMS = original
        targets = [bytearray(len(p)) for p in pages]
        self.assertEqual(self.tcp.get(self.ns, more, targets), [Status.OK] * 2)
        self.assertEqual([bytes(t) for t in targets], pages)

    def test_a_reservation_larger_than_the_slab_falls_back_to_put_for_what_found_no_room(self):
        # 72 MiB of pages through a 64 MiB slab: room reserved cannot be evicted, so RESERVE refuses the tail; those
        # pages go over PUT, which evicts (this daemon has no L3: the pages committed first make room).
        pages = random_pages(*([1 << 20] * 72))
        hashes = random_hashes(len(pages))
        puts = self.requests("put")
        self.assertEqual(self.local.put(self.ns, hashes, pages), [Status.OK] * len(pages))
        deadline = time.monotonic() + 5  # the daemon counts a request once its answer is written
        while self.requests("put") == puts and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertGreater(self.requests("put") - puts, 0, "the pages RESERVE refused went over PUT")
        targets = [bytearray(1 << 20) for _ in pages]
        self.assertEqual(self.tcp.get(self.ns, hashes[-4:], targets[-4:]), [Status.OK] * 4)
        self.assertEqual([bytes(t) for t in targets[-4:]], pages[-4:])

    def test_local_is_chosen_by_itself_on_loopback(self):
        with HiCacheClient(port=MODULE.port) as auto:
            auto.health()
            self.assertEqual(auto.local_slab_path, auto.handshake().slab_path)
            hashes = random_hashes(1)
            page = random_pages(5000)[0]
            self.assertEqual(auto.put(self.ns, hashes, [page]), [Status.OK])
            target = (ctypes.c_ubyte * 5000)()
            self.assertEqual(auto.get(self.ns, hashes, [target]), [Status.OK])
            self.assertEqual(bytes(target), page)


if __name__ == "__main__":
    unittest.main()
