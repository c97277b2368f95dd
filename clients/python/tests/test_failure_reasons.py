"""Why a call failed (issue 37): pages still say FAILED or TIMED_OUT, and the client says why, in
``client.last_error`` and in one warning of the ``hicache`` log per outage (again only after a call succeeded)."""

import logging
import socket
import threading
import unittest

from hicache import HiCacheClient, HiCacheConnectionError, Namespace, Status, protocol

from .fake_daemon import FakeDaemon, error_payload, hello_answer, read_frame, send_frame

NS = Namespace("failure-reasons")
HASHES = [bytes([i]) * 32 for i in range(1, 3)]


def unused_port() -> int:
    """A port nothing listens on: bound, then closed (nothing else takes it in the moment the test needs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def warnings_of(logs) -> list[str]:
    return [r.getMessage() for r in logs.records if r.levelno >= logging.WARNING]


class NoDaemonTest(unittest.TestCase):
    def setUp(self):
        self.port = unused_port()
        self.address = f"127.0.0.1:{self.port}"
        self.client = HiCacheClient(port=self.port, timeout_s=2.0)
        self.addCleanup(self.client.close)

    def assert_reason_names_the_address_and_the_os_error(self, reason):
        self.assertIsNotNone(reason)
        self.assertIn(self.address, reason)
        self.assertIn("refused", reason.lower())
        self.assertIn("./hicache serve", reason)

    def test_pages_fail_and_the_client_says_why(self):
        calls = {"put": lambda c: c.put(NS, HASHES, [b"a" * 64, b"b" * 64]),
                 "get": lambda c: c.get(NS, HASHES, [bytearray(64), bytearray(64)]),
                 "delete": lambda c: c.delete(NS, HASHES)}
        for name, call in calls.items():
            with self.subTest(name), HiCacheClient(port=self.port, timeout_s=2.0) as client:
                self.assertIsNone(client.last_error)
                with self.assertLogs("hicache", logging.WARNING):  # checked below; not printed
                    self.assertEqual(call(client), [Status.FAILED] * 2)
                self.assert_reason_names_the_address_and_the_os_error(client.last_error)

    def test_a_single_value_call_raises_with_the_same_reason(self):
        with self.assertLogs("hicache", logging.WARNING), self.assertRaises(HiCacheConnectionError) as caught:
            self.client.leading_hits(NS, HASHES)
        self.assert_reason_names_the_address_and_the_os_error(str(caught.exception))
        self.assert_reason_names_the_address_and_the_os_error(self.client.last_error)

    def test_one_warning_for_many_failing_calls(self):
        with self.assertLogs("hicache", logging.DEBUG) as logs:
            for _ in range(3):
                self.assertEqual(self.client.put(NS, HASHES, [b"a" * 64, b"b" * 64]), [Status.FAILED] * 2)
                self.assertEqual(self.client.get(NS, HASHES, [bytearray(64), bytearray(64)]), [Status.FAILED] * 2)
            with self.assertRaises(HiCacheConnectionError):
                self.client.health()
        said = warnings_of(logs)
        self.assertEqual(len(said), 1, said)
        self.assertEqual(logs.records[0].name, "hicache.client")
        self.assert_reason_names_the_address_and_the_os_error(said[0])
        self.assertIn("put of 2 pages: 2 FAILED", said[0])

    def test_each_client_warns_once(self):
        other = HiCacheClient(port=self.port, timeout_s=2.0)
        self.addCleanup(other.close)
        with self.assertLogs("hicache", logging.WARNING) as logs:
            for client in (self.client, other, self.client, other):
                self.assertEqual(client.delete(NS, HASHES), [Status.FAILED] * 2)
        self.assertEqual(len(warnings_of(logs)), 2, warnings_of(logs))


class SwitchableDaemon:
    """A fake daemon whose behaviour a test switches: ``serve`` answers HELLO and DELETE (every page OK), ``close``
    closes each connection at its next frame, ``refuse`` answers every request ERROR SHUTTING_DOWN, ``stall``
    answers nothing."""

    def __init__(self, test: unittest.TestCase):
        self.mode = "serve"
        self.stop = threading.Event()
        self.fake = FakeDaemon(self.handle)
        test.addCleanup(self.fake.close)
        test.addCleanup(self.stop.set)
        test.addCleanup(lambda: test.assertEqual(self.fake.errors, []))

    def handle(self, sock: socket.socket) -> None:
        while True:
            if self.mode == "stall":
                self.stop.wait(10)
                return
            op, request_id, payload = read_frame(sock)
            if self.mode == "close":  # after reading the frame: a close with unread bytes would be a reset
                return
            if op == protocol.Op.HELLO:
                send_frame(sock, 0x81, request_id, hello_answer(2))
            elif self.mode == "refuse":
                send_frame(sock, 0xFF, request_id, error_payload(protocol.ErrorCode.SHUTTING_DOWN,
                                                                 "the daemon is shutting down"))
            elif op == protocol.Op.DELETE:
                count = int.from_bytes(payload[-4 - 32 * len(HASHES):][:4], "big")
                send_frame(sock, 0x93, request_id, count.to_bytes(4, "big") + bytes([Status.OK]) * count)
            else:
                raise AssertionError(f"op 0x{op:x} was not expected")


class OutageTest(unittest.TestCase):
    def setUp(self):
        self.daemon = SwitchableDaemon(self)
        self.address = f"127.0.0.1:{self.daemon.fake.port}"
        # The fake daemon answers HELLO as a version 2 daemon does.
        self.client = HiCacheClient(port=self.daemon.fake.port, local=False, timeout_s=2.0, pool_size=1, max_version=2)
        self.addCleanup(self.client.close)

    def test_a_success_clears_the_reason_and_the_next_outage_is_logged_again(self):
        with self.assertNoLogs("hicache", logging.WARNING):
            self.assertEqual(self.client.delete(NS, HASHES), [Status.OK] * 2)
        self.assertIsNone(self.client.last_error)

        self.daemon.mode = "close"  # the pooled connection and new ones are closed by the daemon
        with self.assertLogs("hicache", logging.WARNING) as logs:
            for _ in range(3):
                self.assertEqual(self.client.delete(NS, HASHES), [Status.FAILED] * 2)
        said = warnings_of(logs)
        self.assertEqual(len(said), 1, said)
        for text in (said[0], self.client.last_error):
            self.assertIn(self.address, text)
            self.assertIn("closed the connection", text)

        self.daemon.mode = "serve"
        with self.assertLogs("hicache", logging.INFO) as logs:
            self.assertEqual(self.client.delete(NS, HASHES), [Status.OK] * 2)
        self.assertEqual(warnings_of(logs), [])
        self.assertIn(f"the daemon at {self.address} answers again", logs.output[0])
        self.assertIsNone(self.client.last_error)

        self.daemon.mode = "refuse"  # an ERROR answer fails the pages without breaking the connection
        with self.assertLogs("hicache", logging.WARNING) as logs:
            self.assertEqual(self.client.delete(NS, HASHES), [Status.FAILED] * 2)
            self.assertEqual(self.client.delete(NS, HASHES), [Status.FAILED] * 2)
        said = warnings_of(logs)
        self.assertEqual(len(said), 1, said)
        for text in (said[0], self.client.last_error):
            self.assertIn(self.address, text)
            self.assertIn("SHUTTING_DOWN", text)
            self.assertIn("the daemon is shutting down", text)

    def test_a_daemon_that_does_not_answer_times_out_and_says_so(self):
        self.daemon.mode = "stall"
        with self.assertLogs("hicache", logging.WARNING) as logs:
            self.assertEqual(self.client.delete(NS, HASHES, timeout_s=0.3), [Status.TIMED_OUT] * 2)
        said = warnings_of(logs)
        self.assertEqual(len(said), 1, said)
        for text in (said[0], self.client.last_error):
            self.assertIn(self.address, text)
            self.assertIn("did not answer in time", text)


if __name__ == "__main__":
    unittest.main()
