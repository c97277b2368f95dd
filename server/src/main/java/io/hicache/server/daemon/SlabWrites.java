package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreSlot;
import io.hicache.core.usage.PageUsageIndex;
import io.netty.buffer.ByteBuf;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * Pages entering the slab from clients: room for a page (a free block, or one eviction makes, within the namespace's
 * quota), filled from a PUT's body or by a same-host client (RESERVE), then made a stored page that the write-behind
 * copies to L3. Each step answers a result record; how far finding room may go is the caller's
 * {@link EvictionChoice}.
 *
 * <p>Thread-safe.
 */
final class SlabWrites {
    /** What storing a page came to. */
    sealed interface PutOutcome permits Stored, Refused, Deferred {}

    /** What asking for room came to: the {@link Room}, or why there is none. */
    sealed interface RoomOutcome permits Room, Refused, Deferred {}

    /**
     * A page made a stored page ({@code OK}), or found stored already ({@code EXISTS}, its room freed).
     *
     * @param pinned without L3, the page stored, pinned for the caller until its request is answered (so that the
     *     request's later pages cannot evict it: the caller {@link PageIndex#unpin}s it); else null. With L3 a page is
     *     evictable only once L3 has it, so it needs no pin.
     */
    record Stored(PageStatus status, @Nullable SlabPage pinned) implements PutOutcome {}

    /** No room: {@code EXISTS} (stored already), {@code REJECTED} (too large, or none could be made), or the deadline's. */
    record Refused(PageStatus why) implements PutOutcome, RoomOutcome {}

    /** Room needs eviction or waiting, which {@link EvictionChoice#NONE} does not allow: nothing was taken. */
    enum Deferred implements PutOutcome, RoomOutcome {
        NEEDS_EVICTION
    }

    private final ServerConfig config;
    private final SlabSpace space;
    private final PageIndex pages;
    private final Eviction eviction;
    private final StoreSlot l3;
    private final WriteBehind writeBehind;
    private final ServerEvents events;
    private final LongAdder rejectedPuts;
    private final Health health;
    /** {@code server.tenant-quota}, read once: settings parse their text on each read, and every put asks. */
    private final long tenantQuota;

    SlabWrites(
            ServerConfig config,
            SlabSpace space,
            PageIndex pages,
            Eviction eviction,
            StoreSlot l3,
            WriteBehind writeBehind,
            ServerEvents events,
            LongAdder rejectedPuts,
            Health health) {
        this.config = config;
        this.tenantQuota = config.tenantQuota();
        this.space = space;
        this.pages = pages;
        this.eviction = eviction;
        this.l3 = l3;
        this.writeBehind = writeBehind;
        this.events = events;
        this.rejectedPuts = rejectedPuts;
        this.health = health;
    }

    /**
     * Stores {@code length} bytes read from {@code src} (the caller keeps it) under {@code key}, whose checksum the
     * caller has verified to be {@code crc} (CRC-32C), finding room as {@code choice} allows.
     */
    PutOutcome put(StoreKey key, ByteBuf src, int length, int crc, EvictionChoice choice) {
        return switch (room(key, length, choice)) {
            case Room room -> {
                src.getBytes(src.readerIndex(), space.bytes(room).asByteBuffer());
                yield commit(room, crc);
            }
            case Refused refused -> refused;
            case Deferred deferred -> deferred;
        };
    }

    /**
     * Room for {@code key}'s page of {@code length} bytes, charged to its namespace, as {@code choice} allows: what a
     * RESERVE hands a same-host client, and a PUT fills. The holder commits it or frees it ({@link SlabSpace#free}).
     */
    RoomOutcome room(StoreKey key, int length, EvictionChoice choice) {
        if (pages.contains(key)) {
            return new Refused(PageStatus.EXISTS);
        }
        int order = space.orderFor(length);
        if (order < 0 || length > config.maxPageBytes()) {
            rejectedPuts.increment();
            return new Refused(PageStatus.REJECTED);
        }
        long block = space.blockBytes(order);
        Namespace ns = key.namespace();
        long quota = space.quota();
        // Charge the block against the quota first, so that concurrent puts cannot all slip under it.
        long used = space.charge(ns, block);
        if (used > quota
                && quota > 0
                && !(choice instanceof EvictionChoice.Until until
                        && eviction.fitQuota(ns, used - quota, until.deadline()))) {
            space.discharge(ns, block);
            return noRoom(choice, false); // the namespace's quota, not the slab
        }
        if (tenantQuota > 0 && !ns.tenant().isEmpty()) {
            long tenantUsed = space.tenantBytes(ns.tenant());
            if (tenantUsed > tenantQuota
                    && !(choice instanceof EvictionChoice.Until until
                            && eviction.fitTenantQuota(ns.tenant(), tenantQuota, until.deadline()))) {
                space.discharge(ns, block);
                return noRoom(choice, false); // the tenant's quota
            }
        }
        long offset = choice instanceof EvictionChoice.Until until
                ? eviction.allocate(order, until.deadline())
                : space.allocate(order);
        if (offset < 0) {
            space.discharge(ns, block);
            return noRoom(choice, true);
        }
        return new Room(key, offset, order, length);
    }

    /**
     * Why there is no room: deferred where eviction was not allowed, else REJECTED, or the deadline's status. A slab
     * with no room ({@code slabFull}, rather than a namespace over its quota) is a failing daemon ({@link Health}).
     */
    private RoomOutcome noRoom(EvictionChoice choice, boolean slabFull) {
        return switch (choice) {
            case EvictionChoice.None none -> Deferred.NEEDS_EVICTION;
            case EvictionChoice.Until until -> {
                rejectedPuts.increment();
                if (slabFull) {
                    health.noRoom(space.slabBytes(), space.freeBytes(), writeBehind.pendingPages());
                }
                Deadline deadline = until.deadline();
                yield new Refused(deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.REJECTED);
            }
        };
    }

    /**
     * Makes the page written into {@code room} a stored page, whose checksum the caller has verified to be {@code crc}
     * (CRC-32C), and hands it to the write-behind; if the key was stored meanwhile, frees the room (EXISTS).
     */
    Stored commit(Room room, int crc) {
        SlabPage p = new SlabPage(room, crc);
        p.dirty = l3.writesAccepted();
        boolean hold = !p.dirty;
        if (hold) {
            p.pins.incrementAndGet();
        }
        if (pages.add(p, hold ? PageUsageIndex.PINNED | PageUsageIndex.FLAGGED : 0) != p) {
            space.free(room);
            return new Stored(PageStatus.EXISTS, null);
        }
        events.storedHere(p.key);
        health.stored();
        if (p.dirty) {
            writeBehind.enqueue(p);
        }
        return new Stored(PageStatus.OK, hold ? p : null);
    }
}
