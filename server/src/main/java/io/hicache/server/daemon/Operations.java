package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.Channel;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.zip.CRC32C;

/**
 * The daemon's operations: each request is parsed on the event loop (every field checked against the frame before
 * anything is allocated for it) into {@link Work}, which first tries to finish there, without blocking (the pages
 * are all in the slab, a put needs no eviction), and otherwise finishes on a worker thread (L3 reads, eviction,
 * waiting for the write-behind). A page leaves the slab for the socket without a copy: the response wraps the slab's
 * memory, and the page stays pinned until the write completes.
 *
 * <p>Stateless apart from the server it serves; thread-safe.
 */
final class Operations {
    /** A request's identity, its header flags (0 on a version 1 connection, which ignores them) and its deadline. */
    record Request(int op, int flags, long id, Deadline deadline) {
        /** Version 2, LEASE: the client reads the slab itself and wants no checksums (the answer carries 0). */
        static final int NO_CHECKSUMS = 0x01;
    }

    /**
     * A parsed request's work: {@code inline} tries it on the event loop (true: done and answered); otherwise
     * {@code onWorker} runs it on a worker, or, where {@code later} is given, {@code later} starts it on a worker and
     * the request is done (answered) when the future it returns completes.
     */
    record Work(BooleanSupplier inline, Runnable onWorker, Supplier<CompletableFuture<?>> later) {
        Work(BooleanSupplier inline, Runnable onWorker) {
            this(inline, onWorker, null);
        }

        /** Work that is always quick: it runs on the event loop. */
        static Work quick(Runnable r) {
            return new Work(() -> {
                r.run();
                return true;
            }, r);
        }

        /** Work that may block: it always goes to a worker. */
        static Work slow(Runnable r) {
            return new Work(() -> false, r);
        }

        /** Work that starts on a worker and is answered when the future {@code start} returns completes. */
        static Work deferred(Supplier<CompletableFuture<?>> start) {
            return new Work(() -> false, null, start);
        }
    }

    private final HiCacheServer server;
    private final SlabCache cache;

    Operations(HiCacheServer server) {
        this.server = server;
        this.cache = server.cache;
    }

    /**
     * Parses a request of a connection that speaks {@code version} with page checksums {@code sum} into its work, or
     * null for an operation that version does not define.
     *
     * @throws ProtocolException if the payload is malformed
     */
    Work parse(Responder out, Request r, ByteBuf in, NamespaceCache namespaces, int version, WireChecksum sum) {
        int maxPages = server.config.maxFrameBytes() / Wire.HASH_BYTES;
        Work work = switch (r.op()) {
            case Wire.LEADING_HITS -> {
                List<StoreKey> keys = keys(in, namespaces.read(in), Codec.readCount(in, Wire.HASH_BYTES, maxPages), null, null);
                yield new Work(() -> {
                    int here = cache.leadingHitsHere(keys);
                    if (here >= 0) {
                        count(out, r, here);
                    }
                    return here >= 0;
                }, () -> {
                    try {
                        count(out, r, cache.leadingHits(keys, r.deadline()));
                    } catch (NotDoneInTime e) {
                        out.fail(r.id(), Wire.E_TIMED_OUT, e.getMessage(), false);
                    }
                });
            }
            case Wire.GET, Wire.LEASE -> {
                Namespace ns = namespaces.read(in);
                int n = Codec.readCount(in, Wire.HASH_BYTES + 4, maxPages);
                int[] lengths = new int[n];
                List<StoreKey> keys = keys(in, ns, n, lengths, null);
                long leaseMillis = r.op() == Wire.LEASE
                        ? Math.min(Codec.readUnsignedInt(in), server.config.maxLease().toMillis()) : 0;
                yield new Work(() -> {
                    SlabCache.Entry[] here = cache.pinAllHere(keys);
                    if (here != null) {
                        pages(out, r, here, null, lengths, leaseMillis, sum);
                    }
                    return here != null;
                }, () -> {
                    PageStatus[] why = new PageStatus[keys.size()];
                    pages(out, r, cache.pinAll(keys, lengths, r.deadline(), why), why, lengths, leaseMillis, sum);
                });
            }
            case Wire.PUT -> {
                Namespace ns = namespaces.read(in);
                int n = Codec.readCount(in, Wire.HASH_BYTES + 8, maxPages);
                int[] lengths = new int[n];
                int[] crcs = new int[n];
                List<StoreKey> keys = keys(in, ns, n, lengths, crcs);
                long total = 0;
                for (int length : lengths) {
                    total += length;
                }
                if (total != in.readableBytes()) {
                    throw new ProtocolException("the page lengths add up to " + total + " bytes, the frame has "
                            + in.readableBytes());
                }
                Put put = new Put(out, r, keys, lengths, crcs, in, sum);
                yield new Work(() -> put.advance(false), () -> put.advance(true));
            }
            case Wire.DELETE -> {
                List<StoreKey> keys = keys(in, namespaces.read(in), Codec.readCount(in, Wire.HASH_BYTES, maxPages), null, null);
                yield Work.slow(() -> out.statuses(r.op(), r.id(), cache.delete(keys, r.deadline())));
            }
            case Wire.CLEAR -> {
                Namespace ns = namespaces.read(in);
                yield Work.deferred(() -> clear(out, r, ns));
            }
            case Wire.CLEAR_ALL -> Work.deferred(() -> clear(out, r, null));
            case Wire.STATS -> Work.quick(() -> {
                ByteBuf answer = out.begin(r.op(), r.id());
                byte[] text = server.metrics.render().getBytes(StandardCharsets.UTF_8);
                answer.writeInt(text.length);
                answer.writeBytes(text);
                out.send(answer);
            });
            case Wire.HEALTH -> Work.quick(() -> {
                ByteBuf answer = out.begin(r.op(), r.id());
                answer.writeByte(server.shuttingDown() ? 1 : 0);
                out.send(answer);
            });
            case Wire.RELEASE -> {
                long lease = Codec.readLong(in);
                yield Work.quick(() -> {
                    ByteBuf answer = out.begin(r.op(), r.id());
                    answer.writeByte(server.leases.release(out.context().channel(), lease) ? 1 : 0);
                    out.send(answer);
                });
            }
            case Wire.RESERVE -> {
                if (version < Wire.VERSION_2) {
                    yield null;
                }
                Namespace ns = namespaces.read(in);
                int n = Codec.readCount(in, Wire.HASH_BYTES + 4, maxPages);
                int[] lengths = new int[n];
                List<StoreKey> keys = keys(in, ns, n, lengths, null);
                long holdMillis = Math.min(Codec.readUnsignedInt(in), server.config.maxLease().toMillis());
                Reserve reserve = new Reserve(out, r, keys, lengths, holdMillis);
                yield new Work(() -> reserve.advance(false), () -> reserve.advance(true));
            }
            case Wire.COMMIT -> {
                if (version < Wire.VERSION_2) {
                    yield null;
                }
                long reservation = Codec.readLong(in);
                int n = Codec.readCount(in, 4, maxPages);
                int[] crcs = new int[n];
                for (int i = 0; i < n; i++) {
                    crcs[i] = (int) Codec.readUnsignedInt(in);
                }
                // On a worker: it checksums every page (twice on a CRC-32 connection), which would hold up the
                // event loop's other connections.
                yield Work.slow(() -> commit(out, r, reservation, crcs, sum));
            }
            case Wire.FLUSH, Wire.STORE -> AdminRequests.parse(server, out, r, in);
            default -> null;
        };
        if (work != null && r.op() != Wire.PUT && in.isReadable()) {
            throw new ProtocolException(in.readableBytes() + " bytes after the end of the request");
        }
        return work;
    }

    /** Reads {@code n} keys, with a u32 length each if {@code lengths} is given, and a u32 CRC if {@code crcs} is. */
    private static List<StoreKey> keys(ByteBuf in, Namespace ns, int n, int[] lengths, int[] crcs) {
        List<StoreKey> keys = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            keys.add(ns.key(Codec.readHash(in)));
            if (lengths != null) {
                long length = Codec.readUnsignedInt(in);
                if (length == 0 || length > Integer.MAX_VALUE) {
                    throw new ProtocolException("page " + i + " has a length of " + length);
                }
                lengths[i] = (int) length;
                if (crcs != null) {
                    crcs[i] = (int) Codec.readUnsignedInt(in);
                }
            }
        }
        return keys;
    }

    private static void count(Responder out, Request r, int hits) {
        ByteBuf answer = out.begin(r.op(), r.id());
        answer.writeInt(hits);
        out.send(answer);
    }

    /**
     * A CLEAR ({@code ns}) or CLEAR_ALL (null): the slab's pages at once, L3's in the background
     * ({@link SlabCache#clear}); answered when both are done, or at the deadline (ERROR TIMED_OUT saying what was
     * done), whichever comes first. The future completes once the answer is sent.
     */
    private CompletableFuture<?> clear(Responder out, Request r, Namespace ns) {
        String what = ns == null ? "every namespace" : "namespace " + ns;
        if (r.deadline().isOver()) {
            out.fail(r.id(), Wire.E_TIMED_OUT, "clear of " + what + " not started: its deadline had passed; nothing "
                    + "was removed", false);
            return CompletableFuture.completedFuture(null);
        }
        SlabCache.Clearing clearing = cache.clear(ns);
        if (clearing.inL3() == null) {
            out.send(out.begin(r.op(), r.id()));
            return CompletableFuture.completedFuture(null);
        }
        return clearing.inL3().copy().orTimeout(Math.max(0, r.deadline().remainingNanos()), TimeUnit.NANOSECONDS)
                .handle((ignored, t) -> {
                    Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
                    if (cause == null) {
                        out.send(out.begin(r.op(), r.id()));
                    } else if (cause instanceof TimeoutException) {
                        out.fail(r.id(), Wire.E_TIMED_OUT, "clear of " + what + " is partial: the host slab's pages are "
                                + "removed (" + clearing.removedHere() + "); the L3 clear did not finish before the "
                                + "deadline and goes on in the background (" + clearing.describeL3() + "), so L3 may "
                                + "still hold pages; repeat the clear to wait for it", false);
                    } else {
                        out.fail(r.id(), Wire.E_INTERNAL, "clear of " + what + " failed: the host slab's pages are "
                                + "removed (" + clearing.removedHere() + "), the L3 clear failed and L3 may still hold "
                                + "pages: " + cause, false);
                    }
                    return null;
                });
    }

    /**
     * Answers a GET (the pages' bytes follow the statuses) or a LEASE (their slab offsets instead, the pins handed to
     * the lease) for pinned entries; entries not delivered are unpinned here. {@code why} says why a null entry was not
     * delivered (null: every null entry is a MISS).
     */
    private void pages(Responder out, Request r, SlabCache.Entry[] entries, PageStatus[] why, int[] lengths,
            long leaseMillis, WireChecksum sum) {
        boolean lease = r.op() == Wire.LEASE;
        Channel owner = out.context().channel();
        // Over server.max-leases-per-connection the lease takes nothing: its pages are REJECTED (GET them instead).
        boolean overLimit = lease && !server.leases.tryHold(owner);
        ByteBuf meta = out.begin(r.op(), r.id());
        int leaseIdAt = meta.writerIndex();
        if (lease) {
            meta.writeLong(0);
        }
        meta.writeInt(entries.length);
        List<SlabCache.Entry> delivered = new ArrayList<>();
        boolean noChecksums = lease && (r.flags() & Request.NO_CHECKSUMS) != 0;
        for (int i = 0; i < entries.length; i++) {
            SlabCache.Entry e = entries[i];
            PageStatus status = e == null ? (why == null ? PageStatus.MISS : why[i])
                    : e.length != lengths[i] ? PageStatus.SIZE_MISMATCH
                    // A page the slab had no room for cannot be leased: the client should get it instead.
                    : lease && (!e.inSlab() || overLimit) ? PageStatus.REJECTED : PageStatus.OK;
            int crc = 0;
            if (e != null && !noChecksums) {
                crc = e.crc;
                if (sum != WireChecksum.CRC32C) {
                    // The slab keeps CRC-32C. A checksum computed from the bytes as they are now would vouch for
                    // bytes damaged in the slab (a same-host writer past its reservation), so they are checked
                    // against the kept CRC-32C first.
                    MemorySegment bytes = cache.bytes(e);
                    if (PageChecksum.of(bytes) != e.crc) {
                        status = status == PageStatus.OK ? PageStatus.CORRUPT : status;
                        crc = 0;
                    } else {
                        crc = sum.of(bytes);
                    }
                }
            }
            meta.writeByte(Wire.status(status));
            meta.writeInt(e == null || status == PageStatus.CORRUPT ? 0 : e.length);
            meta.writeInt(status == PageStatus.CORRUPT ? 0 : crc);
            if (lease) {
                meta.writeLong(status == PageStatus.OK ? e.offset : -1);
            }
            if (status == PageStatus.OK) {
                delivered.add(e);
            } else if (e != null) {
                cache.unpin(e);
            }
        }
        if (lease) {
            if (overLimit) {
                meta.setLong(leaseIdAt, 0); // no lease: id 0 names none
                out.send(meta);
                return;
            }
            long id = server.leases.grant(owner, delivered, leaseMillis);
            if (!owner.isActive()) {
                server.leases.release(owner, id); // closed meanwhile: its leases were ended before this one began
            }
            meta.setLong(leaseIdAt, id);
            out.send(meta);
            return;
        }
        CompositeByteBuf frame = out.context().alloc().compositeDirectBuffer(delivered.size() + 1);
        frame.addComponent(true, meta);
        for (SlabCache.Entry e : delivered) {
            frame.addComponent(true, cache.body(e));
        }
        // The pages stay pinned until the socket has taken their bytes.
        out.send(frame).addListener(f -> delivered.forEach(cache::unpin));
    }

    /** A PUT in progress: pages are stored in order, first on the event loop while no eviction is needed. */
    private final class Put {
        private final Responder out;
        private final Request r;
        private final List<StoreKey> keys;
        private final int[] lengths;
        private final int[] crcs;
        private final ByteBuf in;
        private final PageStatus[] statuses;
        /** The pages stored so far, pinned until the last is stored: a later page of the request must not evict them. */
        private final List<SlabCache.Entry> stored = new ArrayList<>();
        private final WireChecksum sum;
        private int next;
        private int at;
        private int checkedUpTo;

        Put(Responder out, Request r, List<StoreKey> keys, int[] lengths, int[] crcs, ByteBuf in, WireChecksum sum) {
            this.out = out;
            this.r = r;
            this.keys = keys;
            this.lengths = lengths;
            this.crcs = crcs;
            this.in = in;
            this.sum = sum;
            this.statuses = new PageStatus[keys.size()];
            this.at = in.readerIndex();
        }

        /**
         * Stores the pages not yet stored, answering when all are; {@code mayWait} false stops (returning false) at
         * the first page that needs eviction or waiting.
         */
        boolean advance(boolean mayWait) {
            try {
                return storeRest(mayWait);
            } catch (RuntimeException e) {
                stored.forEach(cache::unpin); // the request fails as a whole: its pages are ordinary pages now
                stored.clear();
                throw e;
            }
        }

        private boolean storeRest(boolean mayWait) {
            Deadline deadline = r.deadline();
            for (; next < keys.size(); next++) {
                ByteBuf body = in.slice(at, lengths[next]);
                PageStatus s;
                if (deadline.isOver()) {
                    s = PageStatus.stoppedBy(deadline);
                } else if (lengths[next] > server.config.maxPageBytes()) {
                    s = PageStatus.REJECTED;
                } else if (checkedUpTo <= next && !checked(body)) {
                    s = PageStatus.FAILED; // damaged on the way: not stored
                } else {
                    checkedUpTo = next + 1; // a page left for the worker is not checked again there
                    s = mayWait ? cache.put(keys.get(next), body, lengths[next], crcs[next], deadline, stored)
                            : cache.tryPut(keys.get(next), body, lengths[next], crcs[next], stored);
                    if (s == null) {
                        return false;
                    }
                }
                statuses[next] = s;
                at += lengths[next];
            }
            // unpinned before the answer leaves: a client that puts again at once (on another pooled connection)
            // may need these pages evicted to make room, as a namespace at its quota does
            stored.forEach(cache::unpin);
            stored.clear();
            out.statuses(r.op(), r.id(), statuses);
            return true;
        }

        /**
         * Whether the body matches its checksum; on a connection of another checksum than CRC-32C, the page's CRC-32C
         * (what the slab keeps) takes its place once it does.
         */
        private boolean checked(ByteBuf body) {
            if (sum == WireChecksum.CRC32C) {
                return checksum(body) == crcs[next];
            }
            if (sum.of(body) != crcs[next]) {
                return false;
            }
            crcs[next] = checksum(body);
            return true;
        }
    }

    /** A RESERVE in progress: room is taken in order, first on the event loop while no eviction is needed. */
    private final class Reserve {
        private final Responder out;
        private final Request r;
        private final List<StoreKey> keys;
        private final int[] lengths;
        private final long holdMillis;
        private final SlabCache.Room[] rooms;
        private final PageStatus[] statuses;
        private int next;
        /** Set once the rooms belong to a reservation: from then on only the reservation frees them. */
        private boolean handedOver;
        /** Whether the connection had a lease slot for this reservation (decided once, at the first page). */
        private Boolean held;

        Reserve(Responder out, Request r, List<StoreKey> keys, int[] lengths, long holdMillis) {
            this.out = out;
            this.r = r;
            this.keys = keys;
            this.lengths = lengths;
            this.holdMillis = holdMillis;
            this.rooms = new SlabCache.Room[keys.size()];
            this.statuses = new PageStatus[keys.size()];
        }

        /** As {@link Put#advance}: false (with {@code mayWait} false) at the first page that needs eviction. */
        boolean advance(boolean mayWait) {
            try {
                return reserveRest(mayWait);
            } catch (RuntimeException e) {
                for (SlabCache.Room room : rooms) {
                    if (room != null && !handedOver) {
                        cache.abandon(room); // the request fails as a whole: nothing stays reserved
                    }
                }
                if (Boolean.TRUE.equals(held) && !handedOver) {
                    server.leases.unhold(out.context().channel());
                }
                throw e;
            }
        }

        private boolean reserveRest(boolean mayWait) {
            Deadline deadline = r.deadline();
            Channel owner = out.context().channel();
            if (held == null) {
                held = server.leases.tryHold(owner);
            }
            for (; next < keys.size(); next++) {
                SlabCache.Room room;
                if (!held) {
                    // Over server.max-leases-per-connection: nothing is reserved (PUT the pages instead).
                    room = SlabCache.Room.refusedFor(PageStatus.REJECTED);
                } else if (deadline.isOver()) {
                    room = SlabCache.Room.refusedFor(PageStatus.stoppedBy(deadline));
                } else {
                    room = cache.reserve(keys.get(next), lengths[next], mayWait ? deadline : null);
                    if (room == null) {
                        return false;
                    }
                }
                statuses[next] = room.refused() == null ? PageStatus.OK : room.refused();
                rooms[next] = room.refused() == null ? room : null;
            }
            long id = held ? server.leases.reserve(owner, rooms, statuses, holdMillis) : 0;
            handedOver = true;
            if (held && !owner.isActive()) {
                server.leases.release(owner, id); // closed meanwhile: its reservations were abandoned before this one
            }
            ByteBuf answer = out.begin(r.op(), r.id());
            answer.writeLong(id);
            answer.writeInt(keys.size());
            for (int i = 0; i < keys.size(); i++) {
                answer.writeByte(Wire.status(statuses[i]));
                answer.writeLong(rooms[i] == null ? -1 : rooms[i].offset());
            }
            out.send(answer);
            return true;
        }
    }

    /** A COMMIT: each page written into its room is checked against its checksum and stored. */
    private void commit(Responder out, Request r, long id, int[] crcs, WireChecksum sum) {
        Leases.Reservation res = server.leases.take(out.context().channel(), id);
        if (res == null) {
            out.fail(r.id(), Wire.E_MALFORMED, "no such reservation " + id
                    + " (unknown, committed or abandoned already, or another connection's)", false);
            return;
        }
        SlabCache.Room[] rooms = res.rooms();
        if (crcs.length != rooms.length) {
            for (SlabCache.Room room : rooms) {
                if (room != null) {
                    cache.abandon(room);
                }
            }
            out.fail(r.id(), Wire.E_MALFORMED, "the reservation has " + rooms.length + " pages, the COMMIT names "
                    + crcs.length + "; it is abandoned", false);
            return;
        }
        PageStatus[] statuses = new PageStatus[rooms.length];
        List<SlabCache.Entry> stored = new ArrayList<>();
        try {
            for (int i = 0; i < rooms.length; i++) {
                SlabCache.Room room = rooms[i];
                if (room == null) {
                    statuses[i] = res.statuses()[i];
                    continue;
                }
                rooms[i] = null; // from here on this page is stored or abandoned, whatever happens to the rest
                MemorySegment bytes = cache.bytes(room);
                if (sum.of(bytes) != crcs[i]) {
                    cache.abandon(room);
                    statuses[i] = PageStatus.FAILED;
                } else {
                    int crc32c = sum == WireChecksum.CRC32C ? crcs[i] : PageChecksum.of(bytes);
                    statuses[i] = cache.commit(room, crc32c, stored);
                }
            }
            out.statuses(r.op(), r.id(), statuses);
        } finally {
            for (SlabCache.Room room : rooms) {
                if (room != null) {
                    cache.abandon(room);
                }
            }
            stored.forEach(cache::unpin);
        }
    }

    private static int checksum(ByteBuf body) {
        if (body.nioBufferCount() == 1) {
            return PageChecksum.of(MemorySegment.ofBuffer(body.nioBuffer()));
        }
        CRC32C crc = new CRC32C();
        for (ByteBuffer b : body.nioBuffers()) {
            crc.update(b);
        }
        return (int) crc.getValue();
    }
}
