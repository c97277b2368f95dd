package io.hicache.core.cache;

import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.PageStore;
import io.hicache.testkit.PagePattern;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A pretend inference engine over a real {@link HiCache} on the emulated device: it "computes" each page's KV as a
 * pattern derived from the page's key, so any page it gets back from the cache can be checked byte for byte.
 * Not thread-safe.
 */
final class TestEngine implements AutoCloseable {
    static final KvGeometry GEOMETRY = KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16);
    static final Namespace NS = Namespace.of("test-engine", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    final HiCache cache;
    final EmulatedDeviceRuntime runtime;
    final Path hostDir;
    final int page;
    /** The cache's namespace: the pages' pattern and keys follow it (MLA ranks share one). */
    final Namespace ns;

    private final PageHasher hasher;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment flat;

    /** An engine whose cache has {@code devicePages} device pages, configured by {@code settings} (host.dir is set here). */
    TestEngine(Map<String, String> settings, int devicePages, PageStore store) {
        this(settings, devicePages, store, null);
    }

    /** As above, publishing KV events to {@code events} (null: as {@code kv-events-config} says). */
    TestEngine(Map<String, String> settings, int devicePages, PageStore store, KvEventPublisher events) {
        this(settings, devicePages, store, events, GEOMETRY, NS);
    }

    /** An engine for a model of {@code geometry} whose rank {@code namespace} names. */
    TestEngine(
            Map<String, String> settings,
            int devicePages,
            PageStore store,
            KvEventPublisher events,
            KvGeometry geometry,
            Namespace namespace) {
        this(settings, devicePages, store, events, geometry, namespace, null, null);
    }

    /**
     * As above, the cache being the rank of {@code ranks} that {@code namespace} names (null: no group), with
     * {@code prefetchRanks} for its prefetch query thread (null: none).
     */
    TestEngine(
            Map<String, String> settings,
            int devicePages,
            PageStore store,
            KvEventPublisher events,
            KvGeometry geometry,
            Namespace namespace,
            RankGroup ranks,
            RankGroup prefetchRanks) {
        this(settings, devicePages, store, events, geometry, namespace, ranks, prefetchRanks, null);
    }

    /** An engine for the hybrid model {@code hybrid} (its full-attention layers are the geometry). */
    static TestEngine hybrid(Map<String, String> settings, int devicePages, PageStore store, HybridGeometry hybrid) {
        return new TestEngine(settings, devicePages, store, null, hybrid.full(), NS, null, null, hybrid);
    }

    private TestEngine(
            Map<String, String> settings,
            int devicePages,
            PageStore store,
            KvEventPublisher events,
            KvGeometry geometry,
            Namespace namespace,
            RankGroup ranks,
            RankGroup prefetchRanks,
            HybridGeometry hybrid) {
        Path shm = Path.of("/dev/shm");
        try {
            hostDir = Files.createTempDirectory(
                    Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")), "hicache-engine");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Settings.Builder b = Settings.builder().flag("host.dir", hostDir.toString());
        settings.forEach(b::flag);
        HiCacheConfig config = HiCacheConfig.from(b.build());
        this.runtime = new EmulatedDeviceRuntime(64L << 20, 2);
        try {
            this.cache = open(
                    config, devicePages, runtime, store, events, geometry, namespace, ranks, prefetchRanks, hybrid);
        } catch (RuntimeException e) {
            runtime.close();
            deleteHostDir();
            throw e;
        }
        this.ns = cache.namespace();
        this.page = config.pageSizeTokens();
        this.hasher = new PageHasher(page);
        this.flat = arena.allocate(cache.format().pageBytes(), 64);
    }

    private static HiCache open(
            HiCacheConfig config,
            int devicePages,
            EmulatedDeviceRuntime runtime,
            PageStore store,
            KvEventPublisher events,
            KvGeometry geometry,
            Namespace namespace,
            RankGroup ranks,
            RankGroup prefetchRanks,
            HybridGeometry hybrid) {
        HiCacheBuilder b = HiCache.builder()
                .config(config)
                .namespace(namespace)
                .geometry(geometry)
                .devicePages(devicePages)
                .runtime(runtime);
        if (ranks != null) {
            b.rankGroup(ranks);
        }
        if (hybrid != null) {
            b.hybrid(hybrid);
        }
        if (prefetchRanks != null) {
            b.prefetchRankGroup(prefetchRanks);
        }
        if (events != null) {
            b.kvEventPublisher(events);
        }
        return (store == null ? b : b.store(store)).open();
    }

    /** What serving one prompt found. */
    record Served(int deviceTokens, int hostTokens, int loadedTokens, int computedPages, RequestOutcome outcome) {}

    /**
     * Serves {@code prompt} the way an engine would: request, wait for the prefetch, load back, check the cached
     * prefix's bytes, compute the rest, commit, close.
     */
    Served serve(String id, int[] prompt) throws InterruptedException {
        return serve(id, "", prompt);
    }

    /** As {@link #serve(String, int[])} for a request with {@code extraKey} (a LoRA adapter, say). */
    Served serve(String id, String extraKey, int[] prompt) throws InterruptedException {
        try (CacheRequest r = cache.request(id, extraKey, prompt)) {
            int device = r.deviceTokens();
            int host = r.hostTokens();
            long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (!r.tryEndPrefetch()) {
                if (System.nanoTime() > until) {
                    throw new AssertionError("the prefetch never ended");
                }
                Thread.sleep(1);
            }
            CacheRequest.LoadBack lb = r.loadBack(Integer.MAX_VALUE);
            if (!lb.await(Duration.ofSeconds(10))) {
                throw new AssertionError("a load-back did not finish");
            }
            int[] prefix = r.prefixPages();
            verify(extraKey, prompt, prefix);
            int whole = prompt.length / page;
            int[] fresh = r.allocate(whole - prefix.length);
            PageHashes hashes = hashes(extraKey, prompt);
            for (int i = 0; i < fresh.length; i++) {
                PagePattern.fill(flat, ns.key(hashes.get(prefix.length + i)));
                cache.device().writePage(fresh[i], flat);
            }
            int[] all = Arrays.copyOf(prefix, whole);
            System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
            r.commit(Arrays.copyOf(prompt, whole * page), all, true);
            return new Served(device, host, lb.deviceTokens() - device, fresh.length, r.outcome());
        }
    }

    /** The page hashes of {@code prompt} under {@code extraKey}: chained from the key's root hash when there is one. */
    PageHashes hashes(String extraKey, int[] prompt) {
        return extraKey.isEmpty()
                ? hasher.hashPages(prompt)
                : hasher.hashPages(prompt, 0, prompt.length / page * page, PageHasher.extraKeyRoot(extraKey));
    }

    /** Checks that {@code pages} hold the KV of {@code prompt}'s first pages. */
    void verify(int[] prompt, int[] pages) {
        verify("", prompt, pages);
    }

    /** As {@link #verify(int[], int[])} for a request with {@code extraKey}. */
    void verify(String extraKey, int[] prompt, int[] pages) {
        PageHashes hashes = hashes(extraKey, prompt);
        for (int i = 0; i < pages.length; i++) {
            cache.device().readPage(pages[i], flat);
            if (!PagePattern.matches(flat, ns.key(hashes.get(i)))) {
                throw new AssertionError("page " + i + " (device page " + pages[i] + ") of the prefix has wrong bytes");
            }
        }
    }

    /** The store keys of {@code prompt}'s whole pages. */
    List<StoreKey> keys(int[] prompt) {
        return keys("", prompt);
    }

    /** The store keys of {@code prompt}'s whole pages under {@code extraKey}. */
    List<StoreKey> keys(String extraKey, int[] prompt) {
        PageHashes hashes = hashes(extraKey, prompt);
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 0; i < hashes.size(); i++) {
            keys.add(ns.key(hashes.get(i)));
        }
        return keys;
    }

    /** Waits until the copies between device and host are applied (not the uploads to the page store). */
    void quiesceCopies() throws InterruptedException {
        long end = System.nanoTime() + 30_000_000_000L;
        while ((cache.core().outstanding.get() > 0 || cache.core().completions.depth() > 0)
                && System.nanoTime() < end) {
            Thread.sleep(1);
        }
    }

    /** Waits until background work is done. */
    void quiesce() throws InterruptedException {
        cache.core().quiesce(Duration.ofSeconds(30));
    }

    /** {@code pages} pages of tokens: base, base+1, ... */
    static int[] prompt(int base, int tokens) {
        int[] t = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            t[i] = base + i;
        }
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    @Override
    public void close() {
        cache.close();
        runtime.close();
        arena.close();
        deleteHostDir();
    }

    private void deleteHostDir() {
        try (Stream<Path> all = Files.walk(hostDir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
