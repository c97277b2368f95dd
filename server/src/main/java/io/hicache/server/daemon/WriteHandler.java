package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.hicache.storage.remote.protocol.WriteRequest;
import io.hicache.storage.remote.protocol.WriteRequest.Clear;
import io.hicache.storage.remote.protocol.WriteRequest.ClearAll;
import io.hicache.storage.remote.protocol.WriteRequest.Commit;
import io.hicache.storage.remote.protocol.WriteRequest.Delete;
import io.hicache.storage.remote.protocol.WriteRequest.Put;
import io.hicache.storage.remote.protocol.WriteRequest.Reserve;
import io.hicache.storage.remote.protocol.WriteRequest.Retain;
import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.zip.CRC32C;
import org.jspecify.annotations.Nullable;

/**
 * The writes' work (docs/protocol.md §3: PUT, DELETE, CLEAR, CLEAR_ALL, RESERVE, COMMIT). A PUT or RESERVE takes room
 * page by page, first on the event loop while no page needs eviction ({@link EvictionChoice#NONE}), then on a worker
 * that may evict and wait for the write-behind up to the deadline; a PUT's bodies are checked against their
 * checksums and copied from the request's frame into the slab, the only copy of a page on its way in. DELETE and
 * COMMIT run on a worker; a clear answers when its L3 part ends or at its deadline, whichever comes first.
 *
 * <p>Stateless apart from the daemon it serves; thread-safe.
 */
final class WriteHandler {
    private final ServerConfig config;
    private final SlabCache cache;
    private final Leases leases;

    WriteHandler(ServerConfig config, SlabCache cache, Leases leases) {
        this.config = config;
        this.cache = cache;
        this.leases = leases;
    }

    /**
     * The work of a write; {@code landed}: the frame of a PUT whose bodies the {@link PutLander} received into rooms,
     * else null.
     */
    Work work(Call call, WriteRequest request, PutLander.@Nullable LandedFrame landed) {
        return switch (request) {
            case Put put -> {
                PutInProgress p = new PutInProgress(call, put, landed);
                yield new Work(() -> p.advance(false), () -> p.advance(true));
            }
            case Reserve reserve -> {
                ReservationInProgress r = new ReservationInProgress(call, reserve);
                yield new Work(() -> r.advance(false), () -> r.advance(true));
            }
            // On a worker: it checksums every page (twice on a CRC-32 connection), which would hold up the event
            // loop's other connections.
            case Commit commit -> Work.slow(() -> commit(call, commit));
            case Delete delete -> Work.slow(() -> call.statuses(cache.removals.delete(delete.keys(), call.deadline())));
            case Clear clear ->
                Work.deferred(() ->
                        clear(call, "namespace " + clear.namespace(), () -> cache.removals.clear(clear.namespace())));
            case ClearAll all -> Work.deferred(() -> clear(call, "every namespace", cache.removals::clearAll));
            // On the event loop: a touch and a few fields per page, no I/O.
            case Retain retain ->
                Work.quick(() -> call.statuses(cache.retention.retain(
                        retain.keys(), retain.priority(), retain.retentionMillis(), retain.demote())));
        };
    }

    /**
     * A CLEAR or CLEAR_ALL: the slab's pages at once, L3's in the background ({@link Removals#clear}); answered when
     * both are done, or at the deadline (ERROR TIMED_OUT saying what was done), whichever comes first. The future
     * completes once the answer is sent.
     */
    private static CompletableFuture<?> clear(Call call, String what, Supplier<Removals.Clearing> start) {
        if (call.deadline().isOver()) {
            call.fail(
                    Wire.E_TIMED_OUT,
                    "clear of " + what + " not started: its deadline had passed; nothing was removed");
            return CompletableFuture.completedFuture(null);
        }
        Removals.Clearing clearing = start.get();
        if (clearing.inL3() == null) {
            call.send(call.begin());
            return CompletableFuture.completedFuture(null);
        }
        return clearing.inL3()
                .copy()
                .orTimeout(Math.max(0, call.deadline().remainingNanos()), TimeUnit.NANOSECONDS)
                .handle((ignored, t) -> {
                    Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
                    if (cause == null) {
                        call.send(call.begin());
                    } else if (cause instanceof TimeoutException) {
                        call.fail(
                                Wire.E_TIMED_OUT,
                                "clear of " + what + " is partial: the host slab's pages are "
                                        + "removed (" + clearing.removedHere()
                                        + "); the L3 clear did not finish before the "
                                        + "deadline and goes on in the background (" + clearing.describeL3()
                                        + "), so L3 may "
                                        + "still hold pages; repeat the clear to wait for it");
                    } else {
                        call.fail(
                                Wire.E_INTERNAL,
                                "clear of " + what + " failed: the host slab's pages are removed ("
                                        + clearing.removedHere()
                                        + "), the L3 clear failed and L3 may still hold pages: " + cause);
                    }
                    return null;
                });
    }

    /** A PUT in progress: pages are stored in order, first on the event loop while no eviction is needed. */
    private final class PutInProgress {
        private final Call call;
        private final Put put;
        /** The pages' CRC-32C, what the slab keeps: the request's own, or converted from CRC-32 page by page. */
        private final int[] crcs;

        private final PageStatus[] statuses;
        /** The pages stored so far, pinned until the last is stored: a later page of the request must not evict them. */
        private final List<SlabPage> stored = new ArrayList<>();

        private int next;
        /** Where page {@link #next}'s body starts in the bodies. */
        private int at;

        private int checkedUpTo;
        /** Rooms that hold pages' bodies already (taken page by page), or null. */
        private final PutLander.@Nullable LandedFrame landed;
        /**
         * A PUT flagged {@code UNCHECKED} on a CRC-32C connection: its pages are stored with the client's checksums,
         * their bodies unchecked (readers check them: docs/protocol.md §3 PUT). On a CRC-32 connection the flag
         * saves nothing, as the slab's CRC-32C must be computed from the bytes anyway: those are checked.
         */
        private final boolean unchecked;

        PutInProgress(Call call, Put put, PutLander.@Nullable LandedFrame landed) {
            this.call = call;
            this.put = put;
            this.landed = landed;
            this.crcs = call.checksum() == WireChecksum.CRC32C
                    ? put.crcs()
                    : put.crcs().clone();
            this.statuses = new PageStatus[put.keys().size()];
            this.at = put.bodies().readerIndex();
            this.unchecked = put.unchecked() && call.checksum() == WireChecksum.CRC32C;
        }

        /**
         * Stores the pages not yet stored, answering when all are; {@code mayWait} false stops (returning false) at
         * the first page that needs eviction or waiting.
         */
        boolean advance(boolean mayWait) {
            try {
                return storeRest(mayWait);
            } catch (RuntimeException e) {
                stored.forEach(cache.pages::unpin); // the request fails as a whole: its pages are ordinary pages now
                stored.clear();
                throw e;
            }
        }

        private boolean storeRest(boolean mayWait) {
            Deadline deadline = call.deadline();
            EvictionChoice choice = mayWait ? EvictionChoice.until(deadline) : EvictionChoice.NONE;
            int[] lengths = put.lengths();
            for (; next < lengths.length; next++) {
                ByteBuf body = put.bodies().slice(at, lengths[next]);
                PageStatus s;
                Room room = landed == null ? null : landed.take(next);
                if (deadline.isOver()) {
                    if (room != null) {
                        cache.space.free(room);
                    }
                    s = PageStatus.stoppedBy(deadline);
                } else if (room != null && landed != null) {
                    s = storeLanded(landed, room);
                } else if (lengths[next] > config.maxPageBytes()) {
                    s = PageStatus.REJECTED;
                } else if (checkedUpTo <= next && !checked(body)) {
                    s = PageStatus.FAILED; // damaged on the way: not stored
                } else {
                    checkedUpTo = next + 1; // a page left for the worker is not checked again there
                    switch (cache.writes.put(put.keys().get(next), body, lengths[next], crcs[next], choice)) {
                        case SlabWrites.Deferred deferred -> {
                            return false;
                        }
                        case SlabWrites.Refused refused -> s = refused.why();
                        case SlabWrites.Stored done -> {
                            s = done.status();
                            if (done.pinned() != null) {
                                stored.add(done.pinned());
                            }
                        }
                    }
                }
                if (unchecked && s == PageStatus.OK) {
                    cache.counters.uncheckedPages.increment();
                }
                statuses[next] = s;
                at += lengths[next];
            }
            // A PUT is a chain's pages, first page first: used last page first, its suffix goes before its prefix.
            cache.pages.useLastFirst(put.keys(), statuses);
            // unpinned before the answer leaves: a client that puts again at once (on another pooled connection)
            // may need these pages evicted to make room, as a namespace at its quota does
            stored.forEach(cache.pages::unpin);
            stored.clear();
            call.statuses(statuses);
            return true;
        }

        /**
         * A page whose body was received into its room: checked by the checksums the lander computed as it landed (a
         * damaged body frees the room: FAILED), then made a stored page, as a PUT's copied page is.
         */
        private PageStatus storeLanded(PutLander.LandedFrame frame, Room room) {
            if (!unchecked) {
                if (frame.wireSum(next) != crcs[next]) {
                    cache.space.free(room);
                    return PageStatus.FAILED;
                }
                crcs[next] = frame.slabSum(next); // CRC-32C, the slab's (the same number on a CRC-32C connection)
            }
            SlabWrites.Stored done = cache.writes.commit(room, crcs[next]);
            if (done.pinned() != null) {
                stored.add(done.pinned());
            }
            if (done.status() == PageStatus.OK) {
                cache.counters.landedPages.increment();
            }
            return done.status();
        }

        /**
         * Whether the body matches its checksum; on a connection of another checksum than CRC-32C, the page's CRC-32C
         * (what the slab keeps) takes its place once it does.
         */
        private boolean checked(ByteBuf body) {
            if (unchecked) {
                return true; // stored with the client's CRC-32C
            }
            WireChecksum sum = call.checksum();
            if (sum == WireChecksum.CRC32C) {
                return crc32c(body) == crcs[next];
            }
            if (sum.of(body) != crcs[next]) {
                return false;
            }
            crcs[next] = crc32c(body);
            return true;
        }
    }

    /** The CRC-32C of a body, straight from its memory. */
    private static int crc32c(ByteBuf body) {
        if (body.nioBufferCount() == 1) {
            return PageChecksum.of(MemorySegment.ofBuffer(body.nioBuffer()));
        }
        CRC32C crc = new CRC32C();
        for (ByteBuffer b : body.nioBuffers()) {
            crc.update(b);
        }
        return (int) crc.getValue();
    }

    /** A RESERVE in progress: room is taken in order, first on the event loop while no eviction is needed. */
    private final class ReservationInProgress {
        private final Call call;
        private final Reserve reserve;
        private final Room[] rooms;
        private final PageStatus[] statuses;
        private int next;
        /** Set once the rooms belong to a reservation: from then on only the reservation frees them. */
        private boolean handedOver;
        /** Whether the connection had a lease slot for this reservation (decided once, at the first page). */
        private @Nullable Boolean held;

        ReservationInProgress(Call call, Reserve reserve) {
            this.call = call;
            this.reserve = reserve;
            this.rooms = new Room[reserve.keys().size()];
            this.statuses = new PageStatus[reserve.keys().size()];
        }

        /** As {@link PutInProgress#advance}: false (with {@code mayWait} false) at the first page that needs eviction. */
        boolean advance(boolean mayWait) {
            try {
                return reserveRest(mayWait);
            } catch (RuntimeException e) {
                for (Room room : rooms) {
                    if (room != null && !handedOver) {
                        cache.space.free(room); // the request fails as a whole: nothing stays reserved
                    }
                }
                if (Boolean.TRUE.equals(held) && !handedOver) {
                    leases.unhold(call.channel());
                }
                throw e;
            }
        }

        private boolean reserveRest(boolean mayWait) {
            Deadline deadline = call.deadline();
            EvictionChoice choice = mayWait ? EvictionChoice.until(deadline) : EvictionChoice.NONE;
            if (held == null) {
                held = leases.tryHold(call.channel());
            }
            for (; next < rooms.length; next++) {
                // Over server.max-leases-per-connection nothing is reserved (PUT the pages instead).
                SlabWrites.RoomOutcome outcome = !held
                        ? new SlabWrites.Refused(PageStatus.REJECTED)
                        : deadline.isOver()
                                ? new SlabWrites.Refused(PageStatus.stoppedBy(deadline))
                                : cache.writes.room(reserve.keys().get(next), reserve.lengths()[next], choice);
                switch (outcome) {
                    case Room room -> {
                        statuses[next] = PageStatus.OK;
                        rooms[next] = room;
                    }
                    case SlabWrites.Refused refused -> statuses[next] = refused.why();
                    case SlabWrites.Deferred deferred -> {
                        return false;
                    }
                }
            }
            long holdMillis = Math.min(reserve.holdMillis(), config.maxLease().toMillis());
            long id = held ? leases.reserve(call.channel(), rooms, statuses, holdMillis) : 0;
            handedOver = true;
            if (held && !call.channel().isActive()) {
                leases.release(call.channel(), id); // closed meanwhile: its reservations were abandoned before this one
            }
            ByteBuf answer = call.begin();
            answer.writeLong(id);
            answer.writeInt(rooms.length);
            for (int i = 0; i < rooms.length; i++) {
                answer.writeByte(Wire.status(statuses[i]));
                answer.writeLong(rooms[i] == null ? -1 : rooms[i].offset());
            }
            call.send(answer);
            return true;
        }
    }

    /**
     * A COMMIT: each page written into its room is checked against its checksum (unless the client sent none) and
     * stored.
     */
    private void commit(Call call, Commit commit) {
        Leases.Reservation res = leases.take(call.channel(), commit.reservationId());
        if (res == null) {
            call.fail(
                    Wire.E_MALFORMED,
                    "no such reservation " + commit.reservationId()
                            + " (unknown, committed or abandoned already, or another connection's)");
            return;
        }
        Room[] rooms = res.rooms();
        int[] crcs = commit.crcs();
        if (crcs.length != rooms.length) {
            for (Room room : rooms) {
                if (room != null) {
                    cache.space.free(room);
                }
            }
            call.fail(
                    Wire.E_MALFORMED,
                    "the reservation has " + rooms.length + " pages, the COMMIT names " + crcs.length
                            + "; it is abandoned");
            return;
        }
        PageStatus[] statuses = new PageStatus[rooms.length];
        List<SlabPage> stored = new ArrayList<>();
        List<StoreKey> committed = new ArrayList<>(); // the reservation's pages, in order, for useLastFirst
        WireChecksum sum = call.checksum();
        try {
            for (int i = 0; i < rooms.length; i++) {
                Room room = rooms[i];
                if (room == null) {
                    statuses[i] = res.statuses()[i];
                    continue;
                }
                committed.add(room.key());
                rooms[i] = null; // from here on this page is stored or abandoned, whatever happens to the rest
                MemorySegment bytes = cache.space.bytes(room);
                if (!commit.noChecksums() && sum.of(bytes) != crcs[i]) {
                    cache.space.free(room);
                    statuses[i] = PageStatus.FAILED;
                } else {
                    // Without the client's checksums the page's own is taken from the slab now: the bytes crossed
                    // no wire, and from here on every read checks them against it.
                    int crc32c = sum == WireChecksum.CRC32C && !commit.noChecksums() ? crcs[i] : PageChecksum.of(bytes);
                    SlabWrites.Stored done = cache.writes.commit(room, crc32c);
                    statuses[i] = done.status();
                    if (done.status() == PageStatus.OK) {
                        cache.counters.sameHostWrittenBytes.add(bytes.byteSize());
                    }
                    if (done.pinned() != null) {
                        stored.add(done.pinned());
                    }
                }
            }
            cache.pages.useLastFirst(committed, null); // as a PUT's: the chain's suffix goes first
            call.statuses(statuses);
        } finally {
            for (Room room : rooms) {
                if (room != null) {
                    cache.space.free(room);
                }
            }
            stored.forEach(cache.pages::unpin);
        }
    }
}
