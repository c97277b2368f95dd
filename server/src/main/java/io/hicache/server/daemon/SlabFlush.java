package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import java.util.ArrayList;
import java.util.List;

/**
 * FLUSH: empties the host slab of the pages nothing pins (leases, reads and sends in progress, a put's own pages
 * until it has stored its last), in every namespace, while L3 keeps its copies. A page L3 lacks yet is dropped once
 * the write-behind has written it, waiting for that up to the deadline. Pages put while a flush runs are not its
 * concern. Thread-safe.
 */
final class SlabFlush {
    /** What a flush did: pages it dropped from the slab, and pages it found there and had to leave. */
    record Flushed(long dropped, long kept) {}

    private final PageIndex pages;
    private final WriteBehind writeBehind;
    private final ServerEvents events;

    SlabFlush(PageIndex pages, WriteBehind writeBehind, ServerEvents events) {
        this.pages = pages;
        this.writeBehind = writeBehind;
        this.events = events;
    }

    /** Drops what it can now, then what the write-behind writes, until nothing unwritten is left or the deadline. */
    Flushed run(Deadline deadline) {
        List<SlabPage> left = pages.snapshot();
        long dropped = 0;
        while (true) {
            List<StoreKey> gone = new ArrayList<>();
            List<SlabPage> kept = new ArrayList<>();
            boolean unwritten = false;
            for (SlabPage p : left) {
                if (pages.drop(p)) {
                    gone.add(p.key);
                } else if (!p.removed) {
                    kept.add(p);
                    unwritten |= p.dirty;
                }
            }
            events.removedHere(gone);
            dropped += gone.size();
            left = kept;
            if (!unwritten || deadline.isOver()) {
                return new Flushed(dropped, left.size());
            }
            writeBehind.awaitProgress(Waits.pollMillis(deadline));
        }
    }
}
