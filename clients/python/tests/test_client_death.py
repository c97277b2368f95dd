"""Clients killed with SIGKILL in the middle of a lease, a reservation and a put (issue 40, part 4): the daemon ends
what they held once their connections close, within a bounded time, and serves new clients. A client's death must
not hold pages, slab rooms or frame memory for ever (LMCache #4676: a client's death deadlocked the server)."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import unittest
from pathlib import Path

from hicache import HiCacheClient, Status

from .support import DaemonModule, namespace_for, random_hashes, random_pages

MODULE = DaemonModule()
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down

CLIENT_ROOT = Path(__file__).resolve().parents[1]
BOUND_S = 10.0

# A raw client: HELLO (version 3, CRC-32C), then one request that leaves something held, then "held" on stdout and
# a long sleep, which SIGKILL ends.
CHILD = textwrap.dedent("""
    import socket, struct, sys, time, zlib
    from hicache import protocol
    from hicache.namespace import Namespace
    from hicache.checksums import crc32c
    port, what, model, key_hex, length = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    ns, key = Namespace(model).encode(), bytes.fromhex(key_hex)
    s = socket.create_connection(("127.0.0.1", port))
    def send(op, rid, payload, declared=None):
        s.sendall(protocol.frame_prefix(op, rid, 60_000, len(payload) if declared is None else declared) + payload)
    def answer():
        head = b""
        while len(head) < 4:
            head += s.recv(4 - len(head))
        (n,) = struct.unpack(">I", head)
        body = b""
        while len(body) < n:
            body += s.recv(n - len(body))
        return body
    send(protocol.Op.HELLO, 1, protocol.hello_payload(3, "", protocol.CHECKSUM_CRC32C))
    answer()
    table = ns + struct.pack(">I", 1) + key + struct.pack(">I", length)
    if what == "lease":
        send(protocol.Op.LEASE, 2, table + struct.pack(">I", 600_000))
        answer()
    elif what == "reserve":
        send(protocol.Op.RESERVE, 2, table + struct.pack(">I", 600_000))
        answer()
    else:  # a put whose frame never ends: half the body sent
        body = bytes(length)
        payload = table + struct.pack(">I", crc32c(body)) + body
        send(protocol.Op.PUT, 2, payload[: len(payload) // 2], declared=len(payload))
    print("held", flush=True)
    time.sleep(600)
""")


def gauge(stats: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", stats, re.MULTILINE)
    if match is None:
        raise AssertionError(f"{name} is not in the daemon's metrics")
    return float(match.group(1))


class ClientDeathTest(unittest.TestCase):
    def setUp(self):
        self.client = HiCacheClient(port=MODULE.port, local=False, timeout_s=20)
        self.addCleanup(self.client.close)
        self.ns = namespace_for(self)

    def kill_while_holding(self, what: str, key: bytes, length: int, held_gauge: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(CLIENT_ROOT))
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(MODULE.port), what, self.ns.model, key.hex(),
                                  str(length)], env=env, stdout=subprocess.PIPE, text=True)
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.wait)
        self.addCleanup(lambda: child.poll() is None and child.kill())
        self.assertEqual(child.stdout.readline().strip(), "held", f"the {what} child got to the point of holding")
        deadline = time.monotonic() + BOUND_S
        while gauge(self.client.stats(), held_gauge) < 1:
            self.assertLess(time.monotonic(), deadline, f"the daemon never showed the {what} held")
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        while gauge(self.client.stats(), held_gauge) > 0:
            self.assertLess(time.monotonic() - killed, BOUND_S, f"{held_gauge} still held {BOUND_S} s after the kill")
            time.sleep(0.02)

    def assert_new_clients_are_served(self) -> None:
        pages, hashes = random_pages(8192, 8192), random_hashes(2)
        with HiCacheClient(port=MODULE.port, local=False, timeout_s=10) as fresh:
            self.assertEqual(fresh.put(self.ns, hashes, pages), [Status.OK] * 2)
            targets = [bytearray(8192), bytearray(8192)]
            self.assertEqual(fresh.get(self.ns, hashes, targets), [Status.OK] * 2)
            self.assertEqual([bytes(t) for t in targets], pages)

    def test_a_client_killed_holding_a_lease_leaves_nothing_pinned(self):
        page, key = random_pages(65536)[0], random_hashes(1)[0]
        self.assertEqual(self.client.put(self.ns, [key], [page]), [Status.OK])
        self.kill_while_holding("lease", key, 65536, "hicache_server_leases")
        # the page is no longer pinned: it can be deleted at once
        self.assertEqual(self.client.delete(self.ns, [key]), [Status.OK])
        self.assert_new_clients_are_served()

    def test_a_client_killed_holding_a_reservation_gives_its_room_back_and_stores_nothing(self):
        key = random_hashes(1)[0]
        free_before = gauge(self.client.stats(), "hicache_server_slab_free_bytes")
        self.kill_while_holding("reserve", key, 1 << 20, "hicache_server_reservations")
        self.assertEqual(gauge(self.client.stats(), "hicache_server_slab_free_bytes"), free_before, "room given back")
        self.assertEqual(self.client.get(self.ns, [key], [bytearray(1 << 20)]), [Status.MISS], "nothing half-written")
        self.assert_new_clients_are_served()

    def test_a_client_killed_in_the_middle_of_a_put_frame_frees_it_and_stores_nothing(self):
        key = random_hashes(1)[0]
        self.kill_while_holding("put", key, 4 << 20, "hicache_server_partial_frame_bytes")
        self.assertEqual(self.client.get(self.ns, [key], [bytearray(4 << 20)]), [Status.MISS], "nothing half-written")
        self.assert_new_clients_are_served()


if __name__ == "__main__":
    unittest.main()
