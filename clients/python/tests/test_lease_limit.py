"""The same-host path on a daemon that lets a connection hold one lease or reservation at a time
(``server.max-leases-per-connection``): a LEASE or RESERVE past it takes nothing, answers id 0 and REJECTED pages,
and the client gets (GET) or puts (PUT) those pages instead. Small frames make a call of 5,000 pages several
pipelined LEASEs or RESERVEs."""

import unittest

from hicache import HiCacheClient, Status

from .support import DaemonModule, namespace_for, random_hashes, random_pages, request_count

MODULE = DaemonModule("--server.max-leases-per-connection", "1", "--server.max-page-bytes", "4KiB",
                      "--server.max-frame-bytes", "68KiB")
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down

PAGES = 5000


class LeaseLimitTest(unittest.TestCase):
    def setUp(self):
        self.local = HiCacheClient(port=MODULE.port, local=True)
        self.tcp = HiCacheClient(port=MODULE.port, local=False)
        self.addCleanup(self.local.close)
        self.addCleanup(self.tcp.close)
        self.ns = namespace_for(self)

    def requests(self, op: str) -> int:
        return request_count(self.tcp.stats(), op)

    def test_reservations_over_the_limit_fall_back_to_put(self):
        pages = random_pages(*([100] * PAGES))
        hashes = random_hashes(PAGES)
        reserves, puts = self.requests("reserve"), self.requests("put")
        self.assertEqual(self.local.put(self.ns, hashes, pages), [Status.OK] * PAGES)
        self.assertGreater(self.requests("reserve") - reserves, 1, "several RESERVEs, pipelined")
        self.assertGreater(self.requests("put") - puts, 0, "the pages of reservation 0 went over PUT")
        targets = [bytearray(100) for _ in pages]
        self.assertEqual(self.tcp.get(self.ns, hashes, targets), [Status.OK] * PAGES)
        self.assertEqual([bytes(t) for t in targets], pages)

    def test_leases_over_the_limit_fall_back_to_get(self):
        pages = random_pages(*([100] * PAGES))
        hashes = random_hashes(PAGES)
        self.assertEqual(self.tcp.put(self.ns, hashes, pages), [Status.OK] * PAGES)
        leases, gets = self.requests("lease"), self.requests("get")
        targets = [bytearray(100) for _ in pages]
        self.assertEqual(self.local.get(self.ns, hashes, targets), [Status.OK] * PAGES)
        self.assertEqual([bytes(t) for t in targets], pages)
        self.assertGreater(self.requests("lease") - leases, 1, "several LEASEs, pipelined")
        self.assertGreater(self.requests("get") - gets, 0, "the pages of lease 0 came by GET")


if __name__ == "__main__":
    unittest.main()
