package io.hicache.core.cache;

import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.DevicePageAllocator;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.Checks;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.InstantSource;
import org.jspecify.annotations.Nullable;

/**
 * Collects what a {@link HiCache} is opened with; {@link #open()} checks that every required part is set. Each part
 * may be set once (a second set is a mistake and is refused), and a builder opens one cache. Not thread-safe; use it on
 * one thread and drop it.
 *
 * <pre>{@code
 * HiCache cache = HiCache.builder()
 *         .config(HiCacheConfig.from(settings))
 *         .namespace(namespace)
 *         .geometry(geometry)
 *         .devicePages(256)
 *         .runtime(runtime)
 *         .open();
 * }</pre>
 */
public final class HiCacheBuilder {
    private @Nullable HiCacheConfig config;
    private @Nullable Namespace namespace;
    private @Nullable KvGeometry geometry;
    private @Nullable HybridGeometry hybrid;
    private int devicePages;
    private @Nullable DeviceRuntime runtime;
    private @Nullable PageStore store;
    private PrometheusRegistry metrics = PrometheusRegistry.defaultRegistry;
    private @Nullable KvEventPublisher kvEventPublisher;
    private long deviceAddress;
    private long deviceBytes;
    private @Nullable DevicePageAllocator pageAllocator;
    private @Nullable RankGroup rankGroup;
    private @Nullable RankGroup prefetchRankGroup;
    private @Nullable InstantSource clock;
    private boolean opened;

    HiCacheBuilder() {}

    /** The cache's settings (SGLang's names: page size, write policy, host sizing, storage backend...). Required. */
    public HiCacheBuilder config(HiCacheConfig value) {
        Checks.requireState(config == null, "config was already set to %s", config);
        config = Checks.checkNotNull(value, "config");
        return this;
    }

    /**
     * What the cache's page keys carry besides tokens (docs/keys.md): model and weights revision, dtype, ranks, tenant,
     * extra key. Required. Its dtype must be the geometry's and its page size the cache's (or unstated: the cache fills
     * it in, see {@link HiCache#namespace()}).
     */
    public HiCacheBuilder namespace(Namespace value) {
        Checks.requireState(namespace == null, "namespace was already set to %s", namespace);
        namespace = Checks.checkNotNull(value, "namespace");
        return this;
    }

    /** The KV geometry of one rank (layers, heads, head size, dtype). Required. */
    public HiCacheBuilder geometry(KvGeometry value) {
        Checks.requireState(geometry == null || hybrid != null, "geometry was already set to %s", geometry);
        Checks.requireArgument(
                hybrid == null || hybrid.full().equals(value),
                "the hybrid model's full-attention layers are %s, the geometry %s",
                hybrid == null ? null : hybrid.full(),
                value);
        geometry = Checks.checkNotNull(value, "geometry");
        return this;
    }

    /**
     * A hybrid model (sliding-window or recurrent layers beside full attention): the cache also keeps the parts each
     * cached prefix's end needs, in {@code hicache-hybrid-host-bytes} of host memory and in the page store, and a
     * request's hit is only what every part can restore (docs/embedding.md, "Hybrid models"). Sets the geometry to
     * the full-attention layers' when it is not set; when it is, they must be the same.
     */
    public HiCacheBuilder hybrid(HybridGeometry value) {
        Checks.requireState(hybrid == null, "hybrid was already set to %s", hybrid);
        Checks.checkNotNull(value, "hybrid");
        Checks.requireArgument(
                geometry == null || geometry.equals(value.full()),
                "the geometry is %s, the hybrid model's full-attention layers %s",
                geometry,
                value.full());
        hybrid = value;
        geometry = value.full();
        return this;
    }

    /** Pages in the device pool the cache allocates on the runtime. Required, positive. */
    public HiCacheBuilder devicePages(int pages) {
        Checks.requireState(devicePages == 0, "devicePages was already set to %d", devicePages);
        Checks.requireArgument(pages > 0, "devicePages must be positive, was %d", pages);
        devicePages = pages;
        return this;
    }

    /** The device runtime the pools live on. Required; it stays the caller's (the cache does not close it). */
    public HiCacheBuilder runtime(DeviceRuntime value) {
        Checks.requireState(runtime == null, "runtime was already set to %s", runtime);
        runtime = Checks.checkNotNull(value, "runtime");
        return this;
    }

    /**
     * Builds the device pool over memory the engine allocated ({@code bytes} at device address {@code address}: a
     * {@code CUdeviceptr} value on CUDA, a host address on the emulated device) instead of allocating it. The pool
     * adopts the memory and does not own it: closing the cache does not free it; the engine frees it after. It must
     * hold {@code devicePages} pages laid out as {@link io.hicache.core.memory.DeviceLayout} says. Optional.
     */
    public HiCacheBuilder deviceMemory(long address, long bytes) {
        Checks.requireState(deviceAddress == 0, "deviceMemory was already set to address %s", deviceAddress);
        Checks.requireArgument(address != 0, "the device address must not be 0");
        Checks.requireArgument(bytes > 0, "bytes must be positive, was %d", bytes);
        deviceAddress = address;
        deviceBytes = bytes;
        return this;
    }

    /**
     * The engine's allocator of device pages, through which the cache asks for and returns pages, in place of the
     * pool's own. Its capacity must be {@code devicePages}. Optional; it stays the engine's.
     */
    public HiCacheBuilder pageAllocator(DevicePageAllocator value) {
        Checks.requireState(pageAllocator == null, "pageAllocator was already set to %s", pageAllocator);
        pageAllocator = Checks.checkNotNull(value, "pageAllocator");
        return this;
    }

    /**
     * The tensor-parallel ranks of the model this cache is one rank of (its rank and size must be the namespace's):
     * the cache then takes every decision that changes its tree together with the other ranks' caches, at the same
     * engine calls, so that all ranks' trees, hits and loads stay the same (docs/embedding.md, "Tensor-parallel ranks").
     * Every rank must drive its cache with the same calls in the same order. Optional: without one the cache decides
     * alone. It stays the caller's: the caller closes it after the cache.
     */
    public HiCacheBuilder rankGroup(RankGroup value) {
        Checks.requireState(rankGroup == null, "rankGroup was already set to %s", rankGroup);
        rankGroup = Checks.checkNotNull(value, "rankGroup");
        return this;
    }

    /**
     * A second group of the same ranks, for the prefetch query thread (SGLang's gloo group): with it the page store's
     * hit count for each prefetch is reduced to the ranks' minimum before anything is fetched, so that no rank fetches
     * pages another rank's store lacks (without it each rank fetches what its store has, and the minimum of what
     * landed is kept when the prefetch ends: the trees agree either way). Optional; needs {@link #rankGroup}. It stays
     * the caller's.
     */
    public HiCacheBuilder prefetchRankGroup(RankGroup value) {
        Checks.requireState(prefetchRankGroup == null, "prefetchRankGroup was already set to %s", prefetchRankGroup);
        prefetchRankGroup = Checks.checkNotNull(value, "prefetchRankGroup");
        return this;
    }

    /**
     * The page store (L3) to use instead of the one {@code hicache-storage-backend} names. Optional. The cache takes
     * ownership and closes it, also when {@link #open()} fails.
     */
    public HiCacheBuilder store(PageStore value) {
        Checks.requireState(store == null, "store was already set to %s", store);
        store = Checks.checkNotNull(value, "store");
        return this;
    }

    /**
     * Where KV events go, instead of the publisher {@code kv-events-config} names: an in-process consumer such as a
     * {@link io.hicache.core.events.KvEventCollector}, or a publisher the embedder opened. Optional. The cache takes
     * ownership and closes it, also when {@link #open()} fails; its queue holds {@code kv-events-config}'s
     * {@code max_queue_size} events.
     */
    public HiCacheBuilder kvEventPublisher(KvEventPublisher value) {
        Checks.requireState(kvEventPublisher == null, "kvEventPublisher was already set to %s", kvEventPublisher);
        kvEventPublisher = Checks.checkNotNull(value, "kvEventPublisher");
        return this;
    }

    /**
     * The Prometheus registry the cache registers its metrics in (the engine exports it: an HTTP exporter, a push
     * gateway). Optional: the default registry, {@link PrometheusRegistry#defaultRegistry}. Caches sharing a registry
     * are told apart by the {@code namespace} label; a cache leaves the registry when it closes.
     */
    public HiCacheBuilder metrics(PrometheusRegistry value) {
        metrics = Checks.checkNotNull(value, "metrics");
        return this;
    }

    /**
     * The clock that retention is measured on ({@link Retention}: a class holds until a deadline on it): a test's or a
     * trace replay's own time, for instance. Optional: the system clock. Only its progress since the cache opened
     * counts; a clock that goes back is taken as standing still. It is read under the cache's lock, so it must not
     * block. Ranks that agree read their own clocks and agree on the least progress (docs/embedding.md).
     */
    public HiCacheBuilder clock(InstantSource value) {
        Checks.requireState(clock == null, "clock was already set to %s", clock);
        clock = Checks.checkNotNull(value, "clock");
        return this;
    }

    /**
     * Opens the cache: a device pool, a host pool sized by {@code hicache-ratio} or {@code hicache-size}, and the page
     * store set here or named by {@code hicache-storage-backend}, if any.
     *
     * @throws IllegalStateException when a required part is missing (a store or publisher set here is closed), or
     *     when this builder opened a cache already
     * @throws io.hicache.core.HiCacheException when a part cannot be opened; whatever was opened is closed again
     */
    public HiCache open() {
        Checks.requireState(!opened, "this builder has opened its cache already");
        opened = true;
        try {
            Checks.requireState(config != null, "config is not set");
            Checks.requireState(namespace != null, "namespace is not set");
            Checks.requireState(geometry != null, "geometry is not set");
            Checks.requireState(devicePages > 0, "devicePages is not set");
            Checks.requireState(runtime != null, "runtime is not set");
            return new HiCache(CacheCore.open(
                    config,
                    namespace,
                    geometry,
                    hybrid != null && hybrid.hybrid() ? hybrid : null,
                    new CacheCore.DeviceSetup(devicePages, deviceAddress, deviceBytes, pageAllocator),
                    runtime,
                    store,
                    metrics,
                    kvEventPublisher,
                    rankGroup,
                    prefetchRankGroup,
                    clock != null ? clock : InstantSource.system()));
        } catch (RuntimeException e) {
            if (store != null) {
                store.close();
            }
            if (kvEventPublisher != null) {
                kvEventPublisher.close();
            }
            throw e;
        }
    }
}
