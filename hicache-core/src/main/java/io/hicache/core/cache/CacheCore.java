package io.hicache.core.cache;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.PagePart;
import io.hicache.core.memory.DevicePageAllocator;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.host.HostPagePool;
import io.hicache.core.page.AttentionKind;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.store.StoreSlot;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import io.hicache.core.util.Checks;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * The engine behind {@link HiCache}: the tree, the pools, the page store slot and the background loops, and the
 * plumbing they share (the lock, settling ranks that agree, completions, quiescing, closing). Its collaborators
 * (requests, {@link DeviceTier}, {@link HostTier}, {@link Backups}, {@link Uploader}, {@link Prefetcher},
 * {@link CacheAdmin}) take the engine; the public facade only delegates.
 *
 * <p>Thread-safe: {@link #lock} guards the tree, the allocators and the open requests (an engine's scheduler thread is
 * the main caller; loops take the lock briefly to apply results). Owns the device pool, the host pool, the page store
 * and the KV event publisher; {@link #close()} stops the loops and closes them. The device runtime is the caller's.
 */
final class CacheCore implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CacheCore.class.getName());

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
    final @Nullable HostPagePool host;
    /** The page store now, if any, wrapped in its timing: an operator may detach it and attach another. */
    final StoreSlot stores;

    final ReentrantLock lock = new ReentrantLock();
    final CacheMetrics metrics = new CacheMetrics();
    /** The metrics in the engine's Prometheus registry: detached on close. */
    final CacheMetricsExport export;

    final CacheEvents events;
    final Loop<Runnable> completions;
    /** Copies started and not yet applied: counted down only after what they start next (an upload) is counted. */
    final AtomicInteger outstanding = new AtomicInteger();

    final DeviceTier deviceTier;
    final HostTier hostTier;
    final Uploader uploader;
    final Prefetcher prefetcher;
    /** Backups of device pages to the host, and the loop that commits their host pages. */
    final Backups backups;
    /** Ready host pages left by an earlier run, which no node owns: adopted by requests, or the first to go. */
    final WarmHostPages leftovers;
    /** Keeps this rank's tree the same as the other tensor-parallel ranks' (does nothing for one rank). */
    final RankAgreement agreement;

    /** A hybrid model's parts in host memory (see {@link HostParts}); null for full-attention layers only. */
    final @Nullable HostParts parts;
    /** This rank's own namespace: a recurrent state is per rank even where an MLA model's KV is shared. */
    private final Namespace rankNamespace;

    /** The clock retention deadlines are read from ({@link HiCacheBuilder#clock}). */
    private final InstantSource clock;
    /** {@link #clock}'s reading when the cache opened: the tree's time counts milliseconds from there. */
    private final long openedMillis;

    private final Map<String, CacheRequest> requests = new LinkedHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();

    private CacheCore(
            HiCacheConfig config,
            Namespace namespace,
            PageFormat format,
            KvPool device,
            DevicePageAllocator pageAllocator,
            @Nullable HostPagePool host,
            @Nullable HostParts parts,
            Optional<PageStore> store,
            PrometheusRegistry registry,
            KvEventSink sink,
            @Nullable RankGroup ranks,
            @Nullable RankGroup queryRanks,
            InstantSource clock) {
        this.config = config;
        this.clock = clock;
        this.openedMillis = clock.millis();
        this.parts = parts;
        this.rankNamespace = namespace;
        this.agreement = new RankAgreement(ranks, queryRanks, config.rankTimeout());
        boolean mla = format.geometry().attention() == AttentionKind.MLA;
        // MLA pages are the same bytes on every rank: one copy in the page store, written by one rank
        this.uploadsHere = !mla || namespace.tpRank() == config.mlaUploadRank();
        this.namespace = mla ? namespace.sharedByRanks() : namespace;
        this.export = CacheMetricsExport.create(
                registry,
                this.namespace.id(),
                store.map(PageStore::name).orElse("none"),
                format.pageBytes(),
                config.pageSizeTokens());
        this.format = format;
        this.tree = new RadixTree(config.pageSizeTokens(), config.eviction());
        this.device = device;
        this.pageAllocator = pageAllocator;
        this.host = host;
        this.stores = new StoreSlot(store.map(this::timed).orElse(null));
        this.events = new CacheEvents(sink, config.pageSizeTokens(), storeMedium(store.orElse(null)));
        this.leftovers = new WarmHostPages(this);
        this.completions = new Loop<>("completions", config.queueCapacity(), Runnable::run, metrics, lock);
        this.deviceTier = new DeviceTier(this);
        this.hostTier = new HostTier(this);
        this.uploader = new Uploader(this);
        this.prefetcher = new Prefetcher(this);
        this.backups = new Backups(this);
        export.start(this::stats);
    }

    /** How the device pool is made: its pages, the engine's memory it adopts (address 0: none), its page allocator. */
    record DeviceSetup(
            int pages, long address, long bytes, @Nullable DevicePageAllocator allocator) {}

    /**
     * Opens what {@link HiCacheBuilder#open()} describes; {@code store} null means the configured one, or none, and
     * {@code publisher} null the one {@code kv-events-config} names, or none. A failure closes the publisher and what
     * was opened here.
     */
    static CacheCore open(
            HiCacheConfig config,
            Namespace asked,
            KvGeometry geometry,
            @Nullable HybridGeometry hybrid,
            DeviceSetup setup,
            DeviceRuntime runtime,
            @Nullable PageStore store,
            PrometheusRegistry registry,
            @Nullable KvEventPublisher publisher,
            @Nullable RankGroup ranks,
            @Nullable RankGroup queryRanks,
            InstantSource clock) {
        int devicePages = setup.pages();
        PageFormat format =
                new PageFormat(geometry, config.pageSizeTokens(), config.host().layout());
        // The key-identity contract (docs/keys.md): what the cache knows of its pages' bytes must be in their keys.
        Checks.requireArgument(
                asked.kvDtype() == geometry.dtype(),
                "the namespace says %s KV, the geometry %s",
                asked.kvDtype(),
                geometry.dtype());
        Checks.requireArgument(
                asked.pageTokens() == 0 || asked.pageTokens() == format.pageSizeTokens(),
                "the namespace says pages of %s tokens, the cache has pages of %s",
                asked.pageTokens(),
                format.pageSizeTokens());
        Namespace namespace = asked.pageTokens() == 0 && asked.formatVersion() > 1
                ? asked.withPageTokens(format.pageSizeTokens())
                : asked;
        Checks.requireArgument(
                geometry.attention() != AttentionKind.MLA || config.mlaUploadRank() < namespace.tpSize(),
                "hicache-mla-upload-rank is %s, but the model has %s tensor-parallel ranks",
                config.mlaUploadRank(),
                namespace.tpSize());
        Checks.requireArgument(
                ranks == null || (ranks.size() == namespace.tpSize() && ranks.rank() == namespace.tpRank()),
                "the rank group is rank %s of %s, the namespace says rank %s of %s",
                ranks == null ? 0 : ranks.rank(),
                ranks == null ? 0 : ranks.size(),
                namespace.tpRank(),
                namespace.tpSize());
        Checks.requireArgument(
                queryRanks == null
                        || (ranks != null && queryRanks.size() == ranks.size() && queryRanks.rank() == ranks.rank()),
                "the prefetch rank group must be the same ranks as the rank group");
        Checks.requireArgument(
                namespace.pageByteOrder() == format.byteOrder(),
                "the namespace says %s pages, the host layout %s stores %s",
                namespace.pageByteOrder(),
                config.host().layout(),
                format.byteOrder());
        KvEventSink sink = publisher != null
                ? KvEventSink.over("kv-events", publisher, config.kvEvents().maxQueueEvents())
                : KvEventSink.open("kv-events", config.kvEvents());
        KvPool pool;
        try {
            Checks.requireArgument(
                    setup.allocator() == null || setup.allocator().capacity() == devicePages,
                    "the page allocator manages %s pages, the device pool has %s",
                    setup.allocator() == null ? 0 : setup.allocator().capacity(),
                    devicePages);
            pool = setup.address() != 0
                    ? runtime.adoptPool(format, devicePages, setup.address(), setup.bytes())
                    : runtime.createPool(format, devicePages);
        } catch (RuntimeException e) {
            sink.close();
            throw e;
        }
        HostPagePool host = null;
        HostParts parts = null;
        PageStore configured = null;
        try {
            Checks.requireArgument(
                    config.tiers() == Tiers.ALL || store == null,
                    "hicache-tiers device-only runs no page store, yet one was given");
            if (config.tiers() == Tiers.ALL) {
                host = HostPagePool.open(
                        config.host(), format, HostPagePool.slotsFor(config.host(), format, devicePages), runtime);
            }
            if (hybrid != null) {
                Checks.requireArgument(
                        hybrid.full().equals(geometry),
                        "the hybrid model's full-attention layers are not the geometry");
                parts = new HostParts(hybrid, config.pageSizeTokens(), config.hybridHostBytes());
            }
            if (store == null) {
                configured = config.storageBackend()
                        .map(name -> PageStores.open(new StoreConfig(name, config.settings())))
                        .orElse(null);
            }
            return new CacheCore(
                    config,
                    namespace,
                    format,
                    pool,
                    setup.allocator() != null ? setup.allocator() : pool.allocator(),
                    host,
                    parts,
                    Optional.ofNullable(store != null ? store : configured),
                    registry,
                    sink,
                    ranks,
                    queryRanks,
                    clock);
        } catch (RuntimeException e) {
            sink.close();
            if (configured != null) {
                configured.close(); // a store given by the caller is closed by the builder
            }
            if (host != null) {
                host.close();
            }
            if (parts != null) {
                parts.close();
            }
            pool.close();
            throw e;
        }
    }

    /** The host pool, for work that only runs with one (backups, prefetches, host eviction). */
    HostPagePool host() {
        return Checks.checkNotNull(host, "the host pool (hicache-tiers device-only has none)");
    }

    /** The page hashes of the path from the root to {@code last}, in order; call with the lock held. */
    static List<PageHash> pathHashes(TreeNode last) {
        List<PageHashes> runs = new ArrayList<>();
        for (TreeNode n = last; !n.isRoot(); n = n.parent()) {
            runs.add(n.hashes());
        }
        List<PageHash> hashes = new ArrayList<>();
        for (int i = runs.size() - 1; i >= 0; i--) {
            hashes.addAll(runs.get(i).asList());
        }
        return hashes;
    }

    /** Where {@code part} of this cache's pages is in the page store. */
    Namespace partNamespace(PagePart part) {
        return part == PagePart.RECURRENT_STATE ? rankNamespace.forPart(part) : namespace.forPart(part);
    }

    /* ---------------------------------------------------------------- the page store */

    /** {@code store} as the cache calls it: timed, and watched for whether it answers. */
    TimedPageStore timed(PageStore store) {
        return new TimedPageStore(store, export, metrics, config.storageTimeout());
    }

    /**
     * Whether work needing {@code kinds} of store call may start (YES when no store is attached: nothing waits on
     * one); see {@link TimedPageStore#admit}.
     */
    TimedPageStore.Admission admitStoreWork(TimedPageStore.Kind... kinds) {
        return stores.current()
                .map(s -> s instanceof TimedPageStore t ? t.admit(kinds) : TimedPageStore.Admission.YES)
                .orElse(TimedPageStore.Admission.YES);
    }

    /** Whether the attached store answers calls of {@code kind} now (true when none is attached). */
    boolean storeAnswers(TimedPageStore.Kind kind) {
        return stores.current()
                .map(s -> !(s instanceof TimedPageStore t) || t.answering(kind))
                .orElse(true);
    }

    /** Where uploads to {@code store} land in KV events: EXTERNAL for a store other engines share, else DISK. */
    static Medium storeMedium(@Nullable PageStore store) {
        return Medium.ofStore(store != null && store.capabilities().has(Capability.SHARED));
    }

    /* ---------------------------------------------------------------- requests */

    /** Opens request {@code id}; see {@link HiCache#request(String, String, int[], Retention)}. */
    CacheRequest request(String id, String extraKey, int[] promptTokens, Retention retention) {
        lock.lock();
        try {
            checkOpen();
            Checks.requireArgument(!requests.containsKey(id), "request '%s' is already open", id);
            settle();
            CacheRequest r = new CacheRequest(this, id, extraKey, promptTokens.clone(), retention);
            requests.put(id, r);
            return r;
        } finally {
            lock.unlock();
        }
    }

    Optional<CacheRequest> find(String id) {
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

    /** Open requests now; call with the lock held. */
    int openRequestCount() {
        return requests.size();
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

    /* ---------------------------------------------------------------- state */

    CacheStats stats() {
        Map<String, Integer> depths = new LinkedHashMap<>();
        depths.put("completions", completions.depth());
        depths.put("upload", uploader.depth());
        depths.put("upload-pages", uploader.queuedPages()); // the write-behind's lag, in pages
        depths.put("prefetch-query", prefetcher.queryDepth());
        depths.put("prefetch-io", prefetcher.ioDepth());
        depths.put("kv-events", (int)
                Math.min(Integer.MAX_VALUE, events.sink().stats().queuedEvents()));
        lock.lock();
        try {
            long corruptInStore =
                    stores.current().map(s -> s.stats().corruptPages()).orElse(0L);
            return metrics.snapshot(depths, tree.devicePages(), tree.hostPages(), tree.nodes(), corruptInStore);
        } finally {
            lock.unlock();
        }
    }

    HiCache.Room room() {
        lock.lock();
        try {
            return new HiCache.Room(
                    pageAllocator.capacity(),
                    pageAllocator.available(),
                    tree.evictableDevicePages(),
                    host == null ? 0 : host.capacity(),
                    host == null ? 0 : host.freeSlots());
        } finally {
            lock.unlock();
        }
    }

    boolean nothingPinned() {
        lock.lock();
        try {
            return tree.evictableDevicePages() == tree.devicePages();
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

    /** See {@link HiCache#demote}. */
    int demote(String extraKey, int[] tokens, int keepTokens) {
        lock.lock();
        try {
            checkOpen();
            return tree.demotePriority(extraKey, tokens, keepTokens / config.pageSizeTokens());
        } finally {
            lock.unlock();
        }
    }

    /* ---------------------------------------------------------------- plumbing */

    /**
     * Applies what finished in the background on every rank, then, for ranks that agree, evicts host pages past the
     * high-water mark and demotes device pages short of the free target here (where every rank does it at the same
     * point). Returns {@code extra} reduced with MIN over
     * the ranks. Moves the tree's time on ({@link #tickClock}): for ranks that agree, by the least any rank's clock
     * has gone past it, carried in the same reduction, so that every rank's tree has the same time. Call with the
     * lock held.
     */
    int[] settle(int... extra) {
        if (!agreement.enabled()) {
            int[] agreed = agreement.settle(extra);
            tickClock();
            hostTier.afterSettle();
            return agreed;
        }
        int[] withTime = Arrays.copyOf(extra, extra.length + 1);
        withTime[extra.length] = Math.clamp(localMillis() - tree.time(), 0, Integer.MAX_VALUE);
        int[] agreed = agreement.settle(withTime);
        tree.advanceTime(tree.time() + agreed[extra.length]);
        hostTier.afterSettle();
        deviceTier.afterSettle();
        return Arrays.copyOf(agreed, extra.length);
    }

    /**
     * Moves the tree's time, which retention is measured on, to this cache's clock: for one rank, before each
     * eviction and at each settle. Ranks that agree move it only at their settles (each rank's own clock would make
     * each rank evict differently), so their evictions go by the time agreed at the last engine call that settled.
     * Call with the lock held.
     */
    void tickClock() {
        if (!agreement.enabled()) {
            tree.advanceTime(localMillis());
        }
    }

    /** Milliseconds of {@link #clock} since the cache opened. */
    private long localMillis() {
        return clock.millis() - openedMillis;
    }

    /** Applies a copy's completion on the completion loop; never dropped (run here if the loop has closed). */
    void complete(Runnable task) {
        if (!completions.put(task)) {
            runLocked(task);
        }
    }

    /** Runs {@code task} under the lock. */
    void runLocked(Runnable task) {
        lock.lock();
        try {
            task.run();
        } finally {
            lock.unlock();
        }
    }

    boolean isOpen() {
        return !closed.get();
    }

    void checkOpen() {
        if (closed.get()) {
            throw new HiCacheException(ErrorCode.STORE_CLOSED, "the cache is closed");
        }
    }

    /* ---------------------------------------------------------------- waiting and closing */

    /** See {@link HiCache#awaitIdle}. */
    boolean awaitIdle(Duration timeout) throws InterruptedException {
        if (agreement.enabled()) {
            return drain(timeout);
        }
        quiesce(timeout);
        return outstanding.get() == 0 && loopsIdle() && pendingCopies() == 0;
    }

    private boolean loopsIdle() {
        return completions.depth() == 0
                && uploader.idle()
                && prefetcher.idle()
                && events.sink().idle();
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
                boolean idleHere = agreement.allDone()
                        && completions.depth() == 0
                        && uploader.idle()
                        && prefetcher.workIdle()
                        && events.sink().idle();
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
            if (outstanding.get() == 0 && loopsIdle() && pendingCopies() == 0) {
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
        return prefetcher.ended()
                && uploader.ended()
                && backups.ended()
                && completions.ended()
                && hostTier.ended()
                && deviceTier.ended();
    }

    /** Milliseconds left until {@code endNanos}, at least 1. */
    private static long leftMillis(long endNanos) {
        return Math.max(1, (endNanos - System.nanoTime()) / 1_000_000);
    }

    /** See {@link HiCache#close()}. */
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
        hostTier.close(leftMillis(end));
        deviceTier.close(leftMillis(end));
        if (!uploader.idle() || uploader.depth() > 0) {
            LOG.log(
                    Level.WARNING,
                    "closed after hicache-close-timeout ("
                            + config.closeTimeout().toMillis() + " ms) with " + "uploads to the page store unfinished ("
                            + uploadsLeft + " were queued when closing began)");
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
        if (parts != null) {
            parts.close();
        }
        device.close();
    }
}
