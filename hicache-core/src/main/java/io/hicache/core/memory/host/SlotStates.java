package io.hicache.core.memory.host;

import io.hicache.core.util.Checks;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * The life of each host slot, so that a slot being written or read is never freed or reused:
 *
 * <pre>
 *   FREE --reserve--> RESERVED --beginWrite--> WRITING --commit--> READY(0) --beginRead--> READY(n+1)
 *     ^                  |  ^                     |                  |  ^                      |
 *     +-----release------+  +-------abort---------+                  |  +-------endRead--------+
 *     +---------------------------release (no readers)---------------+
 * </pre>
 *
 * Lock-free: each slot is one int (state in the low two bits, readers above), changed by compare-and-set.
 * Thread-safe.
 */
final class SlotStates {
    static final int FREE = 0;
    static final int RESERVED = 1;
    static final int WRITING = 2;
    static final int READY = 3;
    private static final int STATE_MASK = 3;
    private static final int ONE_READER = 4;

    private final AtomicIntegerArray slots;

    SlotStates(int capacity) {
        slots = new AtomicIntegerArray(capacity);
    }

    int capacity() {
        return slots.length();
    }

    static int state(int word) {
        return word & STATE_MASK;
    }

    static int readers(int word) {
        return word >>> 2;
    }

    int word(int slot) {
        return slots.get(Objects.checkIndex(slot, slots.length()));
    }

    /** Sets a state outright: for slots just handed out by the allocator, and for restoring after a reopen. */
    void set(int slot, int state) {
        slots.set(slot, state);
    }

    /** Moves {@code slot} from {@code from} to {@code to}, or throws naming what the slot is doing. */
    void transition(int slot, int from, int to, String action) {
        if (!slots.compareAndSet(slot, from, to)) {
            throw new IllegalStateException("host slot " + slot + " cannot " + action + ": it is "
                    + describe(slots.get(slot)) + ", not " + describe(from));
        }
    }

    /** Adds a reader if the slot is READY; false otherwise. */
    boolean tryBeginRead(int slot) {
        while (true) {
            int w = word(slot);
            if (state(w) != READY) {
                return false;
            }
            if (slots.compareAndSet(slot, w, w + ONE_READER)) {
                return true;
            }
        }
    }

    /** Removes a reader. */
    void endRead(int slot) {
        while (true) {
            int w = word(slot);
            Checks.requireState(
                    state(w) == READY && readers(w) > 0,
                    "host slot %d has no reader to end: it is %s",
                    slot,
                    describe(w));
            if (slots.compareAndSet(slot, w, w - ONE_READER)) {
                return;
            }
        }
    }

    /**
     * Frees a RESERVED slot, or a READY one nobody reads. Returns the state it left (RESERVED or READY).
     *
     * @throws IllegalStateException for a slot being written, being read, or already free
     */
    int release(int slot) {
        while (true) {
            int w = word(slot);
            boolean releasable = w == RESERVED || w == READY;
            if (!releasable) {
                throw new IllegalStateException("host slot " + slot + " cannot be released: it is " + describe(w));
            }
            if (slots.compareAndSet(slot, w, FREE)) {
                return w;
            }
        }
    }

    static String describe(int word) {
        return switch (state(word)) {
            case FREE -> "free";
            case RESERVED -> "reserved";
            case WRITING -> "being written";
            default -> readers(word) == 0 ? "ready" : "ready and being read by " + readers(word);
        };
    }
}
