package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHashes;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DevicePageAllocator;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.host.HostPagePool;
import io.hicache.core.page.AttentionKind;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageStore;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.store.StoreSlot;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import io.hicache.core.util.Checks;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The three-tier prefix cache an engine embeds: HiRadixCache over a device KV pool (L1), the host page pool (L2)
 * and, optionally, a page store (L3). An engine opens one per model rank, then for each request follows the short
 * sequence of {@link CacheRequest} (docs/embedding.md): request, prefetch check, load back, allocate, commit, close.
 *
 * <p>Background work runs on named loops with bounded queues ({@code hicache-completions}, {@code -host-commit},
 * {@code -upload}, {@code -prefetch-query}, {@code -prefetch-io}, {@code -host-evictor}); a failed copy or store call becomes a miss
 * or a skipped backup, counted in {@link #stats()}, never a dead thread or a damaged tree.
 *
 * <p>With {@code kv-events-config} set (or a publisher given to the builder) the cache publishes SGLang's KV events
 * on {@code hicache-kv-events}: a BlockStored per run of pages reaching the device (insert, load-back), the host
 * (backup, prefetch) or the page store (upload), a BlockRemoved per run evicted from the device or the host. A slow
 * subscriber never blocks the cache: events beyond the queue's bound drop, oldest first, counted in
 * {@link #kvEventStats()} (docs/kv-events.md).
 *
 * <p>Thread-safe: one lock guards the tree and the allocators (an engine's scheduler thread is the main caller;
 * loops take the lock briefly to apply results). Owns the device pool, the host pool, the page store it opened and
 * the KV event publisher; {@link #close()} stops the loops and closes them. The device runtime belongs to the
 * caller.
 */
public final class HiCache implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(HiCache.class.getName());

    final HiCacheConfig config;
    final Namespace namespace;
    /**
     * Whether this cache uploads what it caches to the page store: always, except on the ranks of an MLA model other
     * than {@code hicache-mla-upload-rank} (they read the pages that rank writes).
     */
    final boolean uploadsHere;
    final PageFormat format;
    final RadixTree tree;
    final KvPool device;
    /** Hands out the device pool's pages: the pool's own allocator, or the engine's. */
    final DevicePageAllocator pageAllocator;
    /** The host pool; null when the cache runs the device tier only ({@code hicache-tiers device-only}). */
    final HostPagePool host;
    /**
     * The page store now, if any, wrapped in its timing: an operator may detach it and attach another while requests
     * run.
     */
    final StoreSlot stores;
    final ReentrantLock lock = new ReentrantLock();
    final CacheMetrics metrics = new CacheMetrics();
    /** The metrics in the engine's Prometheus registry: detached on close. */
    final CacheMetricsExport export;
    final CacheEvents events;
    final Loop<Runnable> completions;
    final Uploader uploader;
    final Prefetcher prefetcher;
    private final Loop<Boolean> hostEvictor;
    /** Backups of device pages to the host, and the loop that commits their host pages. */
    final Backups backups;
    /** Ready host pages left by an earlier run, which no node owns: adopted by requests, or the first to go. */
    final WarmHostPages leftovers;
    /** Keeps this rank's tree the same as the other tensor-parallel ranks' (does nothing for one rank). */
    final RankAgreement agreement;
    private final Map<String, CacheRequest> requests = new LinkedHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final DevicePages devicePages = new DevicePages() {
        @Override
        public int capacity() {
            return device.pages();
        }

        @Override
        public long pageBytes() {
            return format.pageBytes();
        }

        @Override
        public void writePage(int page, MemorySegment flat) {
            device.writePage(page, flat);
        }

        @Override
        public void readPage(int page, MemorySegment flat) {
            device.readPage(page, flat);
        }
    };
    /** Copies started and not yet applied: counted down only after what they start next (an upload) is counted. */
    final java.util.concurrent.atomic.AtomicInteger outstanding = new java.util.concurrent.atomic.AtomicInteger();

    private HiCache(HiCacheConfig config, Namespace namespace, PageFormat format, KvPool device,
            DevicePageAllocator pageAllocator, HostPagePool host, Optional<PageStore> store, PrometheusRegistry registry,
            KvEventSink sink, RankGroup ranks, RankGroup queryRanks) {
        this.config = config;
        this.agreement = new RankAgreement(ranks, queryRanks, config.rankTimeout());
        boolean mla = format.geometry().attention() == AttentionKind.MLA;
        // MLA pages are the same bytes on every rank: one copy in the page store, written by one rank
        this.uploadsHere = !mla || namespace.tpRank() == config.mlaUploadRank();
        this.namespace = mla ? namespace.sharedByRanks() : namespace;
        this.export = CacheMetricsExport.create(registry, this.namespace.id(),
                store.map(PageStore::name).orElse("none"), format.pageBytes(), config.pageSizeTokens());
        this.format = format;
        this.tree = new RadixTree(config.pageSizeTokens(), config.eviction());
        this.device = device;
        this.pageAllocator = pageAllocator;
        this.host = host;
        this.stores = new StoreSlot(store.map(this::timed).orElse(null));
        this.events = new CacheEvents(sink, config.pageSizeTokens(), storeMedium(store.orElse(null)));
        this.leftovers = new WarmHostPages(this);
        this.completions = new Loop<>("completions", config.queueCapacity(), Runnable::run, metrics, lock);
        this.uploader = new Uploader(this);
        this.prefetcher = new Prefetcher(this);
        this.hostEvictor = new Loop<>("host-evictor", 1, ignored -> evictHostToLowWater(), metrics);
        this.backups = new Backups(this);
        export.start(this::stats);
    }

    /** {@code store} as the cache calls it: timed, and watched for whether it answers. */
    TimedPageStore timed(PageStore store) {
        return new TimedPageStore(store, export, metrics, config.storageTimeout());
    }

    /**
     * Whether work needing {@code kinds} of store call may start (YES when no store is attached: nothing waits on
     * one); see {@link TimedPageStore#admit}.
     */
    TimedPageStore.Admission admitStoreWork(TimedPageStore.Kind... kinds) {
        return stores.current().map(s -> s instanceof TimedPageStore t ? t.admit(kinds) : TimedPageStore.Admission.YES)
                .orElse(TimedPageStore.Admission.YES);
    }

    /** Whether the attached store answers calls of {@code kind} now (true when none is attached). */
    boolean storeAnswers(TimedPageStore.Kind kind) {
        return stores.current().map(s -> !(s instanceof TimedPageStore t) || t.answering(kind)).orElse(true);
    }

    /** Starts the description of a cache to open: see {@link HiCacheBuilder}. */
    public static HiCacheBuilder builder() {
        return new HiCacheBuilder();
    }

    /**
     * Opens what {@link HiCacheBuilder#open()} describes; {@code store} null means the configured one, or none, and
     * {@code publisher} null the one {@code kv-events-config} names, or none. A failure closes the publisher.
     */
    static HiCache open(HiCacheConfig config, Namespace namespace, KvGeometry geometry, DeviceSetup setup,
            DeviceRuntime runtime, PageStore store, PrometheusRegistry registry, KvEventPublisher publisher,
            RankGroup ranks, RankGroup queryRanks) {
        int devicePages = setup.pages();
        Checks.checkNotNull(config, "config");
        Checks.checkNotNull(namespace, "namespace");
        PageFormat format = new PageFormat(geometry, config.pageSizeTokens(), config.host().layout());
        Checks.requireArgument(geometry.attention() != AttentionKind.MLA || config.mlaUploadRank() < namespace.tpSize(),
                "hicache-mla-upload-rank is %s, but the model has %s tensor-parallel ranks", config.mlaUploadRank(),
                namespace.tpSize());
        Checks.requireArgument(ranks == null || (ranks.size() == namespace.tpSize() && ranks.rank() == namespace.tpRank()),
                "the rank group is rank %s of %s, the namespace says rank %s of %s", ranks == null ? 0 : ranks.rank(),
                ranks == null ? 0 : ranks.size(), namespace.tpRank(), namespace.tpSize());
        Checks.requireArgument(queryRanks == null || (ranks != null && queryRanks.size() == ranks.size()
                && queryRanks.rank() == ranks.rank()), "the prefetch rank group must be the same ranks as the rank group");
        Checks.requireArgument(namespace.pageByteOrder() == format.byteOrder(),
                "the namespace says %s pages, the host layout %s stores %s", namespace.pageByteOrder(),
                config.host().layout(), format.byteOrder());
        KvEventSink sink = publisher != null
                ? KvEventSink.over("kv-events", publisher, config.kvEvents().maxQueueEvents())
                : KvEventSink.open("kv-events", config.kvEvents());
        KvPool pool;
        try {
            Checks.requireArgument(setup.allocator() == null || setup.allocator().capacity() == devicePages,
                    "the page allocator manages %s pages, the device pool has %s", setup.allocator() == null ? 0
                            : setup.allocator().capacity(), devicePages);
            pool = setup.address() != 0 ? runtime.adoptPool(format, devicePages, setup.address(), setup.bytes())
                    : runtime.createPool(format, devicePages);
        } catch (RuntimeException e) {
            sink.close();
            throw e;
        }
        HostPagePool host = null;
        PageStore configured = null;
        try {
            Checks.requireArgument(config.tiers() == Tiers.ALL || store == null,
                    "hicache-tiers device-only runs no page store, yet one was given");
            if (config.tiers() == Tiers.ALL) {
                host = HostPagePool.open(config.host(), format, HostPagePool.slotsFor(config.host(), format, devicePages),
                        runtime);
            }
            if (store == null) {
                configured = config.storageBackend().map(name -> PageStores.open(new StoreConfig(name, config.settings())))
                        .orElse(null);
            }
            return new HiCache(config, namespace, format, pool, setup.allocator() != null ? setup.allocator()
                    : pool.allocator(), host, Optional.ofNullable(store != null ? store : configured), registry, sink,
                    ranks, queryRanks);
        } catch (RuntimeException e) {
            sink.close();
            if (configured != null) {
                configured.close(); // a store given by the caller is closed by the builder
            }
            if (host != null) {
                host.close();
            }
            pool.close();
            throw e;
        }
    }

    /**
     * Starts a request for {@code promptTokens}: matches the longest cached prefix, pins its device part, and starts
     * a prefetch of what the page store may hold past it (per policy). The caller closes the request.
     *
     * @throws IllegalArgumentException when a request with this id is open
     */
    public CacheRequest request(String id, int[] promptTokens) {
        return request(id, "", promptTokens);
    }

    /**
     * As {@link #request(String, int[])} for a request with an extra key (a LoRA adapter, a cache salt; "" for none),
     * as SGLang keys its tree: requests share cached pages only with requests of the same extra key, and the pages'
     * hashes, so their keys in the page store, chain from the extra key's own root hash.
     */
    public CacheRequest request(String id, String extraKey, int[] promptTokens) {
        Checks.checkNotNull(id, "id");
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.checkNotNull(promptTokens, "promptTokens");
        Checks.requireArgument(extraKey.length() <= Namespace.MAX_TEXT_LENGTH, "extraKey is %d characters, over %d",
                extraKey.length(), Namespace.MAX_TEXT_LENGTH);
        lock.lock();
        try {
            checkOpen();
            Checks.requireArgument(!requests.containsKey(id), "request '%s' is already open", id);
            settle();
            CacheRequest r = new CacheRequest(this, id, extraKey, promptTokens.clone());
            requests.put(id, r);
            return r;
        } finally {
            lock.unlock();
        }
    }

    /** The open request {@code id}, if any. */
    public Optional<CacheRequest> find(String id) {
        lock.lock();
        try {
            return Optional.ofNullable(requests.get(id));
        } finally {
            lock.unlock();
        }
    }

    void forget(CacheRequest r) {
        requests.remove(r.id(), r);
    }

    /**
     * What the KV event publishing has done: events queued, dropped (the subscriber side fell behind), batches
     * published and failed. All zero when events are off.
     */
    public KvEventSink.Stats kvEventStats() {
        return events.sink().stats();
    }

    /** How the device pool is made: its pages, the engine's memory it adopts (address 0: none), its page allocator. */
    record DeviceSetup(int pages, long address, long bytes, DevicePageAllocator allocator) {
    }

    /**
     * Where the device pool's K and V live, per layer (addresses, strides, page size, dtype): what an engine hands to
     * its attention kernels. Valid while the cache is open.
     */
    public DeviceBuffers deviceBuffers() {
        return device.buffers();
    }

    /**
     * The device pool's memory where this process's host code can address it, laid out as
     * {@link io.hicache.core.memory.DeviceLayout} says: on the emulated device, so that a transport (prefill/decode
     * disaggregation) can register it and move pages straight in and out of the pool; empty on CUDA, whose pool only a
     * device-side transport reaches. Valid while the cache is open.
     */
    public Optional<MemorySegment> hostVisibleDeviceMemory() {
        return device.hostVisibleMemory();
    }

    /**
     * The device pool itself, for a transfer that copies the pages of requests the caller holds open (a staged
     * prefill/decode handoff gathers and scatters them layer by layer, {@code io.hicache.transfer.staged}). The cache
     * owns it: the caller never closes it, allocates or frees its pages, or touches pages no open request of its own
     * holds. Valid while the cache is open.
     */
    public KvPool devicePool() {
        return device;
    }

    /** What {@link #flush} or {@link #reset} dropped: device pages, and host pages (earlier runs' leftovers included). */
    public record Flushed(long devicePages, long hostPages) {
    }

    /**
     * Drops every page of the device and host tiers that no open request pins, after waiting up to {@code timeout}
     * for copies, uploads and prefetches in flight; the page store keeps its pages (see {@link #reset}). Requests may
     * run meanwhile: theirs stay, and pages they commit afterwards are cached as usual. SGLang's {@code /flush_cache}.
     */
    public Flushed flush(Duration timeout) throws InterruptedException {
        return CacheOperations.flush(this, timeout);
    }

    /**
     * Detaches the page store while requests run, and hands it back (null when none was attached); the caller owns it
     * from then on and closes it. Uploads queued before the call are written to it first (up to {@code timeout}),
     * uploads of pages cached after it are skipped, prefetches stop at their next batch and end with what landed. No
     * request fails because of it; requests from now on see no page store until {@link #attachStore}. Returns once
     * nothing uses the store any more, or when {@code timeout} is up (a call still running then ends as its deadline
     * says, and its failure, if any, is counted, never a request's).
     */
    public PageStore detachStore(Duration timeout) throws InterruptedException {
        return CacheOperations.detachStore(this, timeout);
    }

    /**
     * Attaches {@code store} as the page store, used from the next request on; the cache owns it from here (closes it
     * on {@link #close}, or hands it back on {@link #detachStore}). Its keys carry this cache's namespace.
     *
     * @throws IllegalStateException when a store is attached: detach it first
     */
    public void attachStore(PageStore store) {
        CacheOperations.attachStore(this, store);
    }

    /** Whether a page store is attached now. */
    public boolean storeAttached() {
        return stores.attached();
    }

    /**
     * Empties the cache: {@link #flush}, then removes this cache's namespace from the attached page store (other
     * namespaces in it stay). SGLang's {@code reset} with {@code clear_storage_backend}.
     *
     * @throws IllegalStateException when requests are open (their pages are pinned)
     * @throws HiCacheException {@link ErrorCode#STORE_IO} when the store could not clear the namespace
     */
    public Flushed reset(Duration timeout) throws InterruptedException {
        return CacheOperations.reset(this, timeout);
    }

    /** Where uploads to {@code store} land in KV events: EXTERNAL for a store other engines share, else DISK. */
    static Medium storeMedium(PageStore store) {
        return Medium.ofStore(store != null && store.capabilities().has(Capability.SHARED));
    }

    /** Counters and gauges now. */
    public CacheStats stats() {
        Map<String, Integer> depths = new LinkedHashMap<>();
        depths.put("completions", completions.depth());
        depths.put("upload", uploader.depth());
        depths.put("upload-pages", uploader.queuedPages()); // the write-behind's lag, in pages
        depths.put("prefetch-query", prefetcher.queryDepth());
        depths.put("prefetch-io", prefetcher.ioDepth());
        depths.put("kv-events", (int) Math.min(Integer.MAX_VALUE, events.sink().stats().queuedEvents()));
        lock.lock();
        try {
            return metrics.snapshot(depths, tree.devicePages(), tree.hostPages(), tree.nodes());
        } finally {
            lock.unlock();
        }
    }

    /** The geometry, page size and host layout of the cache's pages. */
    public PageFormat format() {
        return format;
    }

    /** The namespace the cache's page keys carry. */
    public Namespace namespace() {
        return namespace;
    }

    /** The settings the cache was opened with. */
    public HiCacheConfig config() {
        return config;
    }

    /**
     * How much room each tier has, now. Immutable; a snapshot (requests and background work change it at once).
     *
     * @param devicePages          pages in the device pool
     * @param deviceFreePages      of those, free now (no node, no request holds them)
     * @param deviceEvictablePages cached by the tree and pinned by no request: what an allocation could evict
     * @param hostPages            slots in the host pool (0 in device-only mode)
     * @param hostFreePages        of those, free now (host eviction frees more, down to its low-water mark)
     */
    public record Room(int devicePages, int deviceFreePages, long deviceEvictablePages, int hostPages,
            int hostFreePages) {
    }

    /** The capacity and the free room of the device and host tiers, now. */
    public Room room() {
        lock.lock();
        try {
            return new Room(pageAllocator.capacity(), pageAllocator.available(), tree.evictableDevicePages(),
                    host == null ? 0 : host.capacity(), host == null ? 0 : host.freeSlots());
        } finally {
            lock.unlock();
        }
    }

    /**
     * The device pages, one at a time: the engine computes KV into the pages a request allocates, and tests and
     * hand-over read or write single pages through this view.
     */
    public DevicePages devicePages() {
        return devicePages;
    }

    /* ---------------------------------------------------------------- device pages */

    /**
     * {@code count} device pages, evicting (leaf-first, by policy) when the pool is short; a write-back eviction
     * backs pages up first and waits for it. Before it gives up it applies the copies that have finished (their
     * completions may be queued behind a busy thread, and they unlock pages), and waits up to
     * {@code hicache-allocate-wait} for copies still in flight. Called with the lock held.
     *
     * @param heldByCaller device pages the caller itself holds (its pinned prefix, its pages not committed): they
     *     cannot come free while it waits
     * @throws HiCacheException {@link ErrorCode#PAGES_EXHAUSTED} when pages pinned by open requests (or copies that
     *     did not finish in time) leave too little to evict, and at once when {@code count} could never fit; the
     *     message says which, and how the pool stands
     */
    int[] allocateDevice(int count, int heldByCaller) {
        int could = pageAllocator.capacity() - heldByCaller;
        if (count > could) {
            metrics.fail("allocate: PAGES_EXHAUSTED");
            throw new HiCacheException(ErrorCode.PAGES_EXHAUSTED, "no " + count + " device pages, and this can never "
                    + "fit: the device pool has " + pageAllocator.capacity() + " pages in all"
                    + (heldByCaller > 0 ? ", " + heldByCaller + " of them held by this request itself" : "")
                    + ". Do not retry: split the work into smaller chunks, or give the device pool more pages");
        }
        int[] pages = pageAllocator.tryAllocate(count);
        Deadline wait = null;
        while (pages == null) {
            boolean over = wait != null && wait.isOver();
            if (agreement.enabled()) {
                over = settle(over ? 0 : 1)[0] == 0; // one rank's wait is over: every rank's is
            } else {
                completions.runQueuedHere();
            }
            evictDevice(count - pageAllocator.available());
            pages = pageAllocator.tryAllocate(count);
            if (pages != null) {
                break;
            }
            if (wait == null) {
                wait = Deadline.after(config.allocateWait());
            }
            if (over || !copiesInFlight()) {
                metrics.fail("allocate: PAGES_EXHAUSTED");
                throw new HiCacheException(ErrorCode.PAGES_EXHAUSTED, "no " + count + " device pages: "
                        + pageAllocator.available() + " free, " + tree.evictableDevicePages() + " evictable of "
                        + tree.devicePages() + " cached; the rest are pinned by open requests"
                        + (copiesInFlight() ? " or by copies still running after " + config.allocateWait().toMillis()
                                + " ms (hicache-allocate-wait)" : "")
                        + (host == null ? "; device only" : "; host: " + host.freeSlots() + " of " + host.capacity()
                                + " slots free") + ". Temporary: retry "
                        + "once requests commit or close, or give the device pool more pages");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(200_000); // a copy finishing frees or unlocks pages
        }
        return pages;
    }

    /** Copies started and not applied yet: what could still unlock device pages while the caller holds the lock. */
    private boolean copiesInFlight() {
        return outstanding.get() > 0 || completions.depth() > 0;
    }

    void freeDevice(int[] pages) {
        if (pages.length > 0) {
            pageAllocator.free(pages);
        }
    }

    /**
     * Frees device pages until {@code pages} more are free, or nothing else can go. A node that must be backed up
     * before it goes (write-back, or host-only children below it) is backed up and demoted; one whose backup cannot
     * start (no host room) gives way: it is removed with what hangs below it, as a device-only cache would, rather
     * than staying least recently used and pinning the pool.
     */
    private void evictDevice(int pages) {
        int wanted = pageAllocator.available() + pages;
        java.util.Set<TreeNode> tried = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        while (pageAllocator.available() < wanted) {
            RadixTree.DeviceEviction e = tree.evictDevice(wanted - pageAllocator.available(),
                    host != null && config.writePolicy() == WritePolicy.WRITE_BACK, tried);
            applyDeviceEviction(e);
            if (e.needBackup().isEmpty()) {
                return; // nothing else can go now
            }
            for (TreeNode n : e.needBackup()) {
                tried.add(n);
                Backups.BackupOp op = backups.start(n);
                if (op == null) {
                    giveWay(n);
                } else if (op.awaitAndFinish(Deadline.after(config.storageTimeout()))) {
                    freeDevice(tree.demote(n));
                    metrics.deviceEvictedPages.add(n.pages());
                    events.removed(n.hashes(), Medium.GPU);
                }
            }
        }
    }

    /** Frees the device pages {@code e} took from the tree, counting and announcing them; call with the lock held. */
    void applyDeviceEviction(RadixTree.DeviceEviction e) {
        freeDevice(e.freedPages());
        for (PageHashes h : e.demoted()) {
            metrics.deviceEvictedPages.add(h.size());
            events.removed(h, Medium.GPU);
        }
        for (PageHashes h : e.deleted()) {
            metrics.deviceDeletedPages.add(h.size());
            events.removed(h, Medium.GPU);
        }
    }

    /** Removes a node that cannot be backed up, and the host-only runs below it; nothing if one is in use. */
    private void giveWay(TreeNode n) {
        RadixTree.Dropped d = tree.dropWithSubtree(n);
        if (d == null) {
            return;
        }
        freeDevice(d.devicePages());
        if (d.hostSlots().length > 0) {
            host.release(d.hostSlots());
        }
        metrics.deviceDeletedPages.add(d.devicePages().length);
        metrics.hostEvictedPages.add(d.hostSlots().length);
        metrics.fail("backup: no host room; the node gave way (dropped)");
        events.removed(d.deviceRun(), Medium.GPU);
        for (PageHashes h : d.hostRuns()) {
            events.removed(h, Medium.CPU);
        }
    }

    /* ---------------------------------------------------------------- host slots */

    /** {@code count} reserved host slots, evicting host pages when short; null (nothing reserved) if it cannot. */
    int[] reserveHost(int count) {
        if (host == null) {
            return null;
        }
        if (agreement.enabled()) {
            return reserveHostAgreeing(count);
        }
        int[] slots = host.tryReserve(count);
        if (slots == null) {
            evictHost(count - host.freeSlots());
            slots = host.tryReserve(count);
        }
        if (slots != null && !agreement.enabled() && occupancy() >= config.hostHighWater() && hostEvictor.depth() == 0) {
            hostEvictor.offer(Boolean.TRUE); // ranks that agree evict at their settles instead: see settle()
        }
        return slots;
    }

    /**
     * {@link #reserveHost} for ranks that agree. Each rank's leftovers of an earlier run are its own, so the room that
     * decides whether to evict counts them as free (the same on every rank); they are freed only when this rank needs
     * their slots.
     */
    private int[] reserveHostAgreeing(int count) {
        if (hostRoom() < count) {
            evictHostTree(count - hostRoom());
            if (hostRoom() < count) {
                return null;
            }
        }
        if (host.freeSlots() < count) {
            leftovers.release(count - host.freeSlots());
        }
        return host.tryReserve(count);
    }

    /** Free host slots, counting leftovers as free for ranks that agree (see {@link #reserveHostAgreeing}). */
    private int hostRoom() {
        return host.freeSlots() + (agreement.enabled() ? leftovers.count() : 0);
    }

    private double occupancy() {
        return 1.0 - (double) hostRoom() / host.capacity();
    }

    /** Frees {@code pages} host slots: leftovers of an earlier run first, then host-only leaves of the tree. */
    void evictHost(int pages) {
        int freed = leftovers.release(pages);
        if (freed < pages) {
            evictHostTree(pages - freed);
        }
    }

    /** Frees up to {@code pages} host slots of host-only leaves of the tree. */
    private void evictHostTree(int pages) {
        RadixTree.HostEviction e = tree.evictHostReporting(pages);
        host.release(e.freedSlots());
        metrics.hostEvictedPages.add(e.freedSlots().length);
        for (PageHashes h : e.removed()) {
            events.removed(h, Medium.CPU);
        }
    }

    /** Open requests now; call with the lock held. */
    int openRequestCount() {
        return requests.size();
    }

    /** What the host evictor loop does when the pool passes its high-water mark: evict down to the low-water mark. */
    private void evictHostToLowWater() {
        lock.lock();
        try {
            if (!closed.get() && host != null) {
                evictHostToLowWaterLocked();
            }
        } finally {
            lock.unlock();
        }
    }

    private void evictHostToLowWaterLocked() {
        int target = (int) Math.ceil(host.capacity() * (1 - config.hostLowWater()));
        if (hostRoom() < target) {
            if (agreement.enabled()) {
                evictHostTree(target - hostRoom());
            } else {
                evictHost(target - hostRoom());
            }
        }
    }

    /**
     * Applies what finished in the background on every rank, then, for ranks that agree, evicts host pages past the
     * high-water mark here (where every rank does it at the same point) rather than on the evictor loop. Returns
     * {@code extra} reduced with MIN over the ranks. A no-op for one rank. Call with the lock held.
     */
    int[] settle(int... extra) {
        int[] agreed = agreement.settle(extra);
        if (agreement.enabled() && host != null && occupancy() >= config.hostHighWater()) {
            evictHostToLowWaterLocked();
        }
        return agreed;
    }

    /* ---------------------------------------------------------------- plumbing */

    /** Applies a copy's completion on the completion loop; never dropped (run here if the loop has closed). */
    void complete(Runnable task) {
        if (!completions.put(task)) {
            runLocked(task);
        }
    }

    /** Runs {@code task} under the lock. */
    private void runLocked(Runnable task) {
        lock.lock();
        try {
            task.run();
        } finally {
            lock.unlock();
        }
    }

    void checkOpen() {
        if (closed.get()) {
            throw new HiCacheException(ErrorCode.STORE_CLOSED, "the cache is closed");
        }
    }

    /** Requests open now: for tests. */
    List<CacheRequest> openRequests() {
        lock.lock();
        try {
            return new ArrayList<>(requests.values());
        } finally {
            lock.unlock();
        }
    }

    /** Checks the tree's invariants and that every device page and host slot has exactly one owner: for tests. */
    void checkConsistency() {
        checkConsistency(true);
    }

    /** As {@link #checkConsistency()}; {@code full} false checks only what holds at any moment (see CacheConsistency). */
    void checkConsistency(boolean full) {
        lock.lock();
        try {
            CacheConsistency.check(this, requests.values(), leftovers.slots(), full);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits up to {@code timeout} until background work (copies, uploads, prefetches) has nothing queued or running:
     * for an engine that drains before a checkpoint or a benchmark phase. True if it got there.
     */
    public boolean awaitIdle(Duration timeout) throws InterruptedException {
        if (agreement.enabled()) {
            return drain(timeout);
        }
        quiesce(timeout);
        return outstanding.get() == 0 && loopsIdle() && pendingCopies() == 0;
    }

    private boolean loopsIdle() {
        return completions.depth() == 0 && uploader.idle() && prefetcher.idle() && events.sink().idle();
    }

    /**
     * For ranks that agree: settles until every rank's background work is done and applied, or until {@code timeout}
     * on any rank (every rank returns the same). A collective: every rank calls it at the same point.
     */
    private boolean drain(Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (true) {
            lock.lock();
            try {
                // prefetches their requests have yet to end are not work in flight: open requests end them
                boolean idleHere = agreement.allDone() && completions.depth() == 0 && uploader.idle()
                        && prefetcher.workIdle() && events.sink().idle();
                int[] agreed = settle(idleHere ? 1 : 0, System.nanoTime() < end ? 1 : 0);
                if (agreed[0] == 1 && agreement.isEmpty()) {
                    return true; // idle everywhere before the settle, and what it applied started nothing new
                }
                if (agreed[1] == 0) {
                    return false;
                }
            } finally {
                lock.unlock();
            }
            Thread.sleep(1);
        }
    }

    /**
     * True when no open request pins a device page and no copy is in flight: every cached device page could be
     * evicted. An engine can check it after closing its requests, to find one it forgot.
     */
    public boolean nothingPinned() {
        lock.lock();
        try {
            return tree.evictableDevicePages() == tree.devicePages();
        } finally {
            lock.unlock();
        }
    }

    /** Milliseconds left until {@code endNanos}, at least 1. */
    private static long leftMillis(long endNanos) {
        return Math.max(1, (endNanos - System.nanoTime()) / 1_000_000);
    }

    /**
     * Waits until the background loops have nothing queued or running: for tests and orderly shutdown. For ranks
     * that agree it is a collective, as {@link #awaitIdle} (local once the cache is closing).
     */
    void quiesce(Duration timeout) throws InterruptedException {
        if (agreement.enabled()) {
            drain(timeout);
            return;
        }
        long end = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < end) {
            if (outstanding.get() == 0 && completions.depth() == 0 && uploader.idle() && prefetcher.idle()
                    && pendingCopies() == 0 && events.sink().idle()) {
                return;
            }
            Thread.sleep(2);
        }
    }

    private long pendingCopies() {
        lock.lock();
        try {
            return CacheConsistency.pendingCopies(tree);
        } finally {
            lock.unlock();
        }
    }

    /** Whether every thread the cache started has ended (after {@link #close}): for tests. */
    boolean threadsEnded() {
        return prefetcher.ended() && uploader.ended() && backups.ended() && completions.ended() && hostEvictor.ended();
    }

    /**
     * Stops the loops, letting queued work (prefetches, uploads, copies) finish for up to {@code hicache-close-timeout}
     * in all, closes open requests, then the page store, the KV event publisher (after publishing what is queued), the
     * host pool and the device pool. Uploads still queued
     * when the time is up are not written (the pages were cached, not acknowledged anywhere); the log says how
     * many.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        runLocked(agreement::goLocal); // the other ranks may be gone: what is left is applied here alone
        export.close();
        long end = System.nanoTime() + config.closeTimeout().toNanos();
        prefetcher.close(leftMillis(end));
        int uploadsLeft = uploader.depth();
        uploader.close(leftMillis(end));
        try {
            quiesce(Duration.ofMillis(leftMillis(end)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        backups.close(leftMillis(end));
        completions.close(leftMillis(end));
        hostEvictor.close(leftMillis(end));
        if (!uploader.idle() || uploader.depth() > 0) {
            LOG.log(Level.WARNING, "closed after hicache-close-timeout (" + config.closeTimeout().toMillis() + " ms) with "
                    + "uploads to the page store unfinished (" + uploadsLeft + " were queued when closing began)");
        }
        lock.lock();
        try {
            for (CacheRequest r : new ArrayList<>(requests.values())) {
                r.closeLocked();
            }
        } finally {
            lock.unlock();
        }
        PageStore attached = stores.detach(false);
        if (attached != null) { // the timing wrapper closes the store it wraps
            try {
                attached.close();
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "closing the page store failed", e);
            }
        }
        events.close(); // after the loops and requests, so that their last events go out
        if (host != null) {
            host.close();
        }
        device.close();
    }
}
