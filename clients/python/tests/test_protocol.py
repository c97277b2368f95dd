"""Wire format and client behaviour against scripted fake daemons: version fallback, answers out of order,
checksum failures, silent and broken connections. No real daemon needed."""

import dataclasses
import os
import struct
import tempfile
import threading
import time
import unittest
import zlib

from hicache import (HealthState, HiCacheClient, HiCacheConnectionError, HiCacheProtocolError, HiCacheTimeoutError,
                     Namespace, Status, crc32c)
from hicache.client import ANSWER_GRACE_S
from hicache import answers, protocol

from .fake_daemon import FakeDaemon, error_payload, hello_answer, hello_version, read_frame, send_frame

NS = Namespace("m")


class WireFormatTest(unittest.TestCase):
    def test_namespace_and_get_frame_of_the_documents_example(self):
        # docs/protocol.md §6: a GET of one 4-byte page, request id 7, namespace m / bfloat16 / 0 / 0 of 1 / "".
        self.assertEqual(NS.encode(2).hex(), "0001" "6d" "0008" + b"bfloat16".hex() + "00" "0000" "0001" "0000")
        # Version 3 adds format 2, no revision, no quantization, page size 0, no tenant.
        self.assertEqual(NS.encode().hex(), NS.encode(2).hex() + "0002" "0000" "0000" "00000000" "0000")
        payload = NS.encode(2) + struct.pack(">I", 1) + bytes(32) + struct.pack(">I", 4)
        frame = protocol.frame_prefix(protocol.Op.GET, 7, 0, len(payload)) + payload
        self.assertEqual(frame[:20].hex(), "0000004c" "11" "00" "0000" "0000000000000007" "00000000")
        self.assertEqual(len(frame), 4 + 76)

    def test_hello_payloads(self):
        self.assertEqual(protocol.hello_payload(1, "t", 0).hex(), "48435750" "0001" "0001" "74")
        self.assertEqual(protocol.hello_payload(2, "", 1).hex(), "48435750" "0002" "0000" "01")

    def test_namespace_rules_are_checked_before_sending(self):
        for bad in (dict(model=""), dict(model="m", tp_rank=1, tp_size=1), dict(model="m", order=2),
                    dict(model="m" * 513), dict(model="m", extra="x" * 513)):
            with self.assertRaises(ValueError, msg=bad):
                Namespace(**bad)


class AnswersTest(unittest.TestCase):
    def test_health_states(self):
        self.assertIs(answers.health_state(b"\x00"), HealthState.SERVING)
        self.assertIs(answers.health_state(b"\x01"), HealthState.SHUTTING_DOWN)
        for bad in (b"\x02", b"", b"\x00\x00"):
            with self.assertRaises(HiCacheProtocolError, msg=bad):
                answers.health_state(bad)

    def test_status_answers_are_checked_then_decoded_in_order(self):
        self.assertEqual(list(answers.page_statuses(struct.pack(">I2B", 2, 0, 1), 2)), [Status.OK, Status.EXISTS])
        for bad, pages in ((struct.pack(">I2B", 2, 0, 1), 3), (struct.pack(">IB", 2, 0), 2)):
            with self.assertRaises(HiCacheProtocolError):
                answers.page_statuses(bad, pages)
        decoded = answers.page_statuses(struct.pack(">I2B", 2, 0, 99), 2)
        self.assertIs(next(decoded), Status.OK)  # the page before an undefined status keeps its own
        with self.assertRaises(ValueError):
            next(decoded)

    def test_get_table_must_announce_the_bodies_that_follow(self):
        head = struct.pack(">IBIIBII", 2, 0, 64, 7, 2, 0, 0)
        self.assertEqual(answers.get_table_bytes(2), len(head))
        entries = answers.get_table(head, 2, len(head) + 64)
        self.assertEqual([(e.status, e.length, e.crc) for e in entries], [(Status.OK, 64, 7), (Status.MISS, 0, 0)])
        with self.assertRaises(HiCacheProtocolError):
            answers.get_table(head, 2, len(head) + 63)


class FakeDaemonTest(unittest.TestCase):
    def serve(self, handler) -> FakeDaemon:
        daemon = FakeDaemon(handler)
        self.addCleanup(daemon.close)
        self.addCleanup(lambda: self.assertEqual(daemon.errors, []))
        return daemon

    def client(self, daemon: FakeDaemon, local: bool = False, **kwargs) -> HiCacheClient:
        kwargs.setdefault("max_version", 2)  # the handlers answer HELLO as a version 2 daemon does
        client = HiCacheClient(port=daemon.port, local=local, **kwargs)
        self.addCleanup(client.close)
        return client

    def test_a_daemon_refusing_version_2_is_spoken_to_in_version_1_with_crc32c(self):
        versions = []

        def handler(sock):
            op, request_id, payload = read_frame(sock)
            versions.append(hello_version(payload))
            if versions[-1] != 1:
                send_frame(sock, 0xFF, request_id, error_payload(2, "protocol version 2 is not spoken here"))
                return
            send_frame(sock, 0x81, request_id, hello_answer(1))
            while True:
                op, request_id, payload = read_frame(sock)
                self.assertEqual(op, protocol.Op.HEALTH)
                send_frame(sock, 0x97, request_id, b"\x00")

        client = self.client(self.serve(handler), pool_size=1)
        self.assertEqual(client.health(), 0)
        self.assertEqual(client.protocol_version, 1)
        self.assertEqual(client.handshake().checksum, protocol.CHECKSUM_CRC32C)
        self.assertEqual(versions, [2, 1])

    def test_a_daemon_refusing_version_3_is_spoken_to_in_version_2_and_namespaces_it_cannot_carry_are_refused(self):
        versions = []

        def handler(sock):
            op, request_id, payload = read_frame(sock)
            versions.append(hello_version(payload))
            if versions[-1] != 2:
                send_frame(sock, 0xFF, request_id, error_payload(2, "protocol version 3 is not spoken here"))
                return
            send_frame(sock, 0x81, request_id, hello_answer(2))
            while True:
                op, request_id, payload = read_frame(sock)
                self.assertEqual(op, protocol.Op.DELETE)
                self.assertEqual(payload[:len(NS.encode(2))], NS.encode(2))
                send_frame(sock, 0x93, request_id, struct.pack(">IB", 1, 0))

        client = self.client(self.serve(handler), pool_size=1, max_version=3)
        self.assertEqual(client.delete(NS, [bytes(32)]), [Status.OK])
        self.assertEqual(client.protocol_version, 2)
        self.assertEqual(versions, [3, 2])
        revised = dataclasses.replace(NS, revision="r2")
        with self.assertRaisesRegex(ValueError, "cannot carry"):
            client.delete(revised, [bytes(32)])

    def test_health_is_a_health_state_and_an_undefined_state_is_a_protocol_error(self):
        states = [1, 2]

        def handler(sock):
            _, request_id, _ = read_frame(sock)
            send_frame(sock, 0x81, request_id, hello_answer(2))
            while True:
                op, request_id, _ = read_frame(sock)
                self.assertEqual(op, protocol.Op.HEALTH)
                send_frame(sock, 0x97, request_id, bytes([states.pop(0)]))

        client = self.client(self.serve(handler), pool_size=1)
        self.assertIs(client.health(), HealthState.SHUTTING_DOWN)
        with self.assertRaisesRegex(HiCacheProtocolError, "state 2"):
            client.health()

    def test_answers_out_of_order_are_matched_by_request_id(self):
        pages = {os.urandom(32): os.urandom(100 + i) for i in range(4)}
        corrupt = list(pages)[2]

        def handler(sock):
            _, request_id, _ = read_frame(sock)
            # A frame holds one page only, so the batch goes out as four pipelined frames.
            send_frame(sock, 0x81, request_id, hello_answer(2, max_frame=16 + 20 + 4 + 36 + 35, checksum=1))
            requests = [read_frame(sock) for _ in range(4)]
            send_frame(sock, 0x93, 999, struct.pack(">IB", 1, 0))  # an answer to no request of this call
            for op, request_id, payload in reversed(requests):
                self.assertEqual(op, protocol.Op.GET)
                key = payload[24:56]
                body = pages[key]
                crc = zlib.crc32(body) ^ (1 if key == corrupt else 0)
                send_frame(sock, 0x91, request_id, struct.pack(">IBII", 1, 0, len(body), crc) + body)
            # The page that failed its checksum is deleted, so that later reads miss it.
            op, request_id, payload = read_frame(sock)
            deleted.append((op, payload[len(NS.encode(2)) + 4:]))
            send_frame(sock, 0x93, request_id, struct.pack(">IB", 1, 0))

        deleted = []
        client = self.client(self.serve(handler), pool_size=1)
        targets = [bytearray(len(body)) for body in pages.values()]
        statuses = client.get(NS, list(pages), targets)
        expected = [Status.CORRUPT if key == corrupt else Status.OK for key in pages]
        self.assertEqual(statuses, expected)
        self.assertEqual(deleted, [(protocol.Op.DELETE, corrupt)])
        for key, target in zip(pages, targets):
            if key != corrupt:
                self.assertEqual(bytes(target), pages[key])

    def test_version_1_put_carries_crc32c(self):
        seen = []

        def handler(sock):
            _, request_id, _ = read_frame(sock)
            send_frame(sock, 0x81, request_id, hello_answer(1))
            op, request_id, payload = read_frame(sock)
            n = struct.unpack_from(">I", payload, 20)[0]
            _, length, crc = struct.unpack_from(">32sII", payload, 24)
            seen.append((op, n, length, crc, payload[24 + 40:]))
            send_frame(sock, 0x92, request_id, struct.pack(">IB", 1, 0))

        client = self.client(self.serve(handler), max_version=1)
        self.assertEqual(client.put(NS, [bytes(32)], [[b"1234", b"56789"]]), [Status.OK])
        self.assertEqual(seen, [(protocol.Op.PUT, 1, 9, 0xE3069283, b"123456789")])
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)

    def test_a_daemon_without_reserve_gets_put_and_is_remembered(self):
        slab = tempfile.NamedTemporaryFile(prefix="hicache-fake-slab-")
        self.addCleanup(slab.close)
        slab.write(bytes(4096))
        slab.flush()
        ops = []

        def handler(sock):
            _, request_id, _ = read_frame(sock)
            send_frame(sock, 0x81, request_id, hello_answer(2, slab=slab.name))
            while True:
                op, request_id, payload = read_frame(sock)
                ops.append(op)
                if op == protocol.Op.RESERVE:
                    send_frame(sock, 0xFF, request_id, error_payload(4, "unknown operation 0x1a"))
                else:
                    self.assertEqual(op, protocol.Op.PUT)
                    send_frame(sock, 0x92, request_id, struct.pack(">IB", 1, 0))

        client = self.client(self.serve(handler), local=True)
        self.assertEqual(client.put(NS, [bytes(32)], [b"page"]), [Status.OK])
        self.assertIs(client.reserve_supported, False)
        self.assertEqual(client.put(NS, [bytes(32)], [b"page"]), [Status.OK])
        self.assertEqual(ops, [protocol.Op.RESERVE, protocol.Op.PUT, protocol.Op.PUT])

    def test_a_silent_daemon_times_out_pages_and_raises_for_single_values(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def handler(sock):
            release.wait(30)

        client = self.client(self.serve(handler))
        started = time.monotonic()
        self.assertEqual(client.get(NS, [bytes(32)] * 2, [bytearray(8)] * 2, timeout_s=0.5), [Status.TIMED_OUT] * 2)
        self.assertLess(time.monotonic() - started, 0.5 + ANSWER_GRACE_S + 1.0)
        with self.assertRaises(HiCacheTimeoutError):
            client.leading_hits(NS, [bytes(32)], timeout_s=0.3)

    def test_a_connection_closed_in_the_middle_of_an_answer_keeps_the_pages_already_received(self):
        body = os.urandom(64)

        def handler(sock):
            _, request_id, _ = read_frame(sock)
            send_frame(sock, 0x81, request_id, hello_answer(2))
            _, request_id, _ = read_frame(sock)
            table = struct.pack(">IBIIBII", 2, 0, 64, zlib.crc32(body), 0, 64, zlib.crc32(body))
            answer = table + body + body[:10]  # the second body is cut short
            sock.sendall(struct.pack(">IBBHQI", 16 + len(table) + 128, 0x91, 0, 0, request_id, 0) + answer)

        client = self.client(self.serve(handler))
        targets = [bytearray(64), bytearray(64)]
        self.assertEqual(client.get(NS, [bytes(32), bytes(31) + b"\x01"], targets), [Status.OK, Status.FAILED])
        self.assertEqual(bytes(targets[0]), body)

    def test_nothing_listening_fails_pages_and_raises_for_single_values(self):
        daemon = self.serve(lambda sock: None)
        port = daemon.port
        daemon.close()
        client = HiCacheClient(port=port, local=False)
        self.addCleanup(client.close)
        self.assertEqual(client.put(NS, [bytes(32)], [b"x"]), [Status.FAILED])
        with self.assertRaises(HiCacheConnectionError):
            client.health()


if __name__ == "__main__":
    unittest.main()
