"""A KV event subscriber that reads HiCache's stream as a cache-aware router (sgl-router, Dynamo) reads SGLang's.

It needs pyzmq and msgpack (Debian: python3-zmq, python3-msgpack), nothing from hicache. The Java test
events-zmq's PythonSubscriberTest runs it as a child process; it is also a small working example of a subscriber.

    kv_events_subscriber.py --endpoint tcp://127.0.0.1:5557 --replay tcp://127.0.0.1:5558 [--topic T] [--late]

What it does, as a router must:

* SUB socket on ``--endpoint``, subscribed to ``--topic``. Each message is three frames: topic, sequence number
  (8 bytes, big-endian), payload (msgpack).
* Sequence numbers start at 0 and rise by one per batch. A gap (a PUB socket drops messages for a subscriber that
  joined late or fell behind) is filled from the ROUTER socket on ``--replay``: send the first missing sequence number
  as 8 bytes big-endian, read ``(seq, payload)`` pairs until the end marker ``(-1, empty)``.
* ``--late``: the subscriber joined after the publisher started, so it first replays everything from sequence 0.
* The payload is SGLang's ``EventBatch``: ``[ts, [event, ...], attn_dp_rank]`` (the rank may be absent), each event
  a tagged array: ``["BlockStored", hashes, parent|None, token_ids, block_size, lora_id|None, medium]``,
  ``["BlockRemoved", hashes, medium]``, ``["AllBlocksCleared"]``. Anything else is an error (exit status 2).
* It keeps a router's view: which media hold each block.
* A daemon's events carry one more trailing field, HiCache's placement ``{"tier", "store", "namespace"}``
  (docs/kv-events.md); SGLang's decoders skip it, this one checks it.

Control on stdin: ``STOP <seq>`` ends the run once every batch up to ``<seq>`` was applied (replaying what is
missing). It prints ``READY`` when its sockets are connected, then at the end, one line per item:

    BATCH <seq> <live|replay> <ts> <rank|->
    STORED <medium> <parent|-> <block_size> <lora|-> <id,id,...> <token,token,...|->
    REMOVED <medium> <id,id,...>
    CLEARED
    VIEW <id> <medium,medium,...>
    DONE <batches>
"""

import argparse
import select
import sys
import time

import msgpack
import zmq

END_SEQ = -1
MEDIA = {"GPU", "CPU_PINNED", "DISK", "EXTERNAL"}


class Malformed(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Malformed(what)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def placement(event, index):
    """HiCache's trailing field, when there is one: {"tier": "slab"|"l3", "store": name, "namespace": id}."""
    if len(event) <= index:
        return None
    p = event[index]
    check(isinstance(p, dict) and set(p) == {"tier", "store", "namespace"}, "a placement map: %r" % (p,))
    check(p["tier"] in ("slab", "l3") and isinstance(p["store"], str), "a placement's tier and store: %r" % (p,))
    check(isinstance(p["namespace"], str) and len(p["namespace"]) == 32, "a placement's namespace id: %r" % (p,))
    return p


def decode(payload):
    """SGLang's EventBatch, checked field by field as msgspec's typed decoder would."""
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    check(isinstance(batch, list) and len(batch) in (2, 3), "a batch is [ts, events(, rank)]: %r" % (batch,))
    ts, events = batch[0], batch[1]
    rank = batch[2] if len(batch) == 3 else None
    check(isinstance(ts, float), "ts is a float: %r" % (ts,))
    check(rank is None or is_int(rank), "attn_dp_rank is an int: %r" % (rank,))
    check(isinstance(events, list), "events is a list")
    out = []
    for e in events:
        check(isinstance(e, list) and e and isinstance(e[0], str), "an event is a tagged array: %r" % (e,))
        tag = e[0]
        if tag == "BlockStored":
            check(len(e) in (7, 8), "BlockStored has 6 fields after its tag (7 with HiCache's placement): %r" % (e,))
            _, hashes, parent, tokens, block_size, lora, medium = e[:7]
            check(isinstance(hashes, list) and hashes and all(is_int(h) for h in hashes), "block_hashes")
            check(all(-2**63 <= h < 2**63 for h in hashes), "block hashes are int64")
            check(parent is None or (is_int(parent) and -2**63 <= parent < 2**63), "parent_block_hash")
            check(isinstance(tokens, list) and all(is_int(t) and 0 <= t < 2**32 for t in tokens), "token_ids")
            check(is_int(block_size) and block_size >= 0, "block_size")
            check(not tokens or len(tokens) == len(hashes) * block_size, "a block_size of tokens per block")
            check(lora is None or is_int(lora), "lora_id")
            check(medium in MEDIA, "medium: %r" % (medium,))
            out.append(("STORED", medium, parent, block_size, lora, hashes, tokens, placement(e, 7)))
        elif tag == "BlockRemoved":
            check(len(e) in (3, 4), "BlockRemoved has 2 fields after its tag (3 with HiCache's placement): %r" % (e,))
            _, hashes, medium = e[:3]
            check(isinstance(hashes, list) and hashes and all(is_int(h) for h in hashes), "block_hashes")
            check(medium in MEDIA, "medium: %r" % (medium,))
            out.append(("REMOVED", medium, hashes, placement(e, 3)))
        elif tag == "AllBlocksCleared":
            check(len(e) == 1, "AllBlocksCleared has no fields")
            out.append(("CLEARED",))
        else:
            raise Malformed("unknown event %r" % (tag,))
    return ts, rank, out


class Subscriber:
    def __init__(self, endpoint, replay_endpoint, topic):
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(endpoint)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode("utf-8"))
        self.replay_endpoint = replay_endpoint
        self.topic = topic.encode("utf-8")
        self.next_seq = 0
        self.batches = []  # (seq, source, ts, rank, events)
        self.view = {}  # block id -> set of media

    def apply(self, seq, source, payload):
        check(seq == self.next_seq, "batch %d applied after %d" % (seq, self.next_seq - 1))
        ts, rank, events = decode(payload)
        for e in events:
            if e[0] == "STORED":
                for h in e[5]:
                    self.view.setdefault(h, set()).add(e[1])
            elif e[0] == "REMOVED":
                for h in e[2]:
                    media = self.view.get(h, set())
                    check(e[1] in media, "block %d removed from %s, where it was never stored" % (h, e[1]))
                    media.discard(e[1])
            else:
                self.view.clear()
        self.batches.append((seq, source, ts, rank, events))
        self.next_seq = seq + 1

    def replay(self, below=None):
        """Asks for every kept batch from next_seq; applies those below ``below`` (all when None)."""
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(self.replay_endpoint)
        try:
            dealer.send_multipart([b"", self.next_seq.to_bytes(8, "big")])
            while True:
                check(dealer.poll(10_000), "no answer to a replay request from %d" % self.next_seq)
                frames = dealer.recv_multipart()
                check(len(frames) == 3 and frames[0] == b"", "a replay answer is (empty, seq, payload)")
                seq = int.from_bytes(frames[1], "big", signed=True)
                if seq == END_SEQ:
                    check(frames[2] == b"", "the end marker's payload is empty")
                    return
                if seq >= self.next_seq and (below is None or seq < below):
                    self.apply(seq, "replay", frames[2])
        finally:
            dealer.close()

    def on_live(self, frames):
        check(len(frames) == 3, "a message is three frames: %d" % len(frames))
        topic, seq_bytes, payload = frames
        check(topic == self.topic, "topic %r" % (topic,))
        check(len(seq_bytes) == 8, "an 8-byte sequence number")
        seq = int.from_bytes(seq_bytes, "big")
        if seq < self.next_seq:
            return  # had it from a replay already
        if seq > self.next_seq:
            self.replay(below=seq)
        check(seq == self.next_seq, "batches %d..%d are gone from the replay buffer" % (self.next_seq, seq - 1))
        self.apply(seq, "live", payload)

    def run(self, late):
        if late:
            self.replay()
        print("READY", flush=True)
        stop_at = None
        poller = zmq.Poller()
        poller.register(self.sub, zmq.POLLIN)
        quiet_since = time.monotonic()
        while stop_at is None or self.next_seq <= stop_at:
            if dict(poller.poll(100)).get(self.sub):
                self.on_live(self.sub.recv_multipart())
                quiet_since = time.monotonic()
                continue
            if stop_at is None and select.select([sys.stdin], [], [], 0)[0]:
                line = sys.stdin.readline().split()
                check(len(line) == 2 and line[0] == "STOP", "stdin says STOP <seq>: %r" % (line,))
                stop_at = int(line[1])
            if stop_at is not None and self.next_seq <= stop_at and time.monotonic() - quiet_since > 0.5:
                self.replay()  # the tail never came live (sent before the subscription took)
                quiet_since = time.monotonic()

    def report(self):
        for seq, source, ts, rank, events in self.batches:
            print("BATCH %d %s %r %s" % (seq, source, ts, "-" if rank is None else rank))
            for e in events:
                if e[0] == "STORED":
                    _, medium, parent, size, lora, hashes, tokens, _placement = e
                    print("STORED %s %s %d %s %s %s" % (medium, "-" if parent is None else parent, size,
                                                        "-" if lora is None else lora, join(hashes),
                                                        join(tokens) if tokens else "-"))
                elif e[0] == "REMOVED":
                    print("REMOVED %s %s" % (e[1], join(e[2])))
                else:
                    print("CLEARED")
        for h in sorted(self.view):
            if self.view[h]:
                print("VIEW %d %s" % (h, ",".join(sorted(self.view[h]))))
        print("DONE %d" % len(self.batches), flush=True)

    def close(self):
        self.sub.close()
        self.ctx.term()


def join(values):
    return ",".join(str(v) for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True, help="the publisher's PUB address")
    parser.add_argument("--replay", required=True, help="the publisher's replay (ROUTER) address")
    parser.add_argument("--topic", default="")
    parser.add_argument("--late", action="store_true", help="replay from sequence 0 before reading live")
    args = parser.parse_args()
    s = Subscriber(args.endpoint, args.replay, args.topic)
    try:
        s.run(args.late)
        s.report()
    except Malformed as e:
        print("MALFORMED %s" % e, flush=True)
        return 2
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
