package io.hicache.server.daemon;

import io.hicache.core.store.PageStatus;
import io.netty.channel.Channel;
import io.netty.util.Attribute;
import io.netty.util.AttributeKey;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Leases on slab pages for same-host clients, which read the pages by mapping the slab file: while a lease lives its
 * pages are pinned (neither evicted nor their blocks reused). A lease ends when its holder releases it, when it
 * expires, or when its connection closes. Reservations (protocol version 2) are the same for writes: room in the
 * slab that a client fills and commits; one that ends uncommitted is abandoned (its room freed). Leases and
 * reservations share one id sequence, which starts at 1: id 0 names none. Each connection may hold at most
 * {@code server.max-leases-per-connection} leases and reservations together: a request takes a slot
 * ({@link #tryHold}) before it pins or reserves anything, and the slot is given back when its lease or reservation
 * ends. Thread-safe.
 */
final class Leases {
    private record Lease(Channel owner, List<SlabPage> entries, long expiresNanos) {}

    /** Room for each page of a RESERVE (null where none was taken: {@code statuses} says why). */
    record Reservation(Channel owner, Room[] rooms, PageStatus[] statuses, long expiresNanos) {}

    /** Leases and reservations a connection holds, and slots taken for ones being made. */
    private static final AttributeKey<AtomicInteger> HELD = AttributeKey.valueOf(Leases.class, "held");

    private final PageIndex pages;
    private final SlabSpace space;
    private final int maxPerConnection;
    private final Map<Long, Lease> leases = new ConcurrentHashMap<>();
    private final Map<Long, Reservation> reservations = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();

    Leases(PageIndex pages, SlabSpace space, int maxPerConnection) {
        this.pages = pages;
        this.space = space;
        this.maxPerConnection = maxPerConnection;
    }

    /**
     * Takes a slot for a lease or reservation of {@code owner}, which {@link #grant} or {@link #reserve} then fills
     * (or {@link #unhold} gives back); false, taking none, when the connection holds its limit already.
     */
    boolean tryHold(Channel owner) {
        AtomicInteger held = held(owner);
        int now;
        do {
            now = held.get();
            if (now >= maxPerConnection) {
                return false;
            }
        } while (!held.compareAndSet(now, now + 1));
        return true;
    }

    /** Gives back a slot {@link #tryHold} took that no lease or reservation filled. */
    void unhold(Channel owner) {
        held(owner).decrementAndGet();
    }

    private static AtomicInteger held(Channel owner) {
        Attribute<AtomicInteger> a = owner.attr(HELD);
        AtomicInteger held = a.get();
        if (held == null) {
            AtomicInteger fresh = new AtomicInteger();
            held = a.setIfAbsent(fresh);
            if (held == null) {
                held = fresh;
            }
        }
        return held;
    }

    /** Takes ownership of the pins on {@code entries} (the non-null ones) for {@code millis}, in a slot taken. */
    long grant(Channel owner, List<SlabPage> entries, long millis) {
        long id = ids.incrementAndGet();
        leases.put(id, new Lease(owner, entries, System.nanoTime() + millis * 1_000_000));
        return id;
    }

    /** Holds {@code rooms} for {@code owner} for {@code millis}, until committed or abandoned, in a slot taken. */
    long reserve(Channel owner, Room[] rooms, PageStatus[] statuses, long millis) {
        long id = ids.incrementAndGet();
        reservations.put(id, new Reservation(owner, rooms, statuses, System.nanoTime() + millis * 1_000_000));
        return id;
    }

    /** Ends reservation {@code id} of {@code owner} and hands it over (to be committed); null if unknown or foreign. */
    @Nullable
    Reservation take(Channel owner, long id) {
        Reservation r = reservations.get(id);
        if (r == null || r.owner != owner || !reservations.remove(id, r)) {
            return null;
        }
        unhold(owner);
        return r;
    }

    /** Ends lease or reservation {@code id} if {@code owner} holds it; false for an unknown or foreign one. */
    boolean release(Channel owner, long id) {
        Lease l = leases.get(id);
        if (l != null && l.owner == owner && leases.remove(id, l)) {
            unhold(owner);
            unpin(l);
            return true;
        }
        Reservation r = take(owner, id);
        if (r != null) {
            abandon(r);
            return true;
        }
        return false;
    }

    /** Ends the leases and reservations of a closed connection. */
    void releaseAll(Channel owner) {
        leases.forEach((id, l) -> {
            if (l.owner == owner && leases.remove(id, l)) {
                unhold(owner);
                unpin(l);
            }
        });
        reservations.forEach((id, r) -> {
            if (r.owner == owner && reservations.remove(id, r)) {
                unhold(owner);
                abandon(r);
            }
        });
    }

    /**
     * Ends expired leases and reservations; the server runs this every second. A failure to end one is logged and
     * the rest go on: an exception out of here would cancel the schedule, and nothing would expire again.
     */
    void expire() {
        long now = System.nanoTime();
        leases.forEach((id, l) -> {
            if (now - l.expiresNanos > 0 && leases.remove(id, l)) {
                unhold(l.owner);
                guarded("lease " + id, () -> unpin(l));
            }
        });
        reservations.forEach((id, r) -> {
            if (now - r.expiresNanos > 0 && reservations.remove(id, r)) {
                unhold(r.owner);
                guarded("reservation " + id, () -> abandon(r));
            }
        });
    }

    private static void guarded(String what, Runnable ending) {
        try {
            ending.run();
        } catch (RuntimeException e) {
            System.getLogger(Leases.class.getName())
                    .log(System.Logger.Level.ERROR, "ending expired " + what + " failed; expiry goes on", e);
        }
    }

    int active() {
        return leases.size();
    }

    /** Reservations held now. */
    int reserved() {
        return reservations.size();
    }

    private void abandon(Reservation r) {
        for (Room room : r.rooms) {
            if (room != null) {
                space.free(room);
            }
        }
    }

    private void unpin(Lease l) {
        for (SlabPage e : l.entries) {
            if (e != null) {
                pages.unpin(e);
            }
        }
    }
}
