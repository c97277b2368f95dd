"""A daemon that stalls (SIGSTOP) or dies (SIGKILL) under a call: pages come back FAILED or TIMED_OUT, single
values raise, all within the deadline plus 2 s; the client then works with a daemon that answers again."""

import threading
import time
import unittest

from hicache import HiCacheClient, HiCacheConnectionError, HiCacheTimeoutError, Status

from .daemon_process import DaemonProcess
from .support import namespace_for, random_hashes, random_pages

MARGIN_S = 2.0
GONE = {Status.FAILED, Status.TIMED_OUT}


class StalledDaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = DaemonProcess().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_a_stalled_daemon_times_out_within_the_deadline_and_the_client_recovers(self):
        ns = namespace_for(self)
        client = HiCacheClient(port=self.daemon.port, local=False, pool_size=2)
        self.addCleanup(client.close)
        pages = random_pages(4096, 4096)
        hashes = random_hashes(2)
        self.assertEqual(client.put(ns, hashes, pages), [Status.OK] * 2)
        self.daemon.pause()
        try:
            for call in (lambda: client.get(ns, hashes, [bytearray(4096), bytearray(4096)], timeout_s=1.0),
                         lambda: client.put(ns, random_hashes(2), pages, timeout_s=1.0),
                         lambda: client.delete(ns, random_hashes(2), timeout_s=1.0)):
                started = time.monotonic()
                statuses = call()
                self.assertLess(time.monotonic() - started, 1.0 + MARGIN_S)
                self.assertEqual(statuses, [Status.TIMED_OUT] * 2)
            for call in (lambda: client.leading_hits(ns, hashes, timeout_s=1.0), lambda: client.health(timeout_s=1.0)):
                started = time.monotonic()
                with self.assertRaises(HiCacheTimeoutError):
                    call()
                self.assertLess(time.monotonic() - started, 1.0 + MARGIN_S)
        finally:
            self.daemon.resume()
        # The stalled connections were dropped; new ones are opened.
        targets = [bytearray(4096), bytearray(4096)]
        self.assertEqual(client.get(ns, hashes, targets), [Status.OK] * 2)
        self.assertEqual([bytes(t) for t in targets], pages)


class KilledDaemonTest(unittest.TestCase):
    def setUp(self):
        self.daemon = DaemonProcess().start()
        self.addCleanup(self.daemon.stop)

    def test_a_daemon_killed_in_the_middle_of_a_batch_fails_every_page_in_time(self):
        ns = namespace_for(self)
        client = HiCacheClient(port=self.daemon.port, local=False, timeout_s=5.0)
        self.addCleanup(client.close)
        client.health()  # a pooled connection, open before the daemon stops reading
        pages = random_pages(*[4 << 20] * 8)  # 32 MiB: far more than the sockets buffer
        hashes = random_hashes(len(pages))
        outcome = {}

        def put():
            started = time.monotonic()
            outcome["statuses"] = client.put(ns, hashes, pages)
            outcome["seconds"] = time.monotonic() - started

        self.daemon.pause()  # it stops reading: the batch stalls part-way through its bytes
        worker = threading.Thread(target=put)
        worker.start()
        time.sleep(1.0)
        self.assertTrue(worker.is_alive(), "the put finished before the daemon was killed")
        self.daemon.kill()
        worker.join(5.0 + MARGIN_S + 1)
        self.assertFalse(worker.is_alive(), "the put hung after the daemon was killed")
        self.assertLessEqual(outcome["seconds"], 5.0 + MARGIN_S)
        self.assertEqual(len(outcome["statuses"]), len(pages))
        self.assertTrue(set(outcome["statuses"]) <= GONE, outcome["statuses"])
        # The old daemon's port answers nothing now: pages fail at once, single values raise.
        started = time.monotonic()
        self.assertEqual(client.get(ns, hashes[:1], [bytearray(4 << 20)]), [Status.FAILED])
        with self.assertRaises(HiCacheConnectionError):
            client.health()
        self.assertLess(time.monotonic() - started, MARGIN_S)
        # A new daemon on another port serves a new client.
        replacement = DaemonProcess().start()
        self.addCleanup(replacement.stop)
        self.assertNotEqual(replacement.port, self.daemon.port)
        with HiCacheClient(port=replacement.port, local=False) as fresh:
            self.assertEqual(fresh.put(ns, hashes[:2], pages[:2]), [Status.OK] * 2)
            targets = [bytearray(4 << 20), bytearray(4 << 20)]
            self.assertEqual(fresh.get(ns, hashes[:2], targets), [Status.OK] * 2)
            self.assertEqual([bytes(t) for t in targets], pages[:2])


if __name__ == "__main__":
    unittest.main()
