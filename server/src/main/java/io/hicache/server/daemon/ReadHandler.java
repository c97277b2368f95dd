package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.ReadRequest;
import io.hicache.storage.remote.protocol.ReadRequest.Get;
import io.hicache.storage.remote.protocol.ReadRequest.LeadingHits;
import io.hicache.storage.remote.protocol.ReadRequest.Lease;
import io.hicache.storage.remote.protocol.ReadRequest.PrefixHits;
import io.hicache.storage.remote.protocol.ReadRequest.Release;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.Channel;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import org.jspecify.annotations.Nullable;

/**
 * The reads' work (docs/protocol.md §3: LEADING_HITS, PREFIX_HITS, GET, LEASE, RELEASE): on the event loop when every page is in
 * the slab (or there is no L3), else on a worker that reads through to L3 ({@link ReadThrough}). A GET's pages leave
 * for the socket without a copy: the answer wraps the slab's memory, and each page stays pinned until the socket has
 * taken its bytes. A LEASE's pins pass to the lease ({@link Leases}), which gives them back when it ends.
 *
 * <p>Stateless apart from the daemon it serves; thread-safe.
 */
final class ReadHandler {
    private final ServerConfig config;
    private final SlabCache cache;
    private final Leases leases;

    ReadHandler(ServerConfig config, SlabCache cache, Leases leases) {
        this.config = config;
        this.cache = cache;
        this.leases = leases;
    }

    /** The work of a read. */
    Work work(Call call, ReadRequest request) {
        return switch (request) {
            case LeadingHits h -> leadingHits(call, h.keys());
            case PrefixHits h -> prefixHits(call, h.keys());
            case Get g -> pages(call, g.keys(), g.lengths(), null);
            case Lease l -> pages(call, l.keys(), l.lengths(), l);
            case Release r ->
                Work.quick(() -> {
                    ByteBuf answer = call.begin();
                    answer.writeByte(leases.release(call.channel(), r.id()) ? 1 : 0);
                    call.send(answer);
                });
        };
    }

    private Work leadingHits(Call call, List<StoreKey> keys) {
        return new Work(
                () -> {
                    OptionalInt here = cache.reads.leadingHitsHere(keys);
                    if (here.isPresent()) {
                        count(call, here.getAsInt());
                    }
                    return here.isPresent();
                },
                () -> {
                    try {
                        count(call, cache.reads.leadingHits(keys, call.deadline()));
                    } catch (NotDoneInTime e) {
                        call.fail(Wire.E_TIMED_OUT, e.getMessage());
                    }
                });
    }

    private Work prefixHits(Call call, List<StoreKey> keys) {
        return new Work(
                () -> {
                    Optional<ReadThrough.PrefixRuns> here = cache.reads.prefixHitsHere(keys);
                    here.ifPresent(runs -> runs(call, runs));
                    return here.isPresent();
                },
                () -> runs(call, cache.reads.prefixHits(keys, call.deadline())));
    }

    private static void runs(Call call, ReadThrough.PrefixRuns runs) {
        ByteBuf answer = call.begin();
        answer.writeInt(runs.slab());
        answer.writeInt(runs.l3());
        answer.writeInt(runs.any());
        answer.writeByte(runs.l3State());
        call.send(answer);
    }

    private static void count(Call call, int hits) {
        ByteBuf answer = call.begin();
        answer.writeInt(hits);
        call.send(answer);
    }

    /** A GET ({@code lease} null) or a LEASE: pages pinned on the event loop if all are here, else on a worker. */
    private Work pages(Call call, List<StoreKey> keys, int[] lengths, @Nullable Lease lease) {
        long leaseMillis = lease == null
                ? 0
                : Math.min(lease.holdMillis(), config.maxLease().toMillis());
        return new Work(
                () -> {
                    Optional<ReadThrough.Pinned> here = cache.reads.pinAllHere(keys);
                    if (here.isPresent()) {
                        answer(call, here.get(), lengths, lease, leaseMillis);
                    }
                    return here.isPresent();
                },
                () -> answer(call, cache.reads.pinAll(keys, lengths, call.deadline()), lengths, lease, leaseMillis));
    }

    /**
     * Answers a GET (the pages' bytes follow the statuses) or a LEASE (their slab offsets instead, the pins handed to
     * the lease) for pinned pages; pages not delivered are unpinned here.
     */
    private void answer(Call call, ReadThrough.Pinned pinned, int[] lengths, @Nullable Lease lease, long leaseMillis) {
        SlabPage[] pages = pinned.pages();
        Channel owner = call.channel();
        // Over server.max-leases-per-connection the lease takes nothing: its pages are REJECTED (GET them instead).
        boolean overLimit = lease != null && !leases.tryHold(owner);
        ByteBuf meta = call.begin();
        int leaseIdAt = meta.writerIndex();
        if (lease != null) {
            meta.writeLong(0);
        }
        meta.writeInt(pages.length);
        List<SlabPage> delivered = new ArrayList<>();
        boolean noChecksums = lease != null && lease.noChecksums();
        for (int i = 0; i < pages.length; i++) {
            SlabPage p = pages[i];
            PageStatus status = p == null
                    ? pinned.why(i)
                    : p.length != lengths[i]
                            ? PageStatus.SIZE_MISMATCH
                            // A page the slab had no room for cannot be leased: the client should get it instead.
                            : lease != null && (!p.inSlab() || overLimit) ? PageStatus.REJECTED : PageStatus.OK;
            int crc = 0;
            if (p != null && !noChecksums) {
                crc = p.crc;
                if (call.checksum() == WireChecksum.CRC32 && p.crc32Memo != 0) {
                    crc = (int) p.crc32Memo;
                } else if (call.checksum() != WireChecksum.CRC32C) {
                    // The slab keeps CRC-32C. A checksum computed from the bytes as they are now would vouch for
                    // bytes damaged in the slab (a same-host writer past its reservation), so they are checked
                    // against the kept CRC-32C first.
                    MemorySegment bytes = cache.space.bytes(p);
                    if (PageChecksum.of(bytes) != p.crc) {
                        status = status == PageStatus.OK ? PageStatus.CORRUPT : status;
                        crc = 0;
                        if (cache.pages.discardCorrupt(p)) { // later reads miss it, or read L3's copy through
                            cache.counters.corruptPages.increment();
                        }
                    } else {
                        crc = call.checksum().of(bytes);
                        if (call.checksum() == WireChecksum.CRC32) {
                            p.crc32Memo = 1L << 32 | (crc & 0xFFFF_FFFFL);
                        }
                    }
                }
            }
            meta.writeByte(Wire.status(status));
            meta.writeInt(p == null || status == PageStatus.CORRUPT ? 0 : p.length);
            meta.writeInt(status == PageStatus.CORRUPT ? 0 : crc);
            if (lease != null) {
                meta.writeLong(status == PageStatus.OK ? p.offset : -1);
            }
            if (status == PageStatus.OK) {
                delivered.add(p);
            } else if (p != null) {
                cache.pages.unpin(p);
            }
        }
        if (lease != null) {
            if (overLimit) {
                meta.setLong(leaseIdAt, 0); // no lease: id 0 names none
                call.send(meta);
                return;
            }
            long id = leases.grant(owner, delivered, leaseMillis);
            long leasedBytes = 0;
            for (SlabPage p : delivered) {
                leasedBytes += p.length;
            }
            cache.counters.sameHostReadBytes.add(leasedBytes);
            if (!owner.isActive()) {
                leases.release(owner, id); // closed meanwhile: its leases were ended before this one began
            }
            meta.setLong(leaseIdAt, id);
            call.send(meta);
            return;
        }
        CompositeByteBuf frame = owner.alloc().compositeDirectBuffer(delivered.size() + 1);
        frame.addComponent(true, meta);
        for (SlabPage p : delivered) {
            frame.addComponent(true, cache.space.body(p));
        }
        // The pages stay pinned until the socket has taken their bytes.
        call.send(frame).addListener(f -> delivered.forEach(cache.pages::unpin));
    }
}
