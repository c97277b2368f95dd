package io.hicache.server.daemon;

import io.hicache.core.events.KvEventSink;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreSlot;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The daemon's host tier, put together: pages of any size in a slab on tmpfs ({@link SlabSpace}), indexed by store
 * key with their pins and order of use ({@link PageIndex}), evicted least recently used first once L3 has them
 * ({@link Eviction}); puts and reservations land here ({@link SlabWrites}) and are written behind to the L3 store
 * ({@link WriteBehind}); reads go through to L3 and promote what they find ({@link ReadThrough}); deletes and clears
 * remove pages from both tiers against the write-behind ({@link Removals}, {@link L3Clears}); FLUSH empties the slab
 * into L3 ({@link SlabFlush}). Pages stored, written behind, evicted, deleted and cleared are announced as KV events
 * ({@link ServerEvents}) when {@code server.kv-events-config} turns them on.
 *
 * <p>This class makes the parts, hands them to the daemon's handlers, and stops them in order. Thread-safe. Owns the
 * slab and its file, the write-behind and L3 clear threads, the L3 store and the KV event publisher: closing it
 * writes behind first, then closes the store, frees the slab, and closes the publisher last.
 */
final class SlabCache implements AutoCloseable {
    final ServerConfig config;
    /** The L3 store, which STORE may detach and attach while requests run. */
    final StoreSlot l3;

    final ServerEvents events;
    final TierCounters counters = new TierCounters();
    /** Whether puts are failing for a reason known here: no room, or the L3 store failing. */
    final Health health = new Health();

    final SlabSpace space;
    final PageIndex pages;
    /** The L3 part of clears, in the background; made before the write-behind, whose thread asks it at once. */
    final L3Clears clears;

    final WriteBehind writeBehind;
    final Eviction eviction;
    final SlabWrites writes;
    final ReadThrough reads;
    final Removals removals;
    final SlabFlush flush;
    final Retention retention;

    /**
     * A host tier in front of {@code l3} (if any), publishing KV events to {@code events}, which it owns once made (the
     * caller closes them if this fails).
     *
     * @throws io.hicache.core.HiCacheException when the slab cannot be made (see {@link SlabSpace#create})
     */
    SlabCache(ServerConfig config, Optional<PageStore> l3, KvEventSink events) {
        this.config = config;
        this.l3 = new StoreSlot(l3.orElse(null));
        this.events = new ServerEvents(events, l3.orElse(null));
        this.space = SlabSpace.create(config);
        if (!config.tenantsFile().isEmpty()) {
            space.countTenants(); // before any page, a kept slab's included
        }
        this.pages = new PageIndex(space);
        this.retention = new Retention(pages, System::nanoTime);
        pages.retention(retention);
        this.clears = new L3Clears(this);
        try {
            this.writeBehind = new WriteBehind(this, config.writeBehindMaxTries());
        } catch (RuntimeException | Error e) {
            space.close();
            throw e;
        }
        this.eviction = new Eviction(space, pages, writeBehind, this.events, counters.evictedPages, retention);
        this.writes = new SlabWrites(
                config, space, pages, eviction, this.l3, writeBehind, this.events, counters.rejectedPuts, health);
        this.reads = new ReadThrough(config, space, pages, eviction, this.l3, clears, this.events, counters);
        this.removals = new Removals(pages, this.l3, writeBehind, clears, this.events);
        this.flush = new SlabFlush(pages, writeBehind, this.events);
        takeBackKept();
    }

    /**
     * A warm start ({@code server.host-keep}): the pages a kept slab's index lists, each back in its block once its
     * bytes match its CRC-32C; one that does not (or whose block the index named twice) is dropped, a miss.
     */
    private void takeBackKept() {
        List<SlabSpace.KeptPage> kept = space.takeKept();
        int taken = 0;
        for (SlabSpace.KeptPage k : kept) {
            if (!space.allocateAt(k.offset(), k.order())) {
                continue;
            }
            Room room = new Room(k.key(), k.offset(), k.order(), k.length());
            space.charge(k.key().namespace(), space.blockBytes(k.order()));
            if (PageChecksum.of(space.bytes(room)) != k.crc()) {
                space.free(room); // its block and its charge
                counters.corruptPages.increment();
                continue;
            }
            SlabWrites.Stored done = writes.commit(room, k.crc());
            if (done.pinned() != null) {
                pages.unpin(done.pinned());
            }
            taken += done.status() == PageStatus.OK ? 1 : 0;
        }
        if (!kept.isEmpty()) {
            System.getLogger(SlabCache.class.getName())
                    .log(
                            System.Logger.Level.INFO,
                            "warm start: " + taken + " of " + kept.size() + " kept pages taken back"
                                    + (taken < kept.size() ? " (the others failed their checksum or overlapped)" : ""));
        }
    }

    /** Pages in the slab now. */
    int pageCount() {
        return pages.size();
    }

    /**
     * Writes behind everything not yet in L3 (up to {@code server.shutdown-timeout}), closes the L3 store, frees the
     * slab and its file, and closes the KV event publisher after publishing what is queued.
     */
    @Override
    public void close() {
        clears.close(config.shutdownTimeout());
        writeBehind.close(Duration.ofMillis(config.shutdownTimeout().toMillis()));
        l3.close();
        if (config.hostKeep()) {
            space.keep(pages.snapshot()); // nothing writes to the slab any more
        }
        space.close();
        events.close();
    }
}
