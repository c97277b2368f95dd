package io.hicache.core.cache;

import io.hicache.core.events.KvEventSink;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The three-tier prefix cache an engine embeds: HiRadixCache over a device KV pool (L1), the host page pool (L2)
 * and, optionally, a page store (L3). An engine opens one per model rank ({@link #builder()}), then for each request
 * follows the short sequence of {@link CacheRequest} (docs/embedding.md): request, prefetch check, load back, allocate,
 * commit, close. The device pool is reached through {@link #device()}, the operator's calls through {@link #admin()}.
 *
 * <p>Background work runs on named loops with bounded queues ({@code hicache-completions}, {@code -host-commit},
 * {@code -upload}, {@code -prefetch-query}, {@code -prefetch-io}, {@code -host-evictor}, {@code -device-evictor}); a
 * failed copy or store call becomes a miss or a skipped backup, counted in {@link #stats()}, never a dead thread or a
 * damaged tree.
 *
 * <p>With {@code kv-events-config} set (or a publisher given to the builder) the cache publishes SGLang's KV events
 * on {@code hicache-kv-events}: a BlockStored per run of pages reaching the device (insert, load-back), the host
 * (backup, prefetch) or the page store (upload), a BlockRemoved per run evicted from the device or the host. A slow
 * subscriber never blocks the cache: events beyond the queue's bound drop, oldest first, counted in
 * {@link #kvEventStats()} (docs/kv-events.md).
 *
 * <p>Thread-safe. Owns the device pool, the host pool, the page store and the KV event publisher; {@link #close()}
 * stops the loops and closes them. The device runtime belongs to the caller.
 */
public final class HiCache implements AutoCloseable {
    private final CacheCore core;
    private final CacheAdmin admin;
    private final DeviceView device;

    HiCache(CacheCore core) {
        this.core = core;
        this.admin = new CacheAdmin(core);
        this.device = new Device(core);
    }

    /** Starts the description of a cache to open: see {@link HiCacheBuilder}. */
    public static HiCacheBuilder builder() {
        return new HiCacheBuilder();
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
        return request(id, extraKey, promptTokens, Retention.NONE);
    }

    /**
     * As {@link #request(String, String, int[])}, for a request whose prefix is worth keeping: the pages it hits and
     * caches take {@code retention}'s priority class (the higher of theirs, while it holds, and its own), held for its
     * duration after each hit; eviction on the device and the host takes the lowest effective priority first, then
     * LRU or LFU, always leaf-first (see {@link Retention}; docs/embedding.md, "Retention, demote and prefix hits").
     * For ranks that agree, every rank must give the same retention.
     *
     * @throws IllegalArgumentException when a request with this id is open
     */
    public CacheRequest request(String id, String extraKey, int[] promptTokens, Retention retention) {
        Checks.checkNotNull(retention, "retention");
        Checks.checkNotNull(id, "id");
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.checkNotNull(promptTokens, "promptTokens");
        Checks.requireArgument(
                extraKey.length() <= Namespace.MAX_TEXT_LENGTH,
                "extraKey is %d characters, over %d",
                extraKey.length(),
                Namespace.MAX_TEXT_LENGTH);
        return core.request(id, extraKey, promptTokens, retention);
    }

    /**
     * Lowers the pages of a superseded prompt (an agent session whose context was rewritten, a conversation that
     * ended): the cached pages of {@code tokens}' whole pages from page {@code keepTokens / pageSize} on (rounded
     * down: a page only partly within the kept tokens is not kept), and every page cached below the end of
     * {@code tokens} (runs that continue them), lose their priority class and become the first to go among pages of
     * effective priority 0, before any that is less recently used. Pages of {@code tokens} before that are left as
     * they are, and so are other runs that branch off from them: the prefix another prompt shares stays. Where
     * {@code tokens} part from what is cached inside a run, only the matched part is lowered. Nothing is evicted
     * now, and recency is not touched; a later request that hits such a page restores it to the normal order (and
     * gives it its own class). Eviction stays leaf-first: a lowered page below which another run still hangs goes
     * only after that run. For ranks that agree, call it on every rank at the same point between engine calls.
     *
     * @param extraKey   the extra key the pages were cached under ("" for none)
     * @param tokens     the prompt (or conversation) to lower
     * @param keepTokens how many leading tokens to leave as they are: 0 lowers the whole prompt; the length two
     *                   prompts share keeps their common prefix
     * @return the pages lowered, on whichever tiers they are
     * @throws IllegalArgumentException when {@code keepTokens} is negative or beyond {@code tokens}
     */
    public int demote(String extraKey, int[] tokens, int keepTokens) {
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.checkNotNull(tokens, "tokens");
        Checks.requireArgument(
                keepTokens >= 0 && keepTokens <= tokens.length,
                "keepTokens must be within 0-%s (the tokens given), was %s",
                tokens.length,
                keepTokens);
        return core.demote(extraKey, tokens, keepTokens);
    }

    /** As {@link #demote(String, int[], int)} with nothing kept: every cached page of {@code tokens} and below. */
    public int demote(String extraKey, int[] tokens) {
        return demote(extraKey, tokens, 0);
    }

    /**
     * How much of {@code tokens} each tier holds, as a cache-aware router asks an engine: the longest leading run of
     * whole pages on the device, in the host pool and in the page store, each counted from the first page. Changes
     * nothing: no recency, no retention, no pin; the page store is asked for the leading hits of the pages' keys
     * ({@code hicache-storage-batch-pages} at a time, each call by {@code storeTimeout}), without the cache's lock.
     * The device and host parts are read at the call; the future completes when the store has answered, or at
     * {@code storeTimeout} and a grace of a second after it with what it had counted
     * ({@link PrefixHits.StoreAnswer#NO_ANSWER}); it never completes exceptionally. It completes on the store's
     * thread (or this one): keep what depends on it short. For a hybrid model the counts are of the full-attention
     * KV pages alone. Pages an earlier run left in the host pool that no request has taken up yet are not counted.
     *
     * @throws io.hicache.core.HiCacheException when the cache is closed
     */
    public CompletableFuture<PrefixHits> prefixHits(String extraKey, int[] tokens, Duration storeTimeout) {
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.checkNotNull(tokens, "tokens");
        Checks.checkNotNull(storeTimeout, "storeTimeout");
        return PrefixQuery.withStore(core, extraKey, tokens, storeTimeout);
    }

    /**
     * As {@link #prefixHits}, without asking the page store: the device and host parts, at once
     * ({@link PrefixHits.StoreAnswer#NOT_ASKED}).
     */
    public PrefixHits prefixHitsInMemory(String extraKey, int[] tokens) {
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.checkNotNull(tokens, "tokens");
        return PrefixQuery.inMemory(core, extraKey, tokens);
    }

    /** The open request {@code id}, if any. */
    public Optional<CacheRequest> find(String id) {
        return core.find(id);
    }

    /** The device pool: its pages, its buffers for an engine's kernels, the pool for transfers. */
    public DeviceView device() {
        return device;
    }

    /** The operator's calls: flush, reset, detaching and attaching the page store. */
    public CacheAdmin admin() {
        return admin;
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
    public record Room(
            int devicePages, int deviceFreePages, long deviceEvictablePages, int hostPages, int hostFreePages) {}

    /** The capacity and the free room of the device and host tiers, now. */
    public Room room() {
        return core.room();
    }

    /** The cache's counters (totals since it opened) and gauges (now). */
    public CacheStats stats() {
        return core.stats();
    }

    /**
     * What the KV event publishing has done: events queued, dropped (the subscriber side fell behind), batches
     * published and failed. All zero when events are off.
     */
    public KvEventSink.Stats kvEventStats() {
        return core.events.sink().stats();
    }

    /** The geometry, page size and host layout of the cache's pages. */
    public PageFormat format() {
        return core.format;
    }

    /**
     * The namespace the cache's page keys carry: the builder's, with the page size filled in from the cache's page
     * format where the builder's left it unstated.
     */
    public Namespace namespace() {
        return core.namespace;
    }

    /** The settings the cache was opened with. */
    public HiCacheConfig config() {
        return core.config;
    }

    /**
     * Waits up to {@code timeout} until background work (copies, uploads, prefetches) has nothing queued or running:
     * for an engine that drains before a checkpoint or a benchmark phase. True if it got there. For ranks that agree it
     * is a collective: every rank calls it at the same point, and every rank returns the same.
     */
    public boolean awaitIdle(Duration timeout) throws InterruptedException {
        return core.awaitIdle(timeout);
    }

    /**
     * True when no open request pins a device page and no copy is in flight: every cached device page could be
     * evicted. An engine can check it after closing its requests, to find one it forgot.
     */
    public boolean nothingPinned() {
        return core.nothingPinned();
    }

    /** The engine, for tests in this package. */
    CacheCore core() {
        return core;
    }

    /**
     * Stops the loops, letting queued work (prefetches, uploads, copies) finish for up to {@code hicache-close-timeout}
     * in all, closes open requests, then the page store, the KV event publisher (after publishing what is queued), the
     * host pool and the device pool. Uploads still queued when the time is up are not written (the pages were cached,
     * not acknowledged anywhere); the log says how many. Every thread the cache started has ended when it returns.
     */
    @Override
    public void close() {
        core.close();
    }

    /** The device view over the engine's pool. */
    private record Device(CacheCore core) implements DeviceView {
        @Override
        public int pages() {
            return core.device.pages();
        }

        @Override
        public long pageBytes() {
            return core.format.pageBytes();
        }

        @Override
        public void writePage(int page, MemorySegment flat) {
            core.device.writePage(page, flat);
        }

        @Override
        public void readPage(int page, MemorySegment flat) {
            core.device.readPage(page, flat);
        }

        @Override
        public DeviceBuffers buffers() {
            return core.device.buffers();
        }

        @Override
        public Optional<MemorySegment> hostVisibleMemory() {
            return core.device.hostVisibleMemory();
        }

        @Override
        public KvPool pool() {
            return core.device;
        }
    }
}
