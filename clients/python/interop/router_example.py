"""A cache-aware router's side of HiCache (docs/routing.md): which daemon holds the longest prefix of a prompt, per tier.

It learns that two ways, and this example does both:

* **Events** (pyzmq and msgpack; Debian: python3-zmq, python3-msgpack): each daemon publishes what its slab and its
  L3 store gain and lose, with a placement (tier, store, namespace id) on every event. :class:`EventFollower` keeps a
  :class:`TierView` per daemon from them, following sequence numbers and filling gaps from the replay socket.
* **Questions**: PREFIX_HITS, through the Python client (:meth:`hicache.HiCacheClient.prefix_hits`) or over HTTP
  (``POST /v1/prefix-hits`` on the metrics port, for routers in other languages: :func:`http_prefix_hits`).

The gap-recovery rule (docs/routing.md): a batch whose sequence number is past the next one expected means batches
were lost; ask the replay socket for everything from the next expected one. If the replay's first batch is past it too
(the lost batches aged out of the publisher's buffer), or the replay does not answer, the view of that daemon can no
longer be trusted: forget it (:meth:`TierView.forget`), rebuild from the events that come next, and meanwhile ask the
daemon itself (PREFIX_HITS) for the prompts being routed. ``AllBlocksCleared`` also forgets the daemon's view.

Scoring (:func:`score`): a page in the host slab is worth ``SLAB_WEIGHT`` (it is served from memory), a page only in
L3 ``L3_WEIGHT`` (it costs a disk or network read); the score of a daemon for a prompt is the sum over its longest
leading run. Run as a program, it routes one prompt::

    router_example.py --engine a=127.0.0.1:7370:9090 --engine b=127.0.0.1:7371:9091 \\
        --model llama --dtype bf16 --page-tokens 16 --tokens 1,2,3,...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kv_events_subscriber import END_SEQ, Malformed, check, decode  # noqa: E402

SLAB_WEIGHT = 1.0
L3_WEIGHT = 0.5
TIERS = ("slab", "l3")


def block_id(page_hash: bytes) -> int:
    """SGLang's block id of a page hash: its first 8 bytes, big-endian, as a signed 64-bit number."""
    return int.from_bytes(page_hash[:8], "big", signed=True)


@dataclass
class TierView:
    """One daemon's pages as its events tell them: per (namespace id, tier), the block ids held."""

    held: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    forgotten: int = 0

    def apply(self, events: Iterable[tuple]) -> None:
        for e in events:
            if e[0] == "STORED":
                placement = e[7]
                check(placement is not None, "a daemon's BlockStored carries a placement")
                self.held.setdefault((placement["namespace"], placement["tier"]), set()).update(e[5])
            elif e[0] == "REMOVED":
                placement = e[3]
                check(placement is not None, "a daemon's BlockRemoved carries a placement")
                self.held.get((placement["namespace"], placement["tier"]), set()).difference_update(e[2])
            else:  # AllBlocksCleared: the daemon cannot say which pages went
                self.forget()

    def forget(self) -> None:
        self.held.clear()
        self.forgotten += 1

    def leading_run(self, namespace_id: str, tier: str, block_ids: Sequence[int]) -> int:
        """How many of the pages, from the first, the tier holds without a gap."""
        held = self.held.get((namespace_id, tier), set())
        n = 0
        while n < len(block_ids) and block_ids[n] in held:
            n += 1
        return n

    def runs(self, namespace_id: str, block_ids: Sequence[int]) -> dict[str, int]:
        """The leading runs of the slab, of L3, and of either (as PREFIX_HITS answers them)."""
        slab = self.held.get((namespace_id, "slab"), set())
        l3 = self.held.get((namespace_id, "l3"), set())
        either = 0
        while either < len(block_ids) and (block_ids[either] in slab or block_ids[either] in l3):
            either += 1
        return {"slab": self.leading_run(namespace_id, "slab", block_ids),
                "l3": self.leading_run(namespace_id, "l3", block_ids), "any": either}


class EventFollower:
    """Follows one daemon's events into a :class:`TierView`. ``drop``: sequence numbers to ignore when they come
    live, as if the network had lost them (for tests of the gap-recovery rule). Not thread-safe."""

    def __init__(self, endpoint: str, replay_endpoint: str, topic: str = "", drop: Iterable[int] = ()):
        import zmq  # only a follower needs pyzmq

        self._zmq = zmq
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(endpoint)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode("utf-8"))
        self.topic = topic.encode("utf-8")
        self.replay_endpoint = replay_endpoint
        self.view = TierView()
        self.next_seq = 0
        self.drop = set(drop)
        self.dropped: list[int] = []
        self.replayed: list[int] = []

    def poll(self, timeout_ms: int = 100) -> int:
        """Applies the live batches that come within ``timeout_ms`` (and any gap before them); returns how many."""
        applied = 0
        while self.sub.poll(timeout_ms):
            topic, seq_bytes, payload = self.sub.recv_multipart()
            check(topic == self.topic, "topic %r" % (topic,))
            seq = int.from_bytes(seq_bytes, "big")
            if seq in self.drop:
                self.drop.discard(seq)
                self.dropped.append(seq)
                continue
            if seq == 0 and self.next_seq > 0:
                self.view.forget()  # the daemon restarted: its numbering and its pages began again
                self.next_seq = 0
            if seq < self.next_seq:
                continue  # had it from a replay
            if seq > self.next_seq:
                self.catch_up(below=seq)
            if seq > self.next_seq:
                # The replay could not fill the gap (aged out, or no answer): the view was forgotten; go on from here.
                self.view.forget()
                self.next_seq = seq
            self._apply(seq, payload)
            applied += 1
            timeout_ms = 0
        return applied

    def catch_up(self, below: Optional[int] = None) -> None:
        """The gap rule: replays what is kept from the next expected batch (up to ``below``); forgets the view when
        the batches wanted aged out of the publisher's buffer or the replay does not answer."""
        zmq = self._zmq
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(self.replay_endpoint)
        try:
            dealer.send_multipart([b"", self.next_seq.to_bytes(8, "big")])
            while True:
                if not dealer.poll(5_000):
                    self.view.forget()
                    return
                frames = dealer.recv_multipart()
                check(len(frames) == 3 and frames[0] == b"", "a replay answer is (empty, seq, payload)")
                seq = int.from_bytes(frames[1], "big", signed=True)
                if seq == END_SEQ:
                    return
                if seq < self.next_seq or (below is not None and seq >= below):
                    continue  # had it, or the live stream brings it
                if seq > self.next_seq:
                    self.view.forget()  # aged out: rebuild from here on
                    self.next_seq = seq
                if seq == self.next_seq:
                    self.replayed.append(seq)
                    self._apply(seq, frames[2])
        finally:
            dealer.close()

    def _apply(self, seq: int, payload: bytes) -> None:
        _ts, _rank, events = decode(payload)
        self.view.apply(events)
        self.next_seq = seq + 1

    def close(self) -> None:
        self.sub.close()
        self.ctx.term()


def http_prefix_hits(url: str, namespace: dict, hashes: Optional[Sequence[bytes]] = None,
                     tokens: Optional[Sequence[int]] = None, token: str = "", timeout_s: float = 5.0) -> dict:
    """POST /v1/prefix-hits: ``namespace`` as its JSON fields (model, dtype, page_tokens, ...), then either page
    hashes or token ids. Returns ``{"pages", "slab", "l3", "any", "l3_state"}``."""
    body = dict(namespace)
    if hashes is not None:
        body["hashes"] = [h.hex() for h in hashes]
    else:
        body["tokens"] = list(tokens or [])
    request = urllib.request.Request(url.rstrip("/") + "/v1/prefix-hits", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        result: dict = json.loads(answer.read())
        return result


def score(runs: dict[str, int]) -> float:
    """A daemon's worth for a prompt: its slab's run at SLAB_WEIGHT a page, what L3 adds beyond it at L3_WEIGHT."""
    slab = runs["slab"]
    return slab * SLAB_WEIGHT + max(0, runs["any"] - slab) * L3_WEIGHT


def choose(candidates: dict[str, dict[str, int]]) -> str:
    """The daemon with the best :func:`score` (ties: the first named)."""
    return max(candidates, key=lambda name: score(candidates[name]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", required=True,
                        help="name=host:port:metrics_port (asked over HTTP on its metrics port; [v6]:port:port)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--page-tokens", type=int, required=True)
    parser.add_argument("--tokens", required=True, help="the prompt's token ids, comma-separated")
    parser.add_argument("--token", default="", help="the daemons' auth (or tenant) token")
    parser.add_argument("--https", action="store_true", help="the metrics ports speak HTTPS (daemons with TLS)")
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",") if t]
    namespace = {"model": args.model, "dtype": args.dtype, "page_tokens": args.page_tokens}
    answers = {}
    for spec in args.engine:
        name, _, where = spec.partition("=")
        host, _port, metrics = where.rsplit(":", 2)  # an IPv6 host in brackets keeps its colons
        scheme = "https" if args.https else "http"
        answers[name] = http_prefix_hits(f"{scheme}://{host}:{metrics}", namespace, tokens=tokens, token=args.token)
    for name, runs in answers.items():
        print(f"{name}: slab {runs['slab']} l3 {runs['l3']} any {runs['any']} of {runs['pages']} pages, "
              f"score {score(runs):.1f}")
    print("route to", choose(answers))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Malformed as e:
        print("malformed events:", e, file=sys.stderr)
        sys.exit(2)
