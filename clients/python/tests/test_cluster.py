"""HiCacheClusterClient against a real etcd and three daemons (issue 39): placement agrees with Java's bit for bit
(the vector io.hicache.cluster.PlacementTest checks too), pages spread over the members and come back whole, a
killed member's pages fail within the timeout while the others are served, and its slots move once it leaves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from hicache import Namespace, Status
from hicache.cluster import HiCacheClusterClient, Placement, ClusterMember, seed_of, slot_of, wait_for

from .daemon_process import DaemonProcess

ETCD = "/usr/bin/etcd"
NS = Namespace("cluster-py", "bfloat16", 0, 0, 1)


class PlacementVectorTest(unittest.TestCase):
    def test_the_shared_vector_holds(self) -> None:
        self.assertEqual(0x66570FF05A207404, seed_of("node-a"))
        self.assertEqual(0xABCDE, slot_of(bytes([0xAB, 0xCD, 0xEF]) + bytes(29)))
        members = [ClusterMember(i, "127.0.0.1", 7370, 0, 0) for i in ("node-c", "node-a", "node-e", "node-b", "node-d")]
        p = Placement(members, 3)
        expected = {
            0: ["node-e", "node-b", "node-c"],
            1: ["node-a", "node-b", "node-d"],
            2: ["node-e", "node-b", "node-d"],
            3: ["node-b", "node-c", "node-a"],
            12345: ["node-a", "node-d", "node-c"],
            777777: ["node-e", "node-b", "node-c"],
            1048575: ["node-a", "node-b", "node-c"],
        }
        for slot, owners in expected.items():
            self.assertEqual(owners, [p.members[i].id for i in p.owners(slot)], f"slot {slot}")
            self.assertEqual(owners[0], p.members[p.first_owner(slot)].id)

    def test_refusals(self) -> None:
        a = ClusterMember("a", "h", 1, 0, 0)
        with self.assertRaises(ValueError):
            Placement([a, a])
        with self.assertRaises(RuntimeError):
            Placement([]).owner_of(bytes(32))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@unittest.skipUnless(os.access(ETCD, os.X_OK), "etcd is not installed (apt-get install etcd-server)")
class ClusterClientTest(unittest.TestCase):
    etcd: subprocess.Popen[bytes]
    folder: str
    endpoint: str
    daemons: list[DaemonProcess]

    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="hicache-pytest-etcd-")
        client, peer = _free_port(), _free_port()
        cls.endpoint = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        cls.etcd = subprocess.Popen(
            [ETCD, "--name", "t", "--data-dir", os.path.join(cls.folder, "data"), "--listen-client-urls", cls.endpoint,
             "--advertise-client-urls", cls.endpoint, "--listen-peer-urls", peer_url,
             "--initial-advertise-peer-urls", peer_url, "--initial-cluster", f"t={peer_url}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", client), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        cls.daemons = []
        try:
            for i in range(3):
                cls.daemons.append(DaemonProcess("--cluster.etcd", cls.endpoint, "--cluster.name", "py",
                                                 "--cluster.lease-ttl", "2s", "--cluster.member-id", f"p{i}").start())
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        for d in cls.daemons:
            d.stop()
        cls.etcd.kill()
        cls.etcd.wait(10)
        shutil.rmtree(cls.folder, ignore_errors=True)

    def test_pages_spread_come_back_whole_and_a_lost_member_is_a_bounded_miss(self) -> None:
        with HiCacheClusterClient([self.endpoint], "py", timeout_s=2.0, local=False) as c:
            self.assertTrue(wait_for(lambda: len(c.membership.placement.members) == 3, 10), "3 members")
            hashes = [os.urandom(32) for _ in range(300)]
            pages = [os.urandom(8192) for _ in hashes]
            self.assertEqual([Status.OK] * 300, c.put(NS, hashes, pages))
            owners = {c.membership.placement.owner_of(h).id for h in hashes}
            self.assertEqual({"p0", "p1", "p2"}, owners)
            targets = [bytearray(8192) for _ in hashes]
            self.assertEqual([Status.OK] * 300, c.get(NS, hashes, targets))
            self.assertEqual(pages, [bytes(t) for t in targets])
            self.assertEqual(300, c.leading_hits(NS, hashes))
            self.assertEqual([True] * 300, c.held(NS, hashes))

            lost = [i for i, h in enumerate(hashes) if c.membership.placement.owner_of(h).id == "p0"]
            self.daemons[0].kill()
            start = time.monotonic()
            statuses = c.get(NS, hashes, [bytearray(8192) for _ in hashes])
            self.assertLess(time.monotonic() - start, 2.0 + 1.5, "no call outlives its timeout")
            for i, s in enumerate(statuses):
                self.assertEqual(i in lost, s != Status.OK, f"page {i}: {s}")
            self.assertTrue(wait_for(lambda: len(c.membership.placement.members) == 2, 8), "p0 left with its lease")
            after = c.get(NS, [hashes[i] for i in lost], [bytearray(8192) for _ in lost])
            self.assertEqual([Status.MISS] * len(lost), after, "its slots moved to members that never had them")
            self.assertEqual(min(lost), c.leading_hits(NS, hashes))


if __name__ == "__main__":
    unittest.main()
