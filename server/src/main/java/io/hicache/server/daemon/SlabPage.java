package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import io.hicache.core.usage.PageUsageIndex;
import io.netty.buffer.ByteBuf;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * A page of the host tier: its key, where its bytes are (a block of the slab, or a spill buffer of its own for a page
 * read from L3 that the slab had no room for), their length and CRC-32C, and its state: users, whether L3 has it yet
 * ({@link #dirty}), whether it has left the index ({@link #removed}).
 *
 * <p>Who releases what: every {@link #pins} taken (a reader, a lease, a send, the write-behind) is given back through
 * {@link PageIndex#unpin} or {@link PageIndex#release}; the page's memory (block or spill) is freed once it has left
 * the index and its last user has let go, exactly once ({@link #freed}). Thread-safe: the fields that change are
 * atomic or volatile, except {@link #writeTries}, the write-behind thread's.
 */
final class SlabPage {
    final StoreKey key;
    /** The block's offset in the slab; -1 for a spilled page. */
    final long offset;
    /** The block's buddy order; -1 for a spilled page. */
    final int order;

    final int length;
    /** The page's CRC-32C, what the daemon keeps whatever a connection's checksum. */
    final int crc;
    /**
     * The page's CRC-32 (version 2's wire checksum), once a GET computed it from bytes that matched {@link #crc}:
     * {@code 1L << 32 | crc32}, 0 until then. Later GETs send it without two more passes over the page (on a host of
     * few cores those passes held the daemon's sends back); the client's check of what arrives still catches bytes
     * damaged in the slab since.
     */
    volatile long crc32Memo;

    /** Users of the page's memory (readers, lease holders, the write-behind): it is freed when the last goes. */
    final AtomicInteger pins = new AtomicInteger();

    final AtomicBoolean freed = new AtomicBoolean();
    /** Its number in the usage index; {@link PageUsageIndex#NO_ENTRY} for a page outside the index. */
    volatile long usage = PageUsageIndex.NO_ENTRY;
    /** Not yet in L3 (nor given up): the write-behind has it, and it may not be evicted. */
    volatile boolean dirty;
    /** Out of the index (deleted, cleared, evicted, flushed, or never in it): freed when unused. */
    volatile boolean removed;
    /** Its retention priority, 0-99 ({@link Retention}); 0 unless a RETAIN named it. */
    volatile int priority;
    /** How long its priority holds after each use, in nanoseconds; 0 for none. */
    volatile long retentionNanos;
    /** When its priority lapses ({@link System#nanoTime} scale) unless it is used again. */
    volatile long retainUntilNanos;
    /** Demoted by a RETAIN: the first to go, until it is used again. */
    volatile boolean demoted;
    /** Failed tries to write it behind; touched by the write-behind thread only. */
    int writeTries;

    /** The page's bytes outside the slab, for a page read from L3 when the slab had no room; else null. */
    final @Nullable ByteBuf spill;

    /** A page in the block of {@code room}, with checksum {@code crc}. */
    SlabPage(Room room, int crc) {
        this(room.key(), room.offset(), room.order(), room.length(), crc, null);
    }

    /** A page in a block of the slab. */
    SlabPage(StoreKey key, long offset, int order, int length, int crc) {
        this(key, offset, order, length, crc, null);
    }

    private SlabPage(StoreKey key, long offset, int order, int length, int crc, @Nullable ByteBuf spill) {
        this.key = key;
        this.offset = offset;
        this.order = order;
        this.length = length;
        this.crc = crc;
        this.spill = spill;
    }

    /**
     * A page outside the slab and the index: {@code length} bytes in {@code spill}, which it owns from now on (released
     * when the page is freed), pinned once for the caller.
     */
    static SlabPage spilled(StoreKey key, ByteBuf spill, int length, int crc) {
        SlabPage p = new SlabPage(key, -1, -1, length, crc, spill);
        p.pins.incrementAndGet();
        p.removed = true; // not in the index: freed when the caller unpins it
        return p;
    }

    /** True if the page is in the slab (at {@link #offset}), false if it is a spilled copy. */
    boolean inSlab() {
        return spill == null;
    }
}
