package io.hicache.storage.nixl;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.CapacityGate;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.XferOp;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * The {@code nixl} page store: SGLang's HiCacheNixl on this project's NIXL agent. Each page is a file (the plugin
 * serves FILE storage, as POSIX does; {@link FileLayout}) or an object (OBJ; {@link ObjLayout}) holding the page
 * followed by its {@link PageTrailer}; a get or put of a page is one transfer of two descriptors (page and trailer),
 * and a batch posts all its transfers at once. Host memory can be registered once ({@link #registerHostMemory}); pages
 * outside it are registered per batch. Storage-side read registrations are kept in a bounded
 * {@link RegistrationCache}. A cleaner ({@link CapacityGate}) deletes the least recently used pages once the store
 * passes {@code nixl.high-water} of its capacity, down to {@code nixl.low-water}.
 *
 * <p>Writes are atomic (a page file or object appears whole or not at all), so stores on the same folders or bucket
 * share pages. Thread-safe. The opener closes it; closing cancels transfers in flight, releases every registration,
 * closes the agent and its plugins.
 */
public final class NixlPageStore extends AbstractPageStore {
    private static final System.Logger LOG = System.getLogger(NixlPageStore.class.getName());
    private static final int PREFERRED_BATCH = 128;
    /** How long cancelled transfers get to stop touching memory once a call's deadline has passed. */
    private static final long DRAIN_NANOS = 5_000_000_000L;

    private final NixlStoreConfig config;
    private final NixlAgent agent;
    private final String pluginName;
    private final StorageLayout layout;
    /**
     * What the store holds, least recently used first: page name to stored bytes. Built from a scan when the store
     * opens, kept up to date by its puts, gets and deletes. Pages other stores on the same folders or bucket write are
     * not in it until the next open.
     */
    private final PageUsageIndex<String> index =
            PageUsageIndex.<String>builder(PageUsageIndex.Order.RECENCY).build();

    private final RegistrationCache registrations;
    private final HostRegions hostRegions;
    /** Null without a capacity limit. */
    private final @Nullable CapacityGate<String> gate;

    private NixlPageStore(
            NixlStoreConfig config,
            NixlAgent agent,
            String pluginName,
            StorageLayout layout,
            List<StorageLayout.Found> stored,
            long capacityBytes) {
        super(
                "nixl",
                pluginName + " " + layout.location(),
                new StoreCapabilities(
                        capacityBytes > 0
                                ? Set.of(Capability.PERSISTENT, Capability.SHARED, Capability.EVICTING)
                                : Set.of(Capability.PERSISTENT, Capability.SHARED),
                        PageFormat.MAX_PAGE_BYTES,
                        PREFERRED_BATCH));
        this.config = config;
        this.agent = agent;
        this.pluginName = pluginName;
        this.layout = layout;
        this.registrations = new RegistrationCache(agent, config.registrationCache());
        this.hostRegions = new HostRegions(agent);
        // Modification times stand in for last use: sorted once, when the store opens.
        List<StorageLayout.Found> oldestFirst = new ArrayList<>(stored);
        oldestFirst.sort(Comparator.comparingLong(StorageLayout.Found::modifiedMillis));
        for (StorageLayout.Found f : oldestFirst) {
            index.insert(f.name(), f.bytes());
        }
        this.gate = capacityBytes > 0
                ? new CapacityGate<>(
                        "nixl",
                        capacityBytes,
                        new CapacityGate.Watermarks(config.highWater(), config.lowWater()),
                        index,
                        this::evict)
                : null;
        if (gate != null) {
            gate.start();
        }
    }

    /**
     * Opens the store {@code config} describes: picks the plugin (the configured one, or the first that can run),
     * makes the agent and its backend, and indexes what is stored.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the plugin cannot run or its storage cannot be
     *     used (the message says why)
     */
    public static NixlPageStore open(NixlStoreConfig config) {
        NixlAgent agent = NixlAgent.create("hicache-" + UUID.randomUUID());
        StorageLayout layout = null;
        try {
            // What the store needs of the plugin, the plugin says: the parameters it reads and the storage it serves.
            Map<String, String> offered = config.pluginParams();
            NixlPlugin plugin = NixlPlugins.choose(NixlPlugins.all(), config.plugin(), offered);
            agent.createBackend(plugin.name(), NixlPlugins.paramsFor(plugin, offered));
            layout = StorageLayout.open(plugin, config, agent);
            List<StorageLayout.Found> found = layout.scan();
            long capacity = config.capacityBytes() > 0
                    ? config.capacityBytes()
                    : layout.defaultCapacityBytes(
                            found.stream().mapToLong(StorageLayout.Found::bytes).sum());
            NixlPageStore store = new NixlPageStore(config, agent, plugin.name(), layout, found, capacity);
            LOG.log(
                    Level.INFO,
                    () -> "nixl store: plugin " + store.pluginName + " at " + store.location() + ", "
                            + store.index.size() + " pages found"
                            + (store.gate == null
                                    ? ", no capacity limit"
                                    : ", capacity " + Units.formatBytes(store.gate.capacityBytes())));
            return store;
        } catch (IOException | RuntimeException e) {
            if (layout != null) {
                layout.close();
            }
            agent.close();
            if (e instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "cannot open the nixl store (" + config.plugin() + "): " + e.getMessage(),
                    e);
        }
    }

    /** The plugin in use: {@code POSIX}, {@code OBJ} or another found with {@link java.util.ServiceLoader}. */
    public String pluginName() {
        return pluginName;
    }

    /** The agent, for tests (registrations in force, requests alive). */
    NixlAgent agent() {
        return agent;
    }

    /** Where page {@code key} is stored: a file path or an object key. */
    public String whereIs(StoreKey key) {
        return layout.where(key.toString());
    }

    /** Reads of a page whose storage registration was reused, and reads that had to register it. */
    public long[] registrationCacheHitsAndMisses() {
        return new long[] {registrations.hits(), registrations.misses()};
    }

    /**
     * Registers host memory once (SGLang's {@code register_mem_pool_host}): pages inside it move without a
     * registration of their own. The segment must stay alive until the store is closed.
     */
    public void registerHostMemory(MemorySegment hostMemory) {
        hostRegions.add(hostMemory);
    }

    /* ---------------------------------------------------------------- the data path */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        List<MemoryRegion> regions = new ArrayList<>(keys.size());
        for (StoreKey k : keys) {
            regions.add(layout.readRegion(k.toString(), 1));
        }
        return agent.queryMemory(regions).thenApply(exists -> {
            int hits = 0;
            while (hits < exists.size() && exists.get(hits)) {
                hits++;
            }
            return hits;
        });
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        return getPages(targets, deadline).thenApply(r -> lastFirst(targets, r));
    }

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        return putPages(sources, deadline).thenApply(r -> lastFirst(sources, r));
    }

    /**
     * Makes the pages of a batch (a chain's, first page first) used last page first, whatever order their transfers
     * finished in: eviction then takes a chain's suffix before its prefix, never leaving a hole in a cached prefix.
     */
    private BatchResult lastFirst(PageBatch batch, BatchResult result) {
        for (int i = batch.size() - 1; i >= 0; i--) {
            if (result.status(i) == PageStatus.OK || result.status(i) == PageStatus.EXISTS) {
                index.touch(batch.key(i).toString());
            }
        }
        return result;
    }

    private CompletableFuture<BatchResult> getPages(PageBatch targets, Deadline deadline) {
        int n = targets.size();
        MemorySegment trailers = Arena.ofAuto().allocate((long) PageTrailer.BYTES * n, 8);
        LocalPages local = LocalPages.register(agent, hostRegions, targets, trailers);
        Transfers transfers = new Transfers(agent, n);
        for (int i = 0; i < n; i++) {
            String name = targets.key(i).toString();
            long pageBytes = targets.page(i).byteSize();
            long stored = pageBytes + PageTrailer.BYTES;
            int page = i;
            transfers.start(
                    i,
                    () -> registrations.lease(name, stored, () -> layout.readRegion(name, stored)),
                    lease -> transfer(XferOp.READ, local, page, lease.registration(), pageBytes));
        }
        return transfers.awaitAll(deadline, DRAIN_NANOS).thenApply(statuses -> {
            try {
                BatchResult.Builder result = BatchResult.builder(n);
                for (int i = 0; i < n; i++) {
                    readOutcome(
                            result,
                            i,
                            targets.key(i),
                            targets.page(i),
                            local.trailer(i),
                            statuses[i],
                            transfers.detail(i),
                            deadline);
                }
                return result.build();
            } finally {
                transfers.close();
                local.close();
            }
        });
    }

    private void readOutcome(
            BatchResult.Builder result,
            int i,
            StoreKey key,
            MemorySegment page,
            MemorySegment trailer,
            NixlStatus status,
            @Nullable String detail,
            Deadline deadline) {
        String name = key.toString();
        switch (status) {
            case SUCCESS -> {
                String problem = PageTrailer.problem(trailer, key, page, PageChecksum.of(page));
                if (problem == null) {
                    index.touch(name);
                    result.set(i, PageStatus.OK);
                } else {
                    LOG.log(Level.WARNING, () -> "nixl store: page " + name + " is damaged (" + problem + "); removed");
                    discard(name);
                    result.set(i, PageStatus.CORRUPT, problem);
                }
            }
            case ERR_NOT_FOUND -> {
                registrations.invalidate(name);
                forget(name);
                result.set(i, PageStatus.MISS);
            }
            case ERR_MISMATCH -> result.set(i, PageStatus.SIZE_MISMATCH, detail);
            case ERR_CANCELED, ERR_TIMED_OUT, IN_PROG ->
                result.set(i, PageStatus.stoppedBy(deadline), "stopped by the deadline");
            default -> {
                registrations.invalidate(name);
                result.set(i, PageStatus.FAILED, status + ": " + detail);
            }
        }
    }

    private CompletableFuture<BatchResult> putPages(PageBatch sources, Deadline deadline) {
        int n = sources.size();
        BatchResult.Builder early = BatchResult.builder(n);
        boolean[] skip = new boolean[n];
        long reserve = 0;
        for (int i = 0; i < n; i++) {
            if (index.contains(sources.key(i).toString())) {
                skip[i] = true;
                early.set(i, PageStatus.EXISTS);
            } else {
                reserve += sources.page(i).byteSize() + PageTrailer.BYTES;
            }
        }
        if (gate != null && reserve > 0) {
            try {
                if (!gate.reserve(reserve, deadline)) {
                    return CompletableFuture.completedFuture(
                            BatchResult.all(
                                    n,
                                    PageStatus.stoppedBy(deadline),
                                    "no room:"
                                            + " the store is over its capacity and the cleaner did not catch up before the deadline"));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return CompletableFuture.completedFuture(BatchResult.all(n, PageStatus.FAILED, "interrupted"));
            }
        }
        MemorySegment trailers = Arena.ofAuto().allocate((long) PageTrailer.BYTES * n, 8);
        for (int i = 0; i < n; i++) {
            MemorySegment page = sources.page(i);
            PageTrailer.write(
                    trailers.asSlice((long) i * PageTrailer.BYTES, PageTrailer.BYTES),
                    sources.key(i),
                    page.byteSize(),
                    PageChecksum.of(page));
        }
        LocalPages local = LocalPages.register(agent, hostRegions, sources, trailers);
        Transfers transfers = new Transfers(agent, n);
        for (int i = 0; i < n; i++) {
            if (skip[i]) {
                continue;
            }
            String name = sources.key(i).toString();
            long pageBytes = sources.page(i).byteSize();
            int page = i;
            transfers.start(
                    i,
                    () -> Transfers.registered(agent, layout.writeRegion(name, pageBytes + PageTrailer.BYTES)),
                    target -> transfer(XferOp.WRITE, local, page, target.registration(), pageBytes));
        }
        return transfers.awaitAll(deadline, DRAIN_NANOS).thenApply(statuses -> {
            try {
                for (int i = 0; i < n; i++) {
                    if (skip[i]) {
                        continue;
                    }
                    String name = sources.key(i).toString();
                    long stored = sources.page(i).byteSize() + PageTrailer.BYTES;
                    if (statuses[i] == NixlStatus.SUCCESS) {
                        registrations.invalidate(name);
                        index.remove(name); // a concurrent put of the same page wrote it too: keep one entry
                        index.insert(name, stored);
                        early.set(i, PageStatus.OK);
                    } else {
                        boolean stopped = statuses[i] == NixlStatus.ERR_CANCELED
                                || statuses[i] == NixlStatus.IN_PROG
                                || statuses[i] == NixlStatus.ERR_TIMED_OUT;
                        early.set(
                                i,
                                stopped ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED,
                                stopped ? "stopped by the deadline" : statuses[i] + ": " + transfers.detail(i));
                    }
                    release(stored); // a page written is in the index now, which counts it
                }
                return early.build();
            } finally {
                transfers.close();
                local.close();
            }
        });
    }

    /** One page's transfer: the page and its trailer, against the first region of {@code storage}. */
    private XferRequest transfer(XferOp op, LocalPages local, int page, Registration storage, long pageBytes) {
        var remote = storage.region(0);
        return agent.createXfer(
                op,
                List.of(local.pageDesc(page), local.trailerDesc(page)),
                List.of(remote.slice(0, pageBytes), remote.slice(pageBytes, PageTrailer.BYTES)),
                null);
    }

    /* ---------------------------------------------------------------- deletes, clears, cleaning */

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        return CompletableFuture.completedFuture(eachKey(keys.size(), deadline, i -> {
            String name = keys.get(i).toString();
            registrations.invalidate(name);
            boolean removed = layout.delete(name);
            forget(name);
            return removed ? PageStatus.OK : PageStatus.MISS;
        }));
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return clearing(namespace.id());
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return clearing(null);
    }

    private CompletableFuture<Void> clearing(@Nullable String namespaceId) {
        String prefix = namespaceId == null ? null : namespaceId + "/";
        try {
            registrations.invalidateAll(prefix);
            layout.clear(namespaceId);
            for (String name : index.keys(n -> prefix == null || n.startsWith(prefix))) {
                index.remove(name);
            }
            return CompletableFuture.completedFuture(null);
        } catch (IOException | RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** The cleaner: deletes the least recently used pages, which the gate claimed. */
    private void evict(List<PageUsageIndex.Claimed<String>> pages) throws IOException {
        for (PageUsageIndex.Claimed<String> page : pages) {
            registrations.invalidate(page.key());
            layout.delete(page.key());
            if (index.removeEntry(page.entry()) >= 0) {
                droppedByName(page.key());
            }
        }
    }

    /** Tells the dropped-pages listener of a page named as {@link StoreKey#toString} names it. */
    private void droppedByName(String name) {
        int slash = name.indexOf('/');
        if (slash > 0 && name.length() - slash - 1 == PageHash.HEX_LENGTH) {
            dropped(name.substring(0, slash), PageHash.fromHex(name.substring(slash + 1)));
        }
    }

    private void discard(String name) {
        registrations.invalidate(name);
        try {
            layout.delete(name);
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.WARNING, () -> "nixl store: cannot remove damaged page " + name + ": " + e);
        }
        forget(name);
    }

    private void forget(String name) {
        index.remove(name);
    }

    /** Gives back a put's reservation. */
    private void release(long bytes) {
        if (gate != null && bytes > 0) {
            gate.release(bytes);
        }
    }

    /** Per-key work run in order until the deadline; an exception fails that key only. */
    private static BatchResult eachKey(int n, Deadline deadline, KeyWork work) {
        BatchResult.Builder result = BatchResult.builder(n);
        for (int i = 0; i < n; i++) {
            if (deadline.isOver()) {
                result.set(i, PageStatus.stoppedBy(deadline));
                continue;
            }
            try {
                result.set(i, work.run(i));
            } catch (IOException | RuntimeException e) {
                result.set(i, PageStatus.FAILED, e.toString());
            }
        }
        return result.build();
    }

    @FunctionalInterface
    private interface KeyWork {
        PageStatus run(int index) throws IOException;
    }

    /* ---------------------------------------------------------------- stats and closing */

    @Override
    protected Optional<PageUsageIndex<?>> usageIndex() {
        return Optional.of(index);
    }

    @Override
    protected long capacityBytes() {
        return gate == null ? -1 : gate.capacityBytes();
    }

    /** False: a page whose trailer fails is discarded while it is read. */
    @Override
    protected boolean removesCorruptPages() {
        return false;
    }

    @Override
    protected void doClose() {
        if (gate != null) {
            gate.close();
        }
        agent.close();
        layout.close();
    }
}
