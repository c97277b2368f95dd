"""A router rebuilds a daemon's per-tier contents from its KV events alone, some batches lost on the way and recovered
through the replay socket (docs/routing.md's gap rule), and its view agrees with the daemon's own answers to
PREFIX_HITS, over the protocol and over HTTP. The daemon's slab and its file L3 are both small, so pages are evicted from
both tiers (L3 by the file store's own capacity eviction, which the daemon learns of through ``PageStore.onDropped``).

Needs pyzmq and msgpack (Debian: python3-zmq, python3-msgpack); skips without them. CI runs it under /usr/bin/python3.
"""

import json
import os
import random
import socket
import sys
import time
import unittest

from hicache import HiCacheClient, Namespace

from .daemon_process import DaemonProcess, missing_daemon

INTEROP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop")
PAGE = 64 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EventsRebuildTest(unittest.TestCase):
    def setUp(self):
        try:
            import msgpack  # noqa: F401
            import zmq  # noqa: F401
        except ImportError as e:
            self.skipTest(f"pyzmq and msgpack are needed (Debian: python3-zmq python3-msgpack): {e}")
        why = missing_daemon()
        if why:
            self.skipTest(why)
        sys.path.insert(0, INTEROP)
        self.addCleanup(sys.path.remove, INTEROP)

    def test_a_router_rebuilds_every_tier_from_events_and_agrees_with_prefix_hits(self):
        import router_example

        pub, replay = free_port(), free_port()
        events = json.dumps({"publisher": "zmq", "endpoint": f"tcp://*:{pub}", "replay_endpoint": f"tcp://*:{replay}",
                             "buffer_steps": 100000})
        daemon = DaemonProcess("--server.kv-events-config", events, "--server.max-page-bytes", "256KiB",
                               "--file.capacity", "4MiB", host_size="2MiB", store="file", metrics=True).start()
        self.addCleanup(daemon.stop)
        # Batches 5, 6, 11 and 17 are "lost" when they come live: the follower must see the gaps and replay them.
        follower = router_example.EventFollower(f"tcp://127.0.0.1:{pub}", f"tcp://127.0.0.1:{replay}",
                                                drop=[5, 6, 11, 17])
        self.addCleanup(follower.close)
        time.sleep(0.5)  # a SUB socket's subscription reaches the publisher a moment after it connects
        client = HiCacheClient("127.0.0.1", daemon.port, local=False)
        self.addCleanup(client.close)

        rng = random.Random(42)
        namespaces = [Namespace("m", "bf16", extra=f"user-{i}") for i in range(3)]
        chains = {ns.id: [[rng.randbytes(32) for _ in range(12)] for _ in range(4)] for ns in namespaces}
        body = bytearray(rng.randbytes(PAGE))
        for ns in namespaces:
            for chain in chains[ns.id]:
                statuses = client.put(ns, chain, [body] * len(chain))
                self.assertTrue(all(s.name in ("OK", "EXISTS") for s in statuses), statuses)
                follower.poll(0)
        # Reads bring some evicted pages back into the slab (promotions are events too).
        for ns in namespaces:
            first = chains[ns.id][0]
            client.get(ns, first[:4], [bytearray(PAGE) for _ in range(4)])
            follower.poll(0)

        def compare() -> list[str]:
            follower.poll(50)
            follower.catch_up()
            differences = []
            for ns in namespaces:
                for i, chain in enumerate(chains[ns.id]):
                    answer = client.prefix_hits(ns, chain)
                    self.assertEqual("answered", answer.l3_state)
                    view = follower.view.runs(ns.id, [router_example.block_id(h) for h in chain])
                    daemon_runs = {"slab": answer.slab, "l3": answer.l3, "any": answer.any}
                    if view != daemon_runs:
                        differences.append(f"{ns.extra} chain {i}: events say {view}, the daemon {daemon_runs}")
            return differences

        deadline = time.monotonic() + 30
        differences = compare()
        while differences and time.monotonic() < deadline:  # the write-behind and L3's eviction run in the background
            time.sleep(0.5)
            differences = compare()
        self.assertEqual([], differences)
        self.assertEqual([5, 6, 11, 17], sorted(follower.dropped), "the batches meant to be lost came live")
        self.assertTrue(set(follower.dropped) <= set(follower.replayed), (follower.dropped, follower.replayed))
        self.assertEqual(0, follower.view.forgotten)

        # Both tiers lost pages, and both said so: the comparison above covered evictions, not only stores.
        runs = [client.prefix_hits(ns, chain) for ns in namespaces for chain in chains[ns.id]]
        self.assertTrue(any(r.slab < 12 for r in runs), runs)
        self.assertTrue(any(r.l3 < 12 for r in runs), runs)
        self.assertTrue(any(r.slab > 0 for r in runs) and any(r.l3 > 0 for r in runs), runs)

        # The HTTP endpoint answers as the protocol does.
        ns = namespaces[1]
        chain = chains[ns.id][3]
        url = f"http://127.0.0.1:{daemon.metrics_port()}"
        answer = router_example.http_prefix_hits(url, {"model": "m", "dtype": "bf16", "extra": ns.extra}, chain)
        expected = client.prefix_hits(ns, chain)
        self.assertEqual((expected.slab, expected.l3, expected.any, 12), (answer["slab"], answer["l3"], answer["any"],
                                                                          answer["pages"]))


if __name__ == "__main__":
    unittest.main()
