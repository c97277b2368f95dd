package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreSlot;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.usage.PageUsageIndex.Candidates;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;

/**
 * The daemon's host tier: pages of any size in a slab mapped from a file on tmpfs, each in one contiguous block of a
 * {@link BuddyAllocator}, indexed by store key. Puts land here and, when there is an L3 store, are written behind to
 * it ({@link WriteBehind}); gets are served from here, or fetched from L3 and kept (promoted). When the slab is full
 * the least recently used pages that L3 already has (or all, without L3) make room; a page being sent, read by a
 * lease holder or not yet written behind is never evicted. Each namespace may have a quota of slab bytes.
 *
 * <p>Pages are found through a map from key to entry; their order of use, pins and whether L3 has them are kept in a
 * {@link PageUsageIndex} (flagged: L3 has the page), so that eviction walks from the least recently used page without
 * sorting. An entry enters and leaves the map and the index together, inside the map's lock for its key.
 *
 * <p>Pages are immutable while here: a delete of a page in use frees its block when the last user lets go. A clear
 * removes its pages here at once and in L3 in the background ({@link L3Clears}). Per namespace it keeps only what
 * {@link NamespaceBytes} keeps, and only while the namespace holds something.
 *
 * <p>Pages stored, written behind, evicted, deleted and cleared are announced as KV events ({@link ServerEvents}) when
 * {@code server.kv-events-config} turns them on.
 *
 * <p>Thread-safe. Owns the slab, its file, the write-behind thread, the L3 store and the KV event publisher; closing
 * it flushes the write-behind first and closes the publisher last.
 */
final class SlabCache implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(SlabCache.class.getName());
    /**
     * Eviction goes on until this fraction of the slab is free (1/64), so that it runs once per many puts, but no
     * further than {@link #FREE_TARGET_MAX_BYTES}.
     */
    private static final long FREE_TARGET_FRACTION = 64;
    /**
     * The most a put's eviction frees beyond what the put needs. Puts that find no room wait for the evicting one, so
     * its batch is a stall for every put in flight: 1/64 of an 8 GiB slab is 128 MiB (8,192 pages of 16 KiB, tens of
     * milliseconds). Capped, the stall no longer grows with the slab (issue 22, part 7: the evicting put's p99 fell
     * from 4.6 ms to 2.9-3.8 ms, its p99.9 from 13-24 ms to 6-8 ms).
     */
    static final long FREE_TARGET_MAX_BYTES = 4L << 20;

    /** A page in the slab. */
    static final class Entry {
        final StoreKey key;
        final long offset;
        final int order;
        final int length;
        final int crc;
        /** Users of the entry's memory (readers, lease holders, the write-behind): it is freed when the last goes. */
        final AtomicInteger pins = new AtomicInteger();
        final AtomicBoolean freed = new AtomicBoolean();
        /** Its number in the usage index; {@link PageUsageIndex#NO_ENTRY} for a page outside the index. */
        volatile long usage = PageUsageIndex.NO_ENTRY;
        volatile boolean dirty;
        volatile boolean removed;
        /** Failed tries to write it behind; touched by the write-behind thread only. */
        int writeTries;

        /** The page's bytes outside the slab, for a page read from L3 when the slab had no room; else null. */
        final ByteBuf spill;

        Entry(StoreKey key, long offset, int order, int length, int crc) {
            this(key, offset, order, length, crc, null);
        }

        private Entry(StoreKey key, long offset, int order, int length, int crc, ByteBuf spill) {
            this.key = key;
            this.offset = offset;
            this.order = order;
            this.length = length;
            this.crc = crc;
            this.spill = spill;
        }

        /** True if the page is in the slab (at {@link #offset}), false if it is a spilled copy. */
        boolean inSlab() {
            return spill == null;
        }
    }

    final ServerConfig config;
    /** The L3 store, which STORE may detach and attach while requests run. */
    final StoreSlot l3;
    private final Path file;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment slab;
    private final BuddyAllocator allocator;
    private final ConcurrentHashMap<StoreKey, Entry> index = new ConcurrentHashMap<>();
    /**
     * Slab bytes per namespace for its quota (blocks held until freed, a deleted page a reader still holds included,
     * and blocks reserved by puts in flight, which the usage index does not count); kept only while a namespace holds
     * something.
     */
    private final NamespaceBytes namespaceBytes = new NamespaceBytes();
    /** The slab's pages, least recently used first, by namespace too; flagged once L3 has them. */
    private final PageUsageIndex<StoreKey> usage = PageUsageIndex.<StoreKey>builder(PageUsageIndex.Order.RECENCY)
            .namespaces(key -> key.namespace().id()).build();
    private final Object evictLock = new Object();
    final WriteBehind writeBehind;
    /** The L3 part of clears, in the background. */
    final L3Clears clears = new L3Clears(this);
    final ServerEvents events;
    final LongAdder hostHits = new LongAdder();
    final LongAdder storeHits = new LongAdder();
    final LongAdder misses = new LongAdder();
    final LongAdder evictedPages = new LongAdder();
    final LongAdder rejectedPuts = new LongAdder();

    /** A slab cache publishing KV events to {@code events}, which it owns once made (the caller closes it if this fails). */
    SlabCache(ServerConfig config, Optional<PageStore> l3, KvEventSink events) throws IOException {
        this.config = config;
        this.l3 = new StoreSlot(l3.orElse(null));
        this.events = new ServerEvents(events, medium(l3.orElse(null)));
        long top = ServerConfig.maxBlockBytes(config.maxPageBytes(), config.minBlockBytes());
        long bytes = config.hostBytes() / top * top;
        int maxOrder = Long.numberOfTrailingZeros(top / config.minBlockBytes());
        Files.createDirectories(config.hostDir());
        this.file = Files.createTempFile(config.hostDir(), "hicache-server-", ".slab");
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            this.slab = ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(file);
            throw e;
        }
        this.allocator = new BuddyAllocator(bytes, config.minBlockBytes(), maxOrder);
        this.writeBehind = new WriteBehind(this, config.writeBehindMaxTries());
    }

    /** The slab's file: what a same-host client maps. */
    Path file() {
        return file;
    }

    long slabBytes() {
        return slab.byteSize();
    }

    long freeBytes() {
        return allocator.freeBytes();
    }

    int pages() {
        return index.size();
    }

    /** Slab bytes held by a namespace's pages (blocks, so a little more than the pages' lengths). */
    long namespaceBytes(Namespace ns) {
        return namespaceBytes.bytes(ns);
    }

    /** Namespaces the slab keeps anything for: those holding pages or room now. */
    int namespacesHeld() {
        return namespaceBytes.namespaces();
    }

    /** The bytes of a pinned entry. */
    MemorySegment bytes(Entry e) {
        return e.inSlab() ? slab.asSlice(e.offset, e.length) : MemorySegment.ofBuffer(e.spill.nioBuffer(0, e.length));
    }

    /** A buffer over the bytes of a pinned entry, without a copy: valid while the entry stays pinned. */
    ByteBuf body(Entry e) {
        return e.inSlab() ? Unpooled.wrappedBuffer(bytes(e).asByteBuffer()) : e.spill.retainedSlice(0, e.length);
    }

    /* ---------------------------------------------------------------- writes */

    /**
     * Stores {@code length} bytes read from {@code src} under {@code key}, whose checksum the caller has verified
     * to be {@code crc}; the caller keeps {@code src}. Evicts, and waits for the write-behind, as needed. Without L3,
     * a page stored (OK) is added to {@code stored} pinned, so that the request's later pages cannot evict (drop) it
     * before the request is answered: the caller {@link #unpin}s them then. With L3 that is not needed: a page is
     * evictable only once L3 has it.
     */
    PageStatus put(StoreKey key, ByteBuf src, int length, int crc, Deadline deadline, List<Entry> stored) {
        return store(key, src, length, crc, deadline, stored);
    }

    /** As {@link #put}, if that needs no eviction and no waiting; null if it would (nothing was stored). */
    PageStatus tryPut(StoreKey key, ByteBuf src, int length, int crc, List<Entry> stored) {
        return store(key, src, length, crc, null, stored);
    }

    /** Stores a page; a null {@code deadline} means "only if no eviction is needed", answered null if it is. */
    private PageStatus store(StoreKey key, ByteBuf src, int length, int crc, Deadline deadline, List<Entry> stored) {
        Room room = takeRoom(key, length, deadline);
        if (room == null || room.refused != null) {
            return room == null ? null : room.refused;
        }
        src.getBytes(src.readerIndex(), bytes(room).asByteBuffer());
        return fill(room, crc, stored);
    }

    /**
     * Room in the slab for one page: a block charged to its namespace, nobody's page yet; or why there is none
     * ({@link #refused}).
     */
    record Room(StoreKey key, long offset, int order, int length, PageStatus refused) {
        static Room refusedFor(PageStatus why) {
            return new Room(null, -1, -1, 0, why);
        }
    }

    /**
     * Room for a page a same-host client writes into the slab itself (RESERVE): the page's block, evicting and
     * waiting up to {@code deadline} (null: only if no eviction is needed, else null), or why there is none.
     */
    Room reserve(StoreKey key, int length, Deadline deadline) {
        return takeRoom(key, length, deadline);
    }

    /** The bytes of a room, where its page is written. */
    MemorySegment bytes(Room room) {
        return slab.asSlice(room.offset, room.length);
    }

    /** Stores the page written into {@code room}, whose checksum the caller has verified to be {@code crc}: as put. */
    PageStatus commit(Room room, int crc, List<Entry> stored) {
        return fill(room, crc, stored);
    }

    /** Frees a room whose page will not be stored. */
    void abandon(Room room) {
        allocator.free(room.offset, room.order);
        namespaceBytes.discharge(room.key.namespace(), allocator.blockBytes(room.order));
    }

    /** A block for {@code key}'s page, charged to its namespace; null if it would need eviction and deadline is null. */
    private Room takeRoom(StoreKey key, int length, Deadline deadline) {
        if (index.containsKey(key)) {
            return Room.refusedFor(PageStatus.EXISTS);
        }
        int order = allocator.orderFor(length);
        if (order < 0 || length > config.maxPageBytes()) {
            rejectedPuts.increment();
            return Room.refusedFor(PageStatus.REJECTED);
        }
        long block = allocator.blockBytes(order);
        Namespace ns = key.namespace();
        long quota = config.namespaceQuota();
        // Reserve the block against the quota first, so that concurrent puts cannot all slip under it.
        long used = namespaceBytes.charge(ns, block);
        if (used > quota && quota > 0 && (deadline == null
                || !evictUntil(ns, used - quota, () -> namespaceBytes.bytes(ns) <= quota, deadline))) {
            namespaceBytes.discharge(ns, block);
            return refusedRoom(deadline);
        }
        long offset = deadline == null ? allocator.allocate(order) : allocate(order, deadline);
        if (offset < 0) {
            namespaceBytes.discharge(ns, block);
            return refusedRoom(deadline);
        }
        return new Room(key, offset, order, length, null);
    }

    private Room refusedRoom(Deadline deadline) {
        PageStatus why = refused(deadline);
        return why == null ? null : Room.refusedFor(why);
    }

    /** Makes the page written into {@code room} a stored page, or frees the room if the key was stored meanwhile. */
    private PageStatus fill(Room room, int crc, List<Entry> stored) {
        Entry e = new Entry(room.key, room.offset, room.order, room.length, crc);
        e.dirty = l3.writesAccepted();
        boolean hold = !e.dirty;
        if (hold) {
            e.pins.incrementAndGet();
        }
        if (add(e, hold ? PageUsageIndex.PINNED | PageUsageIndex.FLAGGED : 0) != e) {
            abandon(room);
            return PageStatus.EXISTS;
        }
        if (hold) {
            stored.add(e);
        }
        events.storedHere(e.key);
        if (e.dirty) {
            writeBehind.enqueue(e);
        }
        return PageStatus.OK;
    }

    private PageStatus refused(Deadline deadline) {
        if (deadline == null) {
            return null;
        }
        rejectedPuts.increment();
        return deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.REJECTED;
    }

    /** A block of {@code order}, evicting to make room; -1 if there is none by the deadline. */
    private long allocate(int order, Deadline deadline) {
        long[] offset = {allocator.allocate(order)};
        if (offset[0] < 0 && !evictUntil(null, allocator.blockBytes(order),
                () -> (offset[0] = allocator.allocate(order)) >= 0, deadline)) {
            return -1;
        }
        return offset[0];
    }

    /**
     * Evicts clean, unused pages, least recently used first (of one namespace if {@code ns} is given), until
     * {@code done} holds, and then on to the low-water mark of free slab so that the next puts need not evict; when
     * only pages not yet in L3 are left, waits for the write-behind. False if {@code done} cannot be had by the
     * deadline. {@code wantedBytes} is a first guess of what {@code done} needs, to size the batches claimed.
     */
    private boolean evictUntil(Namespace ns, long wantedBytes, BooleanSupplier done, Deadline deadline) {
        Candidates<StoreKey> clean = Candidates.<StoreKey>any().onlyFlagged();
        Candidates<StoreKey> which = ns == null ? clean : clean.inNamespace(ns.id());
        while (true) {
            boolean met;
            synchronized (evictLock) {
                met = done.getAsBoolean();
                if (!met) {
                    met = evictBatches(ns != null, wantedBytes, which, done);
                }
            }
            if (met || done.getAsBoolean()) {
                return true;
            }
            if (deadline.isOver() || writeBehind.pendingPages() == 0) {
                return false; // what is left is in use: waiting would not help
            }
            writeBehind.awaitProgress(Math.min(50, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()))));
        }
    }

    /**
     * Claims batches of candidates oldest first and evicts them until {@code done} holds and, for the whole slab, the
     * free target is reached, or no candidate is left; returns whether {@code done} held. Candidates that could not be
     * evicted (a reader came) stay claimed until the end, so that the next batch moves on, then are given back.
     */
    private boolean evictBatches(boolean oneNamespace, long wantedBytes, Candidates<StoreKey> which,
            BooleanSupplier done) {
        long freeTarget = freeTarget(slab.byteSize());
        boolean met = false;
        boolean finished = false;
        List<Long> kept = new ArrayList<>();
        List<StoreKey> evicted = new ArrayList<>();
        while (!finished) {
            long batchBytes = Math.max(wantedBytes, oneNamespace ? 0 : freeTarget - allocator.freeBytes());
            List<Claimed<StoreKey>> batch = usage.claimOldest(Math.max(1, batchBytes), which);
            if (batch.isEmpty()) {
                break;
            }
            for (Claimed<StoreKey> candidate : batch) {
                if (finished || !tryEvict(candidate)) {
                    kept.add(candidate.entry());
                    continue;
                }
                evicted.add(candidate.key());
                if ((met || (met = done.getAsBoolean())) && (oneNamespace || allocator.freeBytes() >= freeTarget)) {
                    finished = true;
                }
            }
        }
        for (long entry : kept) {
            usage.unclaim(entry);
        }
        events.removedHere(evicted);
        return met;
    }

    /** The free bytes eviction for the whole slab goes on to: 1/64 of it, at most {@link #FREE_TARGET_MAX_BYTES}. */
    static long freeTarget(long slabBytes) {
        return Math.min(slabBytes / FREE_TARGET_FRACTION, FREE_TARGET_MAX_BYTES);
    }

    /** Evicts a claimed candidate unless it is no longer the entry claimed, is not in L3, or is in use. */
    private boolean tryEvict(Claimed<StoreKey> candidate) {
        Entry[] evicted = {null};
        index.computeIfPresent(candidate.key(), (key, e) -> {
            if (e.usage != candidate.entry() || e.dirty || e.pins.get() != 0) {
                return e;
            }
            leave(e);
            evicted[0] = e;
            return null;
        });
        if (evicted[0] == null) {
            return false;
        }
        evictedPages.increment();
        freeIfUnused(evicted[0]);
        return true;
    }

    /**
     * Puts {@code e} in the map and the usage index, with {@code marks}, unless its key is there; returns the entry
     * that is there now. Both change inside the map's lock for the key, so they always agree.
     */
    private Entry add(Entry e, int marks) {
        return index.computeIfAbsent(e.key, key -> {
            e.usage = usage.insert(key, allocator.blockBytes(e.order), marks);
            return e;
        });
    }

    /** Takes {@code e} out of the usage index, as the map drops it (called inside the map's lock for its key). */
    private void leave(Entry e) {
        e.removed = true;
        usage.removeEntry(e.usage);
    }

    /** The write-behind put {@code e} in L3: from now on it may be evicted. */
    void writtenBehind(Entry e) {
        e.dirty = false;
        usage.setFlagged(e.usage, true);
        events.writtenBehind(e.key);
    }

    /**
     * The write-behind gave up on {@code e}: it may be evicted (and is then gone), so that pages L3 will not take
     * cannot fill the slab and block every put.
     */
    void givenUp(Entry e) {
        e.dirty = false;
        usage.setFlagged(e.usage, true);
    }

    /* ---------------------------------------------------------------- reads */

    /** The entry for {@code key}, pinned and used (the caller unpins it), or null; a page being evicted is gone. */
    Entry pin(StoreKey key) {
        Entry e = index.get(key);
        if (e == null) {
            return null;
        }
        retain(e);
        if (e.removed || !usage.pinEntry(e.usage)) {
            release(e);
            return null;
        }
        usage.touchEntry(e.usage);
        return e;
    }

    /** Lets go of an entry {@link #pin} (or a get that fetched it from L3) handed out. */
    void unpin(Entry e) {
        usage.unpin(e.usage); // false for a page outside the index by now: nothing to undo there
        release(e);
    }

    /** Keeps {@code e}'s memory while the caller uses it, without pinning it against eviction: the write-behind's. */
    void retain(Entry e) {
        e.pins.incrementAndGet();
    }

    /** Undoes {@link #retain}; frees the memory of an entry removed meanwhile once its last user lets go. */
    void release(Entry e) {
        if (e.pins.decrementAndGet() == 0 && e.removed) {
            freeIfUnused(e);
        }
    }

    private void freeIfUnused(Entry e) {
        if (e.pins.get() == 0 && e.freed.compareAndSet(false, true)) {
            if (!e.inSlab()) {
                e.spill.release();
                return;
            }
            allocator.free(e.offset, e.order);
            namespaceBytes.discharge(e.key.namespace(), allocator.blockBytes(e.order));
        }
    }

    /**
     * Pins every page of {@code keys} if that needs no L3 access: each is here, or there is no L3 (a page not here is
     * then a miss, a null slot). Null, with nothing pinned, if some page would have to be looked for in L3.
     */
    Entry[] pinAllHere(List<StoreKey> keys) {
        Entry[] out = new Entry[keys.size()];
        int found = 0;
        for (int i = 0; i < keys.size(); i++) {
            out[i] = pin(keys.get(i));
            if (out[i] != null) {
                found++;
            } else if (l3.attached()) {
                for (int j = 0; j < i; j++) {
                    if (out[j] != null) {
                        unpin(out[j]);
                    }
                }
                return null;
            }
        }
        hostHits.add(found);
        misses.add(keys.size() - found);
        return out;
    }

    /**
     * Pins every page of {@code keys} that is here or in L3 (fetching those into the slab, in one batch, with the
     * lengths the client expects); the slot of a page not delivered is null and {@code why[i]} says why: MISS (in no
     * tier), CORRUPT or SIZE_MISMATCH (as L3 found it), TIMED_OUT (the deadline passed before L3 answered for it: a
     * deadline never turns a stored page into a miss) or FAILED. A page here of another length is returned as is: the
     * caller answers SIZE_MISMATCH.
     */
    Entry[] pinAll(List<StoreKey> keys, int[] lengths, Deadline deadline, PageStatus[] why) {
        Entry[] out = new Entry[keys.size()];
        List<Integer> absent = new ArrayList<>();
        PageStore store = l3.acquire();
        try {
            for (int i = 0; i < keys.size(); i++) {
                out[i] = pin(keys.get(i));
                if (out[i] != null) {
                    hostHits.increment();
                } else {
                    absent.add(i);
                    why[i] = store != null ? PageStatus.stoppedBy(deadline) : PageStatus.MISS;
                }
            }
            if (!absent.isEmpty() && store != null && !deadline.isOver()) {
                promote(store, keys, lengths, absent, out, deadline, why);
            }
        } finally {
            if (store != null) {
                l3.release(store);
            }
        }
        for (int i : absent) {
            if (out[i] == null && why[i] == PageStatus.MISS) {
                misses.increment();
            }
        }
        return out;
    }

    /**
     * Fetches absent pages from L3 in one batch, into fresh blocks where the slab has room without waiting (those
     * found become clean, pinned entries) and into spill buffers where it has not (pinned entries outside the
     * index, freed when unpinned): a get larger than the slab is still answered in full.
     */
    private void promote(PageStore store, List<StoreKey> keys, int[] lengths, List<Integer> absent, Entry[] out, Deadline deadline,
            PageStatus[] why) {
        List<StoreKey> ask = new ArrayList<>();
        List<MemorySegment> targets = new ArrayList<>();
        List<Entry> places = new ArrayList<>(); // where each page goes: a block (offset, order) or a spill buffer
        List<Integer> where = new ArrayList<>();
        for (int i : absent) {
            if (lengths[i] <= 0 || lengths[i] > config.maxPageBytes()) {
                why[i] = PageStatus.MISS; // no page of that length can be stored here
                continue;
            }
            int order = allocator.orderFor(lengths[i]);
            // A page a clear is removing from L3 is served from a buffer, not promoted: the clear must not leave it here.
            long[] offset = {clears.holds(keys.get(i)) ? -1 : allocator.allocate(order)};
            if (offset[0] < 0 && !clears.holds(keys.get(i))) {
                evictUntil(null, allocator.blockBytes(order), () -> (offset[0] = allocator.allocate(order)) >= 0,
                        Deadline.expired());
            }
            Entry place;
            if (offset[0] >= 0) {
                place = new Entry(keys.get(i), offset[0], order, lengths[i], 0);
            } else {
                ByteBuf spill = ByteBufAllocator.DEFAULT.directBuffer(lengths[i], lengths[i]);
                spill.writerIndex(lengths[i]);
                place = new Entry(keys.get(i), -1, -1, lengths[i], 0, spill);
            }
            ask.add(keys.get(i));
            targets.add(bytes(place));
            places.add(place);
            where.add(i);
        }
        if (ask.isEmpty()) {
            return;
        }
        BatchResult r = null;
        try {
            r = store.get(PageBatch.of(ask, targets), deadline).get(timeout(deadline), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            LOG.log(Level.DEBUG, () -> "L3 get failed: " + e);
        }
        for (int j = 0; j < ask.size(); j++) {
            Entry place = places.get(j);
            boolean found = r != null && r.status(j) == PageStatus.OK;
            if (found) {
                storeHits.increment();
            } else {
                why[where.get(j)] = r != null ? r.status(j)
                        : deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED;
            }
            if (place.inSlab()) {
                if (found) {
                    out[where.get(j)] = admit(ask.get(j), place.offset, place.order, place.length);
                    if (out[where.get(j)] == null) {
                        // a racing write put the page here first and a racing delete removed it: it is gone now,
                        // and the answer must say so, not the deadline the status was first set to
                        why[where.get(j)] = PageStatus.MISS;
                    }
                } else {
                    allocator.free(place.offset, place.order);
                }
            } else if (found) {
                Entry spilled = new Entry(place.key, -1, -1, place.length, PageChecksum.of(targets.get(j)), place.spill);
                spilled.pins.incrementAndGet();
                spilled.removed = true; // not in the index: freed when the caller unpins it
                out[where.get(j)] = spilled;
            } else {
                place.spill.release();
            }
        }
    }

    /** A page fetched from L3 becomes a clean entry, pinned for the caller. */
    private Entry admit(StoreKey key, long offset, int order, int length) {
        Entry e = new Entry(key, offset, order, length, PageChecksum.of(slab.asSlice(offset, length)));
        e.pins.incrementAndGet();
        namespaceBytes.charge(key.namespace(), allocator.blockBytes(order)); // before it enters the usage index
        if (add(e, PageUsageIndex.PINNED | PageUsageIndex.FLAGGED) != e) {
            allocator.free(offset, order);
            namespaceBytes.discharge(key.namespace(), allocator.blockBytes(order));
            return pin(key);
        }
        if (clears.holds(key)) {
            // A clear of its namespace was asked while it was read: its removal of the slab's pages may have passed
            // already. It leaves the slab again; the caller's pin keeps its bytes until it is sent.
            index.computeIfPresent(key, (k, now) -> {
                if (now == e) {
                    leave(e);
                    return null;
                }
                return now;
            });
            return e;
        }
        events.storedHere(key);
        return e;
    }

    /** Leading keys here; -1 if the count would need L3 (a key is not here, and there is an L3). */
    int leadingHitsHere(List<StoreKey> keys) {
        int n = 0;
        while (n < keys.size() && index.containsKey(keys.get(n))) {
            n++;
        }
        return n < keys.size() && l3.attached() ? -1 : n;
    }

    /**
     * Leading keys here, then in L3 from the first one not here.
     *
     * @throws NotDoneInTime when L3 did not answer before the deadline: a shorter count would say pages are gone
     * @throws IllegalStateException when L3 failed to answer, for the same reason
     */
    int leadingHits(List<StoreKey> keys, Deadline deadline) {
        PageStore store = l3.acquire();
        try {
            return leadingHits(store, keys, deadline);
        } finally {
            if (store != null) {
                l3.release(store);
            }
        }
    }

    private int leadingHits(PageStore store, List<StoreKey> keys, Deadline deadline) {
        // A page counts if the slab or L3 has it, as a GET would serve it: the pages not here are asked of L3 in one
        // query, and the count ends at the first of them L3 lacks. (A chain's first pages may be only in L3, after a
        // FLUSH or an eviction, and its later ones only here, not yet written behind.)
        List<Integer> absent = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            if (!index.containsKey(keys.get(i))) {
                absent.add(i);
            }
        }
        if (absent.isEmpty() || store == null) {
            return absent.isEmpty() ? keys.size() : absent.get(0);
        }
        int here = absent.get(0);
        if (deadline.isOver()) {
            throw new NotDoneInTime("leading hits: " + here + " pages here, and the deadline passed before L3 was asked");
        }
        List<StoreKey> ask = new ArrayList<>(absent.size());
        for (int i : absent) {
            ask.add(keys.get(i));
        }
        int inL3;
        try {
            inL3 = store.leadingHits(ask, deadline).get(timeout(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (ExecutionException | TimeoutException e) {
            if (deadline.isOver()) {
                throw new NotDoneInTime("leading hits: " + here + " pages here, and L3 did not answer before the deadline");
            }
            throw new IllegalStateException("the L3 leading-hit query failed: " + e.getMessage(), e);
        }
        // A store answers 0 for work its deadline stopped, so a short count after the deadline proves nothing.
        if (inL3 < ask.size() && deadline.isOver()) {
            throw new NotDoneInTime("leading hits: " + here + " pages here, and L3 did not finish before the deadline");
        }
        return inL3 >= absent.size() ? keys.size() : absent.get(inL3);
    }

    /* ---------------------------------------------------------------- removal */

    /**
     * Removes the pages here and in L3. OK for a page removed from a tier that had it and known to be in no other;
     * MISS for one in no tier; otherwise L3's status for it (TIMED_OUT when the deadline passed before L3 removed it:
     * the page may still be in L3, never "OK and back later").
     */
    PageStatus[] delete(List<StoreKey> keys, Deadline deadline) {
        PageStatus[] out = new PageStatus[keys.size()];
        List<StoreKey> removedHere = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            out[i] = remove(keys.get(i)) ? PageStatus.OK : PageStatus.MISS;
            if (out[i] == PageStatus.OK) {
                removedHere.add(keys.get(i));
            }
        }
        events.removedHere(removedHere);
        PageStore store = l3.acquire();
        if (store == null) {
            return out;
        }
        BatchResult r = null;
        try {
            writeBehind.awaitBatchInFlight(deadline);
            r = store.delete(keys, deadline).get(timeout(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.log(Level.DEBUG, () -> "L3 delete failed: " + e);
        } finally {
            l3.release(store);
        }
        List<StoreKey> removedFromL3 = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            PageStatus inL3 = r != null ? r.status(i) : deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED;
            if (inL3 == PageStatus.OK) {
                out[i] = PageStatus.OK;
                removedFromL3.add(keys.get(i));
            } else if (inL3 != PageStatus.MISS) {
                out[i] = inL3; // not known to be gone from L3
            }
        }
        events.removedFromL3(removedFromL3);
        return out;
    }

    private boolean remove(StoreKey key) {
        Entry[] removed = {null};
        index.computeIfPresent(key, (k, e) -> {
            leave(e);
            removed[0] = e;
            return null;
        });
        Entry e = removed[0];
        if (e == null) {
            return false;
        }
        e.dirty = false;
        freeIfUnused(e);
        return true;
    }

    /**
     * What a clear has done: the slab's pages it removed, and its L3 part ({@code inL3}: completes when L3 is clear,
     * or fails; null when there is no L3).
     */
    record Clearing(int removedHere, CompletableFuture<Void> inL3, L3Clears.Job job) {
        /** Where the L3 part stands, for a message. */
        String describeL3() {
            return job == null ? "no L3" : job.describe();
        }
    }

    /**
     * Clears namespace {@code ns} (null: every namespace): its L3 part is queued first ({@link L3Clears}: from then
     * on its pages put are not written behind, nor pages read from L3 promoted, until it ends), then its pages in the
     * slab are removed, at once. The L3 part goes on in the background; the caller waits for it as long as it likes.
     */
    Clearing clear(Namespace ns) {
        PageStore store = l3.acquire();
        L3Clears.Job job = store == null ? null : clears.submit(ns, store); // takes over the acquisition
        int removed = 0;
        for (StoreKey k : index.keySet()) {
            if ((ns == null || k.namespace().equals(ns)) && remove(k)) {
                removed++;
            }
        }
        if (job == null) {
            events.cleared(); // with an L3, once its clear has ended
            return new Clearing(removed, null, null);
        }
        return new Clearing(removed, job.done, job);
    }

    /* ---------------------------------------------------------------- flush */

    /** What a flush did: pages it dropped from the slab, and pages it found there and had to leave. */
    record Flushed(long dropped, long kept) {
    }

    /**
     * Drops the pages in the slab now that nothing pins (leases, reads and sends in progress, a put's own pages until
     * it has stored its last), in every namespace; L3 keeps its copies. A page L3 lacks yet is dropped once the write-behind
     * has written it, waiting for that up to the deadline; one still unwritten then, or pinned, is kept. Pages put
     * while the flush runs are not its concern.
     */
    Flushed flush(Deadline deadline) {
        List<Entry> left = new ArrayList<>(index.values());
        long dropped = 0;
        while (true) {
            List<StoreKey> gone = new ArrayList<>();
            List<Entry> kept = new ArrayList<>();
            boolean unwritten = false;
            for (Entry e : left) {
                if (drop(e)) {
                    gone.add(e.key);
                } else if (!e.removed) {
                    kept.add(e);
                    unwritten |= e.dirty;
                }
            }
            events.removedHere(gone);
            dropped += gone.size();
            left = kept;
            if (!unwritten || deadline.isOver()) {
                return new Flushed(dropped, left.size());
            }
            writeBehind.awaitProgress(Math.min(50, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()))));
        }
    }

    /** Removes {@code e} if it is still the entry for its key, in L3 (or there is none) and unused. */
    private boolean drop(Entry e) {
        boolean[] dropped = {false};
        index.computeIfPresent(e.key, (key, now) -> {
            if (now != e || now.dirty || now.pins.get() != 0) {
                return now;
            }
            leave(now);
            dropped[0] = true;
            return null;
        });
        if (dropped[0]) {
            freeIfUnused(e);
        }
        return dropped[0];
    }

    /** The medium KV events name for pages in {@code store} (null: none). */
    static Medium medium(PageStore store) {
        return Medium.ofStore(store != null && store.capabilities().has(Capability.SHARED));
    }

    static long timeout(Deadline deadline) {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos())) + 1_000;
    }

    /**
     * Writes behind everything not yet in L3 (up to {@code timeout}), then frees the slab and its file, and closes the
     * KV event publisher after publishing what is queued.
     */
    @Override
    public void close() {
        clears.close(config.shutdownTimeout());
        writeBehind.close(Duration.ofMillis(config.shutdownTimeout().toMillis()));
        l3.close();
        arena.close();
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            LOG.log(Level.WARNING, "cannot delete " + file, e);
        }
        events.close();
    }
}
