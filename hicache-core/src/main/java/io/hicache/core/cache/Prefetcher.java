package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.HostLayout;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.tree.MatchResult;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Prefetch from the page store into the host pool (L3 to L2), as SGLang does it, plus a cost check SGLang lacks.
 * A request whose deepest match is backed up (or that matched nothing) and whose uncached tail is at least
 * {@code prefetch-threshold} tokens gets host slots for the tail and an operation that runs on two loops:
 * {@code hicache-prefetch-query} asks the store how many of the tail's pages it has (in batches, stopping at the
 * first miss) and revokes the operation below the threshold; {@code hicache-prefetch-io} fetches them into the host
 * slab, batch by batch, stopping at the first page that does not arrive. The request ends the operation when its
 * policy allows ({@link #tryFinish}); the pages that arrived become host-only nodes under the anchor.
 *
 * <p>Not started: past {@code 0.8 * (host pool - device pool)} pages held by prefetches, without host room, and
 * (when {@code hicache-recompute-tokens-per-second} is set) when fetching at the store's measured speed would take
 * longer than recomputing; each reason is counted.
 *
 * <p>Thread-safe: an operation's fields are guarded by its own monitor; tree changes happen under the cache's lock.
 */
final class Prefetcher implements AutoCloseable {
    private final HiCache cache;
    private final Loop<Op> query;
    private final Loop<Op> io;
    private final AtomicInteger active = new AtomicInteger();
    /** Loop tasks running now: an operation can be finished while its last batch is still in the I/O loop. */
    private final AtomicInteger busy = new AtomicInteger();
    private final AtomicLong heldPages = new AtomicLong();
    /** The store's measured read speed (bytes per second, moving average); 0 until measured. */
    private volatile double storeBytesPerSecond;

    Prefetcher(HiCache cache) {
        this.cache = cache;
        this.query = new Loop<>("prefetch-query", cache.config.queueCapacity(), this::runQuery, cache.metrics);
        this.io = new Loop<>("prefetch-io", cache.config.queueCapacity(), this::runIo, cache.metrics);
    }

    /**
     * Prefetches not finished yet, by anchor: a request that wants pages one of them is fetching joins it instead of
     * fetching them again (a crowd of identical prompts). Guarded by the cache's lock.
     */
    private final Map<TreeNode, List<Op>> running = new IdentityHashMap<>();

    /**
     * One prefetch. Fields below {@code monitor fields} are guarded by the op's monitor; {@link #requests} by the
     * cache's lock.
     */
    final class Op {
        /** The requests waiting for it: the one that started it, and those that joined. */
        final List<CacheRequest> requests = new ArrayList<>();
        /** The prompt as it was when the prefetch started (a commit may replace the request's). */
        final int[] tokens;
        final TreeNode anchor;
        final PageHash anchorHash;
        final int fromToken;
        final int pages;
        final int[] slots;
        final long startNanos = System.nanoTime();
        // monitor fields
        PageHashes hashes;
        int limit;
        int landed;
        int inFlightFrom = -1;
        int inFlightTo = -1;
        boolean queried;
        boolean ioDone;
        boolean revoked;
        boolean finished;
        /** The page store was detached: fetch no further batch (what landed stays). */
        boolean cancelled;
        /** For ranks that agree: frees the slots the prefetch did not use, once its batch in flight (if any) is done. */
        RankAgreement.Entry inFlightRelease;

        Op(CacheRequest request, TreeNode anchor, int fromToken, int pages, int[] slots) {
            this.requests.add(request);
            this.tokens = request.tokens();
            this.anchor = anchor;
            this.anchorHash = anchor.priorHash();
            this.fromToken = fromToken;
            this.pages = pages;
            this.slots = slots;
            this.limit = pages;
        }
    }

    private void skip(CacheRequest r, String reason) {
        cache.metrics.skipPrefetch(reason);
        r.prefetchState = reason;
    }

    /** Starts a prefetch for {@code r} past {@code m}, if it is worth one; call with the cache's lock held. */
    Op maybeStart(CacheRequest r, MatchResult m) {
        if (!cache.stores.attached()) {
            return null;
        }
        int pageSize = cache.config.pageSizeTokens();
        int pages = r.tokens().length / pageSize - m.matchedPages();
        if (pages < cache.config.prefetchThresholdPages()) {
            return null;
        }
        TreeNode anchor = m.lastNode();
        if (!anchor.isRoot() && !anchor.backedUp()) {
            // SGLang's rule: the tail hangs off a node only the device holds; prefetching would pin device memory.
            skip(r, "anchor_not_backed_up");
            return null;
        }
        Op same = running(anchor, r.tokens(), m.matchedPages() * pageSize, pages);
        if (same != null) {
            // Its pages are being fetched already: wait for those (the rate limit does not apply to no new work).
            same.requests.add(r);
            cache.metrics.skipPrefetch("shared_with_running");
            return same;
        }
        long budget = (long) (0.8 * (cache.host.capacity() - cache.device.pages()));
        if (heldPages.get() + pages > budget) {
            skip(r, "rate_limited");
            return null;
        }
        double recompute = cache.config.recomputeTokensPerSecond();
        double speed = storeBytesPerSecond;
        boolean slower = false;
        if (recompute > 0 && speed > 0) {
            double fetchSeconds = (double) pages * cache.format.pageBytes() / speed;
            double recomputeSeconds = (double) pages * pageSize / recompute;
            slower = fetchSeconds > recomputeSeconds;
        }
        // Each rank measured its own store speed, and its query loop has its own backlog: all start it, or none.
        boolean room = query.hasRoom();
        if (!cache.agreement.allAgree(RankAgreement.Site.PREFETCH_START, !slower && room)) {
            skip(r, slower ? "slower_than_recompute" : room ? "another_rank_declined" : "queue_full");
            return null;
        }
        int[] slots = cache.reserveHost(pages);
        if (slots == null) {
            skip(r, "no_host_room");
            return null;
        }
        if (!anchor.isRoot()) {
            cache.tree.protectHost(anchor);
        }
        Op op = new Op(r, anchor, m.matchedPages() * pageSize, pages, slots);
        heldPages.addAndGet(pages);
        active.incrementAndGet();
        if (!query.offer(op)) {
            cache.host.release(slots);
            if (!anchor.isRoot()) {
                cache.tree.releaseHost(anchor);
            }
            heldPages.addAndGet(-pages);
            active.decrementAndGet();
            skip(r, "queue_full");
            return null;
        }
        cache.metrics.prefetchesStarted.increment();
        running.computeIfAbsent(anchor, a -> new ArrayList<>()).add(op);
        return op;
    }

    /** A running prefetch from {@code anchor} that fetches (at least) {@code pages} pages of {@code tokens} from {@code from}. */
    private Op running(TreeNode anchor, int[] tokens, int from, int pages) {
        int to = from + pages * cache.config.pageSizeTokens();
        for (Op op : running.getOrDefault(anchor, List.of())) {
            synchronized (op) {
                // A revoke is one rank's query's view; ranks that agree join by what they all know
                if (op.finished || (op.revoked && !cache.agreement.enabled())) {
                    continue;
                }
            }
            if (op.fromToken == from && op.pages >= pages && op.tokens.length >= to
                    && Arrays.equals(op.tokens, from, to, tokens, from, to)) {
                return op;
            }
        }
        return null;
    }

    /* ---------------------------------------------------------------- the query loop */

    private void runQuery(Op op) {
        busy.incrementAndGet();
        try {
            query(op);
        } finally {
            busy.decrementAndGet();
        }
    }

    private void query(Op op) {
        PageStore store = cache.stores.acquire();
        try {
            query(op, store);
        } finally {
            if (store != null) {
                cache.stores.release(store);
            }
        }
    }

    /** Asks {@code store} (null: detached, so no hits) how much of {@code op} it has, then queues the fetch. */
    private void query(Op op, PageStore store) {
        int pageSize = cache.config.pageSizeTokens();
        int[] tokens = op.tokens;
        PageHasher h = new PageHasher(pageSize);
        int to = op.fromToken + op.pages * pageSize;
        PageHashes hashes = op.anchorHash == null ? h.hashPages(tokens, op.fromToken, to)
                : h.hashPages(tokens, op.fromToken, to, op.anchorHash);
        int hits = 0;
        int batch = cache.config.storageBatchPages();
        try {
            for (int from = 0; store != null && from < op.pages; from += batch) {
                synchronized (op) {
                    if (op.finished || op.cancelled) {
                        break;
                    }
                }
                List<StoreKey> keys = keys(hashes, from, Math.min(op.pages, from + batch));
                int n = store.leadingHits(keys, deadline()).get(timeoutMillis(), TimeUnit.MILLISECONDS);
                hits += n;
                if (n < keys.size()) {
                    break;
                }
            }
        } catch (Exception e) {
            cache.metrics.fail("prefetch: hit query " + e.getClass().getSimpleName());
            // What was counted before the failure still stands.
        }
        try {
            hits = cache.agreement.queryHits(hits); // once per prefetch on every rank, whatever happened above
        } catch (RuntimeException e) { // the ranks can no longer agree: fetch nothing
            cache.metrics.fail("prefetch: hit query reduction " + e.getClass().getSimpleName());
            hits = 0;
        }
        boolean revoke = hits < cache.config.prefetchThresholdPages();
        int[] trimmed;
        synchronized (op) {
            op.hashes = hashes;
            op.queried = true;
            if (op.finished) {
                return;
            }
            if (revoke) {
                op.revoked = true;
                op.ioDone = true;
                trimmed = new int[0];
            } else {
                // ranks that agree free slots only where all do it: when the prefetch ends
                trimmed = cache.agreement.enabled() ? new int[0] : Arrays.copyOfRange(op.slots, hits, op.limit);
                op.limit = hits;
            }
        }
        cache.host.release(trimmed);
        if (revoke) {
            cache.metrics.prefetchesRevoked.increment();
            return;
        }
        if (!io.offer(op)) {
            synchronized (op) {
                op.ioDone = true;
            }
        }
    }

    /* ---------------------------------------------------------------- the I/O loop */

    private void runIo(Op op) {
        busy.incrementAndGet();
        try {
            fetch(op);
        } finally {
            busy.decrementAndGet();
        }
    }

    private void fetch(Op op) {
        PageStore store = cache.stores.acquire();
        if (store == null) {
            synchronized (op) {
                op.ioDone = true; // detached while queued: nothing more lands
            }
            return;
        }
        try {
            fetch(op, store);
        } finally {
            cache.stores.release(store);
        }
    }

    private void fetch(Op op, PageStore store) {
        int batch = cache.config.storageBatchPages();
        long pageBytes = cache.format.pageBytes();
        boolean direct = cache.format.layout() != HostLayout.LAYER_FIRST;
        while (true) {
            int from;
            int to;
            synchronized (op) {
                if (op.finished || op.cancelled || op.landed >= op.limit) {
                    op.ioDone = true;
                    return;
                }
                from = op.landed;
                to = Math.min(op.limit, from + batch);
                op.inFlightFrom = from;
                op.inFlightTo = to;
            }
            int begun = 0;
            int ok = 0;
            long start = System.nanoTime();
            try (Arena staging = Arena.ofShared()) {
                List<StoreKey> keys = keys(op.hashes, from, to);
                while (begun < keys.size() && cache.host.beginWrite(op.slots[from + begun], keys.get(begun))) {
                    begun++;
                }
                if (begun > 0) {
                    List<MemorySegment> targets = new ArrayList<>(begun);
                    for (int i = 0; i < begun; i++) {
                        targets.add(direct ? cache.host.slab().page(op.slots[from + i]) : staging.allocate(pageBytes, 64));
                    }
                    BatchResult r = store.get(PageBatch.of(keys.subList(0, begun), targets), deadline())
                            .get(timeoutMillis(), TimeUnit.MILLISECONDS);
                    while (ok < begun && r.status(ok) == PageStatus.OK) {
                        ok++;
                    }
                    if (ok < begun) {
                        cache.metrics.fail("prefetch: " + Uploader.firstFailure(r));
                    }
                    for (int i = 0; i < ok; i++) {
                        if (!direct) {
                            cache.host.writePage(op.slots[from + i], targets.get(i));
                        }
                        cache.host.commitWrite(op.slots[from + i]);
                    }
                }
            } catch (Exception e) {
                cache.metrics.fail("prefetch: get " + e.getClass().getSimpleName());
            } finally {
                for (int i = ok; i < begun; i++) {
                    cache.host.abortWrite(op.slots[from + i]);
                }
            }
            if (ok > 0) {
                double seconds = (System.nanoTime() - start) / 1e9;
                double speed = ok * pageBytes / Math.max(seconds, 1e-6);
                storeBytesPerSecond = storeBytesPerSecond == 0 ? speed : 0.8 * storeBytesPerSecond + 0.2 * speed;
                cache.metrics.bytesStoreToHost.add(ok * pageBytes);
            }
            synchronized (op) {
                op.inFlightFrom = -1;
                op.inFlightTo = -1;
                if (op.finished) {
                    // The request went on without these pages: give every slot of the batch back (ranks that agree
                    // free them, and the prefetch's other unused slots, at a settle, where every rank does).
                    if (op.inFlightRelease != null) {
                        op.inFlightRelease.done(true);
                    } else {
                        cache.host.release(Arrays.copyOfRange(op.slots, from, to));
                    }
                    op.ioDone = true;
                    return;
                }
                op.landed += ok;
                if (ok < to - from) {
                    op.ioDone = true;
                    return;
                }
            }
        }
    }

    /* ---------------------------------------------------------------- ending */

    /**
     * Ends {@code op} for {@code who} if its policy allows (always when {@code force}): the pages that arrived join
     * the tree as host-only nodes, the slots not used go back, the anchor is unprotected. A request that leaves
     * ({@code force}) a prefetch others still wait for only leaves it. True when it has ended for {@code who}. Call
     * with the cache's lock held.
     */
    boolean tryFinish(Op op, CacheRequest who, boolean force) {
        if (force && op.requests.size() > 1 && op.requests.remove(who)) {
            return true;
        }
        return tryFinish(op, force);
    }

    private boolean tryFinish(Op op, boolean force) {
        int landed;
        int[] release;
        PageHashes hashes;
        boolean revoked;
        boolean agreeing = cache.agreement.enabled();
        int[] agreed = null;
        if (agreeing) {
            synchronized (op) {
                if (op.finished) {
                    return true;
                }
                agreed = new int[] {force || mayEnd(op) ? 1 : 0, op.revoked ? 0 : op.landed};
            }
            // SGLang's two reductions in one: every rank may end it, and the pages that landed on every rank
            agreed = cache.agreement.allReduceMin(RankAgreement.Site.PREFETCH_END, agreed);
            if (agreed[0] == 0) {
                return false;
            }
        }
        synchronized (op) {
            if (op.finished) {
                return true;
            }
            if (!agreeing && !force && !mayEnd(op)) {
                return false;
            }
            op.finished = true;
            revoked = op.revoked;
            landed = agreeing ? agreed[1] : revoked ? 0 : op.landed;
            hashes = op.hashes;
            if (agreeing) {
                // Ranks that agree free every slot past what landed (the query kept them) at once, at a settle, once
                // the batch in flight here (if any) is done: every rank then has the same free host slots at every call.
                int[] all = Arrays.copyOfRange(op.slots, landed, op.pages);
                op.inFlightRelease = cache.agreement.add(RankAgreement.Lane.RELEASES, all.length,
                        ok -> cache.host.release(all));
                if (op.inFlightFrom < 0) {
                    op.inFlightRelease.done(true);
                }
                release = new int[0];
            } else {
                // Slots past what landed, up to the query's limit, and not in a batch the I/O loop holds.
                List<Integer> free = new ArrayList<>();
                for (int i = landed; i < op.limit; i++) {
                    if (i < op.inFlightFrom || i >= op.inFlightTo) {
                        free.add(op.slots[i]);
                    }
                }
                release = free.stream().mapToInt(Integer::intValue).toArray();
            }
        }
        cache.host.release(release);
        int kept = 0;
        if (landed > 0) {
            RadixTree.HostInsert inserted = cache.tree.insertHost(op.anchor, op.tokens, op.fromToken, landed,
                    Arrays.copyOf(op.slots, landed), hashes.slice(0, landed));
            int[] unused = inserted.unusedSlots();
            cache.host.release(unused);
            kept = landed - unused.length;
            cache.metrics.prefetchedPages.add(kept);
            cache.metrics.storageHitTokens.add((long) kept * cache.config.pageSizeTokens());
            cache.metrics.prefetchesCompleted.increment();
            for (TreeNode n : inserted.storedOnHost()) {
                cache.events.stored(n, Medium.CPU);
            }
        }
        for (CacheRequest r : op.requests) {
            r.prefetchEnded(kept, op.pages, revoked && !agreeing); // a revoke is one rank's view; what landed is all's
        }
        List<Op> fromAnchor = running.get(op.anchor);
        if (fromAnchor != null && fromAnchor.remove(op) && fromAnchor.isEmpty()) {
            running.remove(op.anchor);
        }
        if (!op.anchor.isRoot()) {
            cache.tree.releaseHost(op.anchor);
        }
        heldPages.addAndGet(-op.pages);
        active.decrementAndGet();
        return true;
    }

    private boolean mayEnd(Op op) {
        if (op.revoked) {
            return true;
        }
        return switch (cache.config.prefetchPolicy()) {
            case BEST_EFFORT -> true;
            case WAIT_COMPLETE -> op.ioDone;
            case TIMEOUT -> op.ioDone || System.nanoTime() - op.startNanos > timeoutNanos(op);
        };
    }

    private long timeoutNanos(Op op) {
        long perKi = cache.config.prefetchTimeoutPerKiToken().toNanos();
        long tokens = (long) op.pages * cache.config.pageSizeTokens();
        return cache.config.prefetchTimeoutBase().toNanos() + perKi * tokens / 1024;
    }

    private List<StoreKey> keys(PageHashes hashes, int from, int to) {
        List<StoreKey> keys = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            keys.add(cache.namespace.key(hashes.get(i)));
        }
        return keys;
    }

    private Deadline deadline() {
        return Deadline.after(cache.config.storageTimeout());
    }

    private long timeoutMillis() {
        return cache.config.storageTimeout().toMillis() + 5_000;
    }

    /**
     * Stops every running prefetch at its next batch (the page store is being detached): the pages that landed stay,
     * and each request ends its prefetch as its policy says, with what landed. Call with the cache's lock held.
     */
    void cancelAll() {
        for (List<Op> ops : running.values()) {
            for (Op op : ops) {
                synchronized (op) {
                    op.cancelled = true;
                }
            }
        }
    }

    int queryDepth() {
        return query.depth();
    }

    int ioDepth() {
        return io.depth();
    }

    /** True when no prefetch is unfinished and neither loop has work. */
    boolean idle() {
        return active.get() == 0 && workIdle();
    }

    /** True when neither loop has work: prefetches may be unfinished, waiting for their requests to end them. */
    boolean workIdle() {
        return busy.get() == 0 && query.depth() == 0 && io.depth() == 0;
    }

    /** Host slots held by unfinished prefetches (reserved, in flight or landed): for the consistency check. */
    long heldPages() {
        return heldPages.get();
    }

    @Override
    public void close() {
        close(30_000);
    }

    /** Stops both loops, letting queued work run for up to {@code waitMillis} in all. */
    void close(long waitMillis) {
        long end = System.nanoTime() + waitMillis * 1_000_000;
        query.close(waitMillis);
        io.close(Math.max(1, (end - System.nanoTime()) / 1_000_000));
    }
}
