package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHashes;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.WaitMode;
import io.hicache.core.tree.MatchResult;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One engine request's view of the cache, from its prompt to its end. The sequence (docs/embedding.md):
 *
 * <ol>
 *   <li>{@link HiCache#request}: matches the prompt, pins the cached device prefix, may start a prefetch;
 *   <li>{@link #tryEndPrefetch()}: before scheduling, until true (per the prefetch policy);
 *   <li>{@link #loadBack(int)}: brings the host-only part of the prefix to the device, layer by layer;
 *   <li>{@link #prefixPages()}: the device pages of the cached prefix; {@link #allocate(int)} pages for the rest;
 *   <li>{@link #commit(int[], int[], boolean)}: caches what was computed (on finish, or per chunk);
 *   <li>{@link #close()}: releases the pins and the pages not committed; {@link #abort()} is the same.
 * </ol>
 *
 * <p>Thread-safe (every method takes the cache's lock), though an engine drives one request from one thread. Owns
 * the device pages it allocated until they are committed or it closes.
 */
public final class CacheRequest implements AutoCloseable {
    private static final RateLimitedLog CORRUPT_LOG = new RateLimitedLog(
            System.getLogger(CacheRequest.class.getName()), System.Logger.Level.WARNING, Duration.ofSeconds(10));
    private final CacheCore cache;
    private final String id;
    /** The extra key (LoRA adapter, cache salt) its tokens are matched and cached under; "" for none. */
    private final String extraKey;
    /** The class the nodes it hits and caches take, and how long it holds after each hit. */
    private final Retention retention;

    private int[] tokens;
    /** The longest tokens the request has stated (its prompt, or a longer commit): every commit must agree with them. */
    private int[] stated;

    private MatchResult match;
    /** The node whose path this request pins on the device; the root when none. */
    private TreeNode locked;

    /**
     * For a hybrid model: the end of the device prefix whose parts are pinned in the host ({@link HostParts}), null
     * when no end of it can be restored; what {@link #prefixPages()} and {@link #restoreParts} give.
     */
    private HostParts.@Nullable Hold partsPin;
    /** For a hybrid model: the greatest end the device and host prefix can be restored to (a load-back's worth). */
    private int reachablePages;

    private final Set<Integer> owned = new LinkedHashSet<>();
    private final List<KvCopy> loads = new ArrayList<>();
    Prefetcher.@Nullable Op prefetch;
    private boolean closed;
    // What the request's outcome() reports (guarded by the cache's lock).
    private final long startNanos = System.nanoTime();
    private final int deviceHitPages;
    private int fetchedPages;
    private int loadedPages;
    private int computedPages;
    /** The prefetch's story so far: see {@link RequestOutcome#prefetch()}. */
    PrefetchOutcome prefetchState = PrefetchOutcome.NONE;

    private long prefetchWaitNanos = -1;

    CacheRequest(CacheCore cache, String id, String extraKey, int[] tokens, Retention retention) {
        this.cache = cache;
        this.id = id;
        this.extraKey = extraKey;
        this.retention = retention;
        this.tokens = tokens;
        this.stated = tokens;
        MatchResult m = matchTokens();
        if (cache.leftovers.adopt(tokens, m) > 0) {
            m = matchTokens(); // the warm host pages an earlier run left are host hits now
        }
        this.match = m;
        this.locked = match.lastDeviceNode();
        cache.tree.lock(locked);
        clampToParts();
        this.deviceHitPages = usableDevicePages();
        int page = cache.config.pageSizeTokens();
        cache.metrics.promptTokens.add(tokens.length);
        cache.metrics.deviceHitTokens.add((long) deviceHitPages * page);
        cache.metrics.hostHitTokens.add((long) usableHostPages() * page);
        this.prefetch = cache.prefetcher.maybeStart(this, match);
        if (prefetch != null) {
            prefetchState = new PrefetchOutcome(PrefetchOutcome.State.RUNNING, Optional.empty(), 0, prefetch.pages);
        }
    }

    /**
     * The prefetch fetched {@code kept} of {@code asked} pages into the tree, was revoked, or was ended by the timeout
     * policy before its fetch finished: called by it.
     */
    void prefetchEnded(int kept, int asked, boolean revoked, boolean timedOut) {
        fetchedPages = kept;
        PrefetchOutcome.State state = revoked
                ? PrefetchOutcome.State.REVOKED
                : timedOut ? PrefetchOutcome.State.TIMED_OUT : PrefetchOutcome.State.ENDED;
        prefetchState = new PrefetchOutcome(state, Optional.empty(), kept, asked);
    }

    /**
     * Where this request's prompt came from so far: device, host, page store, computed; what its prefetch did; how
     * long it waited for the prefetch. Final once the request has committed.
     */
    public RequestOutcome outcome() {
        cache.lock.lock();
        try {
            int page = cache.config.pageSizeTokens();
            int fromStore = Math.min(fetchedPages, loadedPages);
            return new RequestOutcome(
                    deviceHitPages * page,
                    (loadedPages - fromStore) * page,
                    fromStore * page,
                    computedPages * page,
                    prefetchState,
                    Duration.ofNanos(prefetchWaitNanos < 0 ? 0 : prefetchWaitNanos));
        } finally {
            cache.lock.unlock();
        }
    }

    public String id() {
        return id;
    }

    /** The extra key (LoRA adapter, cache salt) the request was made with; "" for none. */
    public String extraKey() {
        return extraKey;
    }

    /** The retention the request was made with ({@link Retention#NONE} when none was given). */
    public Retention retention() {
        return retention;
    }

    int[] tokens() {
        return tokens;
    }

    /** Prompt tokens on the device now (whole pages). */
    public int deviceTokens() {
        cache.lock.lock();
        try {
            return usableDevicePages() * cache.config.pageSizeTokens();
        } finally {
            cache.lock.unlock();
        }
    }

    /** Prompt tokens only the host holds (whole pages): what {@link #loadBack} would bring. */
    public int hostTokens() {
        cache.lock.lock();
        try {
            return usableHostPages() * cache.config.pageSizeTokens();
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Ends the request's prefetch if its policy allows it now, and says whether the request may go ahead: true when it
     * started no prefetch, or when its prefetch has ended ({@code best_effort}: at once; {@code wait_complete}: when
     * every page the store had has arrived; {@code timeout}: that, or when the time allowed has passed). When it ends,
     * the fetched pages join the tree as host-only pages and the match is refreshed to include them. For ranks that
     * agree it is a collective (SGLang's {@code check_prefetch_progress}): every rank calls it at the same point.
     */
    public boolean tryEndPrefetch() {
        cache.lock.lock();
        try {
            checkOpen();
            if (prefetch != null) {
                if (!cache.prefetcher.tryFinish(prefetch, this, false)) {
                    return false;
                }
                prefetch = null;
                rematch();
            }
            if (prefetchWaitNanos < 0) {
                prefetchWaitNanos = System.nanoTime() - startNanos;
            }
            return true;
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * The nodes of {@code path} before the first whose host pages fail their identity check (always) or their CRC-32C
     * ({@code hicache-verify-host-checksums}): bytes that would be loaded as another page's KV. That node and what
     * hangs below it leave the tree, counted and reported as removed; the request computes those tokens instead.
     */
    private List<TreeNode> intactPrefix(List<TreeNode> path) {
        boolean checksums = cache.config.verifyHostChecksums();
        for (int k = 0; k < path.size(); k++) {
            TreeNode n = path.get(k);
            int[] slots = Checks.checkNotNull(n.hostSlots(), "the host slots of a node on the evicted path");
            PageHashes hashes = n.hashes();
            for (int i = 0; i < n.pages(); i++) {
                if (!cache.host().holdsIntact(slots[i], cache.namespace.key(hashes.get(i)), checksums)) {
                    cache.metrics.corruptHostPages.increment();
                    RadixTree.HostEviction dropped = cache.tree.dropHostWithSubtree(n);
                    if (dropped != null) {
                        cache.host().release(dropped.freedSlots());
                        for (PageHashes run : dropped.removed()) {
                            cache.events.removed(run, Medium.CPU);
                        }
                    }
                    CORRUPT_LOG.log("host page " + i + " of " + n + " fails its " + (checksums ? "checksum or " : "")
                            + "identity check: not loaded back; "
                            + (dropped != null
                                    ? dropped.freedSlots().length + " host pages dropped"
                                    : "left in place (in use)"));
                    return path.subList(0, k);
                }
            }
        }
        return path;
    }

    /**
     * Loads the host-only part of the cached prefix to the device, all or nothing: nothing when it is shorter than
     * {@code load-back-threshold} tokens or longer than {@code budgetTokens}. The returned copy signals each layer as
     * it lands; it also waits for loads of the same pages that other requests started. Pages come from the device
     * pool, evicting if needed.
     */
    public LoadBack loadBack(int budgetTokens) {
        cache.lock.lock();
        try {
            checkOpen();
            rematch();
            List<TreeNode> path = intactPrefix(cache.tree.evictedPath(match.lastDeviceNode(), match.lastNode()));
            int pages = 0;
            for (TreeNode n : path) {
                pages += n.pages();
            }
            int page = cache.config.pageSizeTokens();
            int tokensToLoad = pages * page;
            // a hybrid model's host pages are worth loading only up to an end every part restores
            boolean useful = cache.parts == null || reachablePages > usableDevicePages();
            if (useful
                    && pages > 0
                    && tokensToLoad >= cache.config.loadBackThresholdTokens()
                    && tokensToLoad <= budgetTokens) {
                // Taking device pages may evict host pages (a backup needing room, the high-water mark at a settle):
                // not these. Protecting the path's last node keeps the whole path, as host eviction takes leaves.
                TreeNode end = path.getLast();
                cache.tree.protectHost(end);
                int[] devicePages;
                try {
                    devicePages = cache.deviceTier.allocate(pages, heldPages());
                } finally {
                    cache.tree.releaseHost(end);
                }
                TreeNode.PendingCopy pending = cache.tree.beginLoad(path, devicePages);
                int[] slots = new int[pages];
                int at = 0;
                for (TreeNode n : path) {
                    System.arraycopy(n.hostSlots(), 0, slots, at, n.pages());
                    at += n.pages();
                }
                cache.outstanding.incrementAndGet();
                KvCopy copy = cache.device.load(cache.host().slab(), slots, devicePages);
                pending.attach(copy);
                cache.metrics.loadsStarted.increment();
                TreeNode last = path.getLast();
                int loaded = pages;
                loadedPages += pages;
                RankAgreement.Entry settling = cache.agreement.enabled()
                        ? cache.agreement.add(RankAgreement.Lane.COPIES, 0, ok -> finishLoad(pending, last, ok, loaded))
                        : null;
                long start = System.nanoTime();
                copy.done().whenComplete((v, error) -> {
                    if (error == null) {
                        cache.export.loadSeconds.observe((System.nanoTime() - start) / 1e9);
                    }
                    if (settling != null) {
                        settling.done(error == null); // applied when every rank's is done: see RankAgreement
                    } else {
                        cache.complete(() -> finishLoad(pending, last, error == null, loaded));
                    }
                });
                relock(last);
                rematch();
            }
            return new LoadBack(pendingLoads(), usableDevicePages() * page);
        } finally {
            cache.lock.unlock();
        }
    }

    private void finishLoad(TreeNode.PendingCopy pending, TreeNode last, boolean ok, int pages) {
        try {
            applyLoad(pending, last, ok, pages);
        } finally {
            cache.outstanding.decrementAndGet();
        }
    }

    private void applyLoad(TreeNode.PendingCopy pending, TreeNode last, boolean ok, int pages) {
        int[] freed = cache.tree.finishLoad(pending, last, ok);
        cache.deviceTier.free(freed);
        if (ok) {
            cache.metrics.loadsCompleted.increment();
            cache.metrics.bytesHostToDevice.add((long) pages * cache.format.pageBytes());
            for (TreeNode n : pending.nodes()) {
                cache.events.stored(n, Medium.GPU);
            }
        } else {
            cache.metrics.fail("load: copy failed");
        }
    }

    /** Loads in flight over the pinned device prefix (this request's or another's): the engine waits for them. */
    private List<KvCopy> pendingLoads() {
        loads.clear();
        for (TreeNode n = locked; n != null && !n.isRoot(); n = n.parent()) {
            TreeNode.PendingCopy p = n.pending();
            if (p != null && !p.toHost() && p.attachment() instanceof KvCopy c && !loads.contains(c)) {
                loads.add(c);
            }
        }
        return List.copyOf(loads);
    }

    /** The device pages of the cached prefix, pinned by this request: the KV the engine reuses. */
    public int[] prefixPages() {
        cache.lock.lock();
        try {
            checkOpen();
            int[] pages = locked.isRoot() ? new int[0] : cache.tree.devicePagesTo(locked);
            return pages.length == usableDevicePages() ? pages : Arrays.copyOf(pages, usableDevicePages());
        } finally {
            cache.lock.unlock();
        }
    }

    /** {@code count} device pages for KV the engine computes; the request owns them until it commits or closes. */
    public int[] allocate(int count) {
        Checks.checkNotNegative(count, "count");
        cache.lock.lock();
        try {
            checkOpen();
            int[] pages = cache.deviceTier.allocate(count, heldPages());
            for (int p : pages) {
                owned.add(p);
            }
            computedPages += count;
            return pages;
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Caches {@code tokens}' whole pages, whose KV is in {@code pages} (one per whole page: the prefix pages, then
     * pages this request allocated). Pages of this request the tree does not need (another request cached the same
     * tokens first) are freed; a trailing partial page stays the request's until it closes. A finished request
     * counts hits for the write policy and starts backups; a chunk of an unfinished one does not.
     *
     * <p>What it requires, checked before anything changes (a refused commit changes nothing):
     * <ul>
     *   <li>{@code tokens} agree with the request's prompt, and with what it committed before, wherever both have a
     *       token: a chunk commits a prefix of the prompt, a finished request the prompt and what it generated;
     *   <li>{@code pages} has one page per whole page of {@code tokens}, each listed once;
     *   <li>each page is one this request allocated and has not committed yet, or the cached prefix's page at that
     *       very position ({@link #prefixPages()}).
     * </ul>
     *
     * @throws IllegalArgumentException when any of these does not hold; the message says which
     */
    public void commit(int[] tokens, int[] pages, boolean finished) {
        commit(tokens, pages, finished, null);
    }

    /**
     * As {@link #commit(int[], int[], boolean)} for a hybrid model ({@link HiCacheBuilder#hybrid}), with the parts
     * at the end of {@code tokens}' whole pages: the window KV of their last pages and the recurrent state after the
     * last one. The cache keeps them in host memory and writes them to the page store, so that a later prompt sharing
     * this prefix can be restored to its end. An engine gives parts where it has a state at a page boundary (the end
     * of a finished request, of a chunk); commits without parts cache the KV only. When the host memory for parts is
     * full of ends that requests are using, the parts are not kept (counted in {@link HiCache#stats()}).
     *
     * @throws IllegalArgumentException as the three-argument commit, and when the parts do not have the model's
     *     shape for this end, when a model with recurrent layers commits tokens that do not end at a page boundary
     *     (a state belongs to the end of a whole page), or when the cache has no hybrid model
     */
    public void commit(int[] tokens, int[] pages, boolean finished, @Nullable PrefixParts parts) {
        Checks.checkNotNull(tokens, "tokens");
        Checks.checkNotNull(pages, "pages");
        cache.lock.lock();
        try {
            checkOpen();
            int page = cache.config.pageSizeTokens();
            HostParts hostParts = cache.parts;
            if (parts != null) {
                Checks.requireArgument(
                        hostParts != null, "parts were given, but the cache was opened without a hybrid model");
                Checks.requireArgument(tokens.length >= page, "parts belong to the end of at least one whole page");
                hostParts.checkShape(parts, tokens.length / page);
                Checks.requireArgument(
                        parts.state().isEmpty() || tokens.length % page == 0,
                        "%s tokens do not end at a page boundary (page %s): the state after them is not the state "
                                + "after their last whole page",
                        tokens.length,
                        page);
            }
            Checks.requireArgument(
                    pages.length == tokens.length / page,
                    "%d pages for %d whole pages of tokens",
                    pages.length,
                    tokens.length / page);
            // Pages are cached under the tokens given: under any others they would be served to another prompt.
            int common = Math.min(tokens.length, stated.length);
            int differ = Arrays.mismatch(tokens, 0, common, stated, 0, common);
            Checks.requireArgument(
                    differ < 0,
                    "token %s of the commit is %s where the request's prompt (or what it "
                            + "committed before) has %s: a request commits its prompt (a chunk: a prefix of it) and what it "
                            + "generated after it, never other tokens",
                    differ,
                    differ < 0 ? 0 : tokens[differ],
                    differ < 0 ? 0 : stated[differ]);
            cache.settle(); // for ranks that agree: what finished everywhere is applied before the tree changes
            int[] prefix = locked.isRoot() ? new int[0] : cache.tree.devicePagesTo(locked);
            int[] fresh = new int[pages.length];
            int freshCount = 0;
            for (int i = 0; i < pages.length; i++) {
                boolean prefixPage = i < prefix.length && prefix[i] == pages[i];
                // a page neither allocated here nor the cached prefix's would end up with two owners
                Checks.requireArgument(
                        prefixPage || owned.contains(pages[i]),
                        "page %s at position %s is neither one this request allocated nor its cached prefix's page "
                                + "there (after a load-back that failed, the prefix is shorter: ask prefixPages() again)",
                        pages[i],
                        i);
                if (!prefixPage) {
                    fresh[freshCount++] = pages[i];
                }
            }
            // Prefix pages are distinct tree pages at their own positions; the request's own may be listed twice.
            Checks.requireDistinct(fresh, freshCount, "page");
            RadixTree.InsertResult r = cache.tree.insert(
                    extraKey,
                    tokens,
                    pages,
                    finished ? cache.config.writePolicy().hitThreshold() : 0,
                    retention.priority(),
                    retention.millis());
            for (int p : pages) {
                owned.remove(p);
            }
            for (int p : r.duplicatePages()) {
                cache.deviceTier.free(new int[] {p});
            }
            cache.metrics.computedTokens.add((long) r.newPages() * page);
            for (TreeNode n : r.storedOnDevice()) {
                cache.events.stored(n, Medium.GPU);
            }
            if (cache.host != null) {
                for (TreeNode n : r.backupCandidates()) {
                    cache.backups.start(n);
                }
            }
            this.tokens = tokens.clone();
            if (tokens.length > stated.length) { // after a chunk, the rest of the prompt still binds later commits
                stated = this.tokens;
            }
            relock(r.last());
            match = matchTokens();
            if (parts != null && hostParts != null) {
                List<PageHash> hashes = CacheCore.pathHashes(match.lastNode()).subList(0, tokens.length / page);
                switch (hostParts.put(hashes, parts)) {
                    case KEPT -> StoreParts.upload(cache, hostParts, hashes);
                    case ALREADY_KEPT -> {}
                    case NO_ROOM ->
                        cache.metrics.fail("commit: no host room for a hybrid prefix end (every end in use)");
                }
            }
            clampToParts();
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Copies the parts of the end of {@link #prefixPages()} (a hybrid model's window pages of that end, and the state
     * after it) into {@code targets}, to go with the prefix's KV; returns the pages of that prefix. Nothing is copied
     * for an empty prefix (0). The parts stay pinned in the host until the prefix changes or the request closes.
     *
     * @throws IllegalStateException when the cache has no hybrid model
     * @throws IllegalArgumentException when {@code targets} do not have the shape of that end's parts
     */
    public int restoreParts(PrefixParts targets) {
        Checks.checkNotNull(targets, "targets");
        cache.lock.lock();
        try {
            checkOpen();
            HostParts parts = cache.parts;
            Checks.requireState(parts != null, "the cache was opened without a hybrid model: it keeps no parts");
            HostParts.Hold pin = partsPin;
            if (pin == null) {
                return 0;
            }
            parts.checkShape(targets, pin.endPage);
            parts.copyOut(pin, targets);
            return pin.endPage;
        } finally {
            cache.lock.unlock();
        }
    }

    /** Releases what the request holds: its pins, its prefetch, and device pages it did not commit. */
    @Override
    public void close() {
        cache.lock.lock();
        try {
            closeLocked();
        } finally {
            cache.lock.unlock();
        }
    }

    /** The same as {@link #close()}: an aborted request releases everything it held. */
    public void abort() {
        close();
    }

    void closeLocked() {
        if (closed) {
            return;
        }
        closed = true;
        if (prefetch != null) {
            cache.prefetcher.tryFinish(prefetch, this, true);
            prefetch = null;
        }
        cache.tree.unlock(locked);
        if (cache.parts != null) {
            cache.parts.release(partsPin);
            partsPin = null;
        }
        int[] mine = owned.stream().mapToInt(Integer::intValue).toArray();
        owned.clear();
        cache.deviceTier.free(mine);
        cache.forget(this);
    }

    /** Device pages this request holds: those it allocated and has not committed, and its pinned prefix. */
    private int heldPages() {
        int held = owned.size();
        for (TreeNode n = locked; !n.isRoot(); n = n.parent()) {
            held += n.pages();
        }
        return held;
    }

    /** Device pages this request allocated and has not committed: for tests. */
    Set<Integer> ownedPages() {
        return owned;
    }

    /** Matches again (after a prefetch landed or a load began): the pinned device part can only have grown. */
    private void rematch() {
        match = matchTokens();
        relock(match.lastDeviceNode());
        clampToParts();
    }

    /** Matches the request's tokens, a hit of its retention on every node matched. */
    private MatchResult matchTokens() {
        cache.tickClock();
        return cache.tree.match(extraKey, tokens, retention.priority(), retention.millis());
    }

    /**
     * For a hybrid model: pins the greatest end of the device prefix that every part restores, and finds how far the
     * host prefix would restore (SGLang's hybrid radix caches match only to where the window and state are whole).
     */
    private void clampToParts() {
        HostParts parts = cache.parts;
        if (parts == null) {
            return;
        }
        List<PageHash> hashes = CacheCore.pathHashes(match.lastNode());
        HostParts.Hold old = partsPin;
        partsPin = parts.pinRestorable(hashes, match.devicePages());
        parts.release(old); // after the new pin, so that what both share stays
        reachablePages = parts.restorablePages(hashes, match.matchedPages());
    }

    /** Device pages of the prefix the engine may reuse: all of them, or for a hybrid model up to the pinned end. */
    private int usableDevicePages() {
        if (cache.parts == null) {
            return match.devicePages();
        }
        HostParts.Hold pin = partsPin;
        return pin == null ? 0 : pin.endPage;
    }

    /** Host-only pages a load-back would make usable. */
    private int usableHostPages() {
        return cache.parts == null ? match.hostPages() : Math.max(0, reachablePages - usableDevicePages());
    }

    private void relock(TreeNode to) {
        if (to == locked) {
            return;
        }
        cache.tree.lock(to);
        cache.tree.unlock(locked);
        locked = to;
    }

    private void checkOpen() {
        Checks.requireState(!closed, "request '%s' is closed", id);
        cache.checkOpen();
    }

    @Override
    public String toString() {
        return "CacheRequest[" + id + ", " + tokens.length + " tokens]";
    }

    /**
     * The device side of a request's prefix after a load-back: how many tokens are on the device, and the loads (this
     * request's, or others' over the same pages) to wait for before using them, layer by layer. Immutable.
     *
     * @param copies       loads in flight over the prefix
     * @param deviceTokens prompt tokens on the device once they land
     */
    public record LoadBack(List<KvCopy> copies, int deviceTokens) {
        /** True when nothing is in flight. */
        public boolean isDone() {
            return copies.stream().allMatch(c -> c.done().isDone());
        }

        /** Waits up to {@code timeout} for layer {@code layer} of every load, parked; false when the time was up first. */
        public boolean awaitLayer(int layer, Duration timeout) throws InterruptedException {
            return awaitLayer(layer, timeout, WaitMode.PARK);
        }

        /**
         * Waits up to {@code timeout} for layer {@code layer} of every load, parking or spinning as {@code mode} says
         * (spin where the wait is on a request's critical path: a parked thread's wake-up adds the scheduler's
         * latency, see {@link WaitMode}); false when the time was up first.
         */
        public boolean awaitLayer(int layer, Duration timeout, WaitMode mode) throws InterruptedException {
            Deadline deadline = Deadline.after(timeout);
            for (KvCopy c : copies) {
                if (!c.awaitLayer(layer, deadline, mode)) {
                    return false;
                }
            }
            return true;
        }

        /** Waits up to {@code timeout} for every load, parked; false when the time was up first. */
        public boolean await(Duration timeout) throws InterruptedException {
            return await(timeout, WaitMode.PARK);
        }

        /** Waits up to {@code timeout} for every load, parking or spinning as {@code mode} says; false when late. */
        public boolean await(Duration timeout, WaitMode mode) throws InterruptedException {
            Deadline deadline = Deadline.after(timeout);
            for (KvCopy c : copies) {
                if (!c.await(deadline, mode)) {
                    return false;
                }
            }
            return true;
        }
    }
}
