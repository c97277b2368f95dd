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
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Prefetch from the page store into the host pool (L3 to L2), as SGLang does it, plus a cost check SGLang lacks.
 * A request whose deepest match is backed up (or that matched nothing) and whose uncached tail is at least
 * {@code prefetch-threshold} tokens gets host slots for the tail and an operation in two stages:
 * {@code hicache-prefetch-query} asks the store how many of the tail's pages it has (in batches, stopping at the
 * first miss) and revokes the operation below the threshold; {@code hicache-prefetch-io} fetches them into the host
 * slab, batch by batch, stopping at the first page that does not arrive. The request ends the operation when its
 * policy allows ({@link #tryFinish}); the pages that arrived become host-only nodes under the anchor.
 *
 * <p>Neither loop thread waits on the store: a step issues a call and returns, and the call's answer queues the next
 * step ({@link Loop#resume}). So queries run side by side and no request waits behind another's hung one; fetches run
 * {@link #FETCH_LANES} operations at a time (each holding a batch of host slots while its get runs). A call not
 * answered {@link TimedPageStore#GRACE} after its deadline is given up: its query counts what it had, its fetch lands
 * nothing and lets its request go on, and the store counts as not answering, so no prefetch starts until it answers
 * again. The slots of a given-up get stay claimed until the store answers it (the store may still write into them;
 * the contract says so); a request that ends its operation cancels the deadline of the get in flight.
 *
 * <p>Not started: while the store does not answer, once prefetches hold {@code 0.8 * (host pool - device pool)} host
 * slots (SGLang's rate limit: reached, not merely approached, so a long tail on an idle cache still starts), without
 * host room, and (when {@code hicache-recompute-tokens-per-second} is set) when fetching at the store's measured
 * speed would take longer than recomputing; each reason is counted. Every operation started ends once, counted by how:
 * completed (pages used), revoked, timed out (ended by the {@code timeout} policy with nothing used) or empty.
 *
 * <p>Thread-safe: an operation's fields are guarded by its own monitor; tree changes happen under the cache's lock;
 * {@link #pendingQueries}, {@link #waitingFetches} and {@link #lanesBusy} belong to the loop threads.
 */
final class Prefetcher implements AutoCloseable {
    /** Operations fetching at once; the rest wait their turn in order. */
    static final int FETCH_LANES = 4;

    private final CacheCore cache;
    private final Loop<Runnable> query;
    private final Loop<Runnable> io;
    private final AtomicInteger active = new AtomicInteger();
    /** Loop steps queued or running, and store calls awaited: zero when the prefetcher has nothing in hand. */
    private final AtomicInteger busy = new AtomicInteger();
    /**
     * Host slots prefetches hold: those of unfinished operations, and the batches of ended ones whose gets have not
     * answered yet.
     */
    private final AtomicLong heldPages = new AtomicLong();
    /** The store's measured read speed (bytes per second, moving average); 0 until measured. */
    private volatile double storeBytesPerSecond;
    /** For ranks that agree: queries in the order they started, each reduced only after those before it (query loop). */
    private final ArrayDeque<Op> pendingQueries = new ArrayDeque<>();
    /** Operations whose query is done, waiting for a fetch lane (I/O loop). */
    private final ArrayDeque<Op> waitingFetches = new ArrayDeque<>();
    /** Fetch lanes in use (I/O loop). */
    private int lanesBusy;

    Prefetcher(CacheCore cache) {
        this.cache = cache;
        this.query = new Loop<>("prefetch-query", cache.config.queueCapacity(), this::step, cache.metrics);
        this.io = new Loop<>("prefetch-io", cache.config.queueCapacity(), this::step, cache.metrics);
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
        final @Nullable PageHash anchorHash;
        final int fromToken;
        final int pages;
        final int[] slots;
        final long startNanos = System.nanoTime();
        /** Started as a trial of a store that was not answering: its calls go ahead regardless. */
        final boolean trial;
        // monitor fields
        @Nullable
        PageHashes hashes;

        int limit;
        int landed;
        /** The batch whose get is in flight, or null. */
        @Nullable
        Fetch inFlight;
        /** The deadline of the store call in flight (query or get), cancelled when the operation ends. */
        @Nullable
        Deadline callDeadline;
        /** For a hybrid model: the page hashes of the matched prefix, which the parts' search may end in. */
        @Nullable
        List<PageHash> prefixHashes;

        /** The query's count, once it answered (ranks that agree reduce counts in the order queries started). */
        int queryHits = -1;

        boolean queried;
        boolean ioDone;
        boolean revoked;
        boolean finished;
        /** The page store was detached: fetch no further batch (what landed stays). */
        boolean cancelled;
        /** For ranks that agree: frees the slots the prefetch did not use, once its batch in flight (if any) is done. */
        RankAgreement.@Nullable Entry inFlightRelease;

        Op(CacheRequest request, TreeNode anchor, int fromToken, int pages, int[] slots, boolean trial) {
            this.trial = trial;
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

    /**
     * One get in flight: the batch of an operation's pages, the slots it began writing, and the memory the store holds.
     * {@link #targets} is set before the get is made; {@link #writesDropped} is guarded by the op's monitor.
     */
    private static final class Fetch {
        final Op op;
        final int from;
        final int to;
        final int begun;
        final @Nullable PageStore store;
        final @Nullable Arena staging;
        final long startNanos;
        List<MemorySegment> targets = List.of();
        boolean writesDropped;

        Fetch(Op op, int from, int to, int begun, @Nullable PageStore store, @Nullable Arena staging, long startNanos) {
            this.op = op;
            this.from = from;
            this.to = to;
            this.begun = begun;
            this.store = store;
            this.staging = staging;
            this.startNanos = startNanos;
        }
    }

    private void skip(CacheRequest r, PrefetchSkip reason) {
        cache.metrics.skipPrefetch(reason);
        r.prefetchState = PrefetchOutcome.skipped(reason);
    }

    /** Starts a prefetch for {@code r} past {@code m}, if it is worth one; call with the cache's lock held. */
    @Nullable
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
            skip(r, PrefetchSkip.ANCHOR_NOT_BACKED_UP);
            return null;
        }
        Op same = running(anchor, r.tokens(), m.matchedPages() * pageSize, pages);
        if (same != null) {
            // Its pages are being fetched already: wait for those (the rate limit does not apply to no new work).
            same.requests.add(r);
            cache.metrics.skipPrefetch(PrefetchSkip.SHARED_WITH_RUNNING);
            return same;
        }
        long budget = (long) (0.8 * (cache.host().capacity() - cache.device.pages()));
        if (heldPages.get() >= budget) {
            skip(r, PrefetchSkip.RATE_LIMITED);
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
        // Each rank measured its own store speed, sees its own store answer, and its query loop has its own backlog:
        // all start it, or none.
        boolean room = query.hasRoom();
        TimedPageStore.Admission admission = cache.admitStoreWork(TimedPageStore.Kind.QUERY, TimedPageStore.Kind.GET);
        boolean answering = admission != TimedPageStore.Admission.NO;
        if (!cache.agreement.allAgree(RankAgreement.Site.PREFETCH_START, !slower && room && answering)) {
            skip(
                    r,
                    !answering
                            ? PrefetchSkip.STORE_UNRESPONSIVE
                            : slower
                                    ? PrefetchSkip.SLOWER_THAN_RECOMPUTE
                                    : room ? PrefetchSkip.ANOTHER_RANK_DECLINED : PrefetchSkip.QUEUE_FULL);
            return null;
        }
        // Protected before the slots are reserved: reserving may evict host-only leaves, and the anchor may be one;
        // pages landing under a node evicted meanwhile would hang off the tree (RankAgreementModelTest found it).
        if (!anchor.isRoot()) {
            cache.tree.protectHost(anchor);
        }
        int[] slots = cache.hostTier.reserve(pages);
        if (slots == null) {
            if (!anchor.isRoot()) {
                cache.tree.releaseHost(anchor);
            }
            skip(r, PrefetchSkip.NO_HOST_ROOM);
            return null;
        }
        Op op = new Op(
                r, anchor, m.matchedPages() * pageSize, pages, slots, admission == TimedPageStore.Admission.TRIAL);
        if (cache.parts != null) {
            op.prefixHashes = CacheCore.pathHashes(anchor);
        }
        heldPages.addAndGet(pages);
        active.incrementAndGet();
        busy.incrementAndGet();
        if (!query.offer(() -> startQuery(op))) {
            busy.decrementAndGet();
            cache.host().release(slots);
            if (!anchor.isRoot()) {
                cache.tree.releaseHost(anchor);
            }
            heldPages.addAndGet(-pages);
            active.decrementAndGet();
            skip(r, PrefetchSkip.QUEUE_FULL);
            return null;
        }
        cache.metrics.prefetchesStarted.increment();
        running.computeIfAbsent(anchor, a -> new ArrayList<>()).add(op);
        return op;
    }

    /** A running prefetch from {@code anchor} that fetches (at least) {@code pages} pages of {@code tokens} from {@code from}. */
    private @Nullable Op running(TreeNode anchor, int[] tokens, int from, int pages) {
        int to = from + pages * cache.config.pageSizeTokens();
        for (Op op : running.getOrDefault(anchor, List.of())) {
            synchronized (op) {
                // A revoke is one rank's query's view; ranks that agree join by what they all know
                if (op.finished || (op.revoked && !cache.agreement.enabled())) {
                    continue;
                }
            }
            if (op.fromToken == from
                    && op.pages >= pages
                    && op.tokens.length >= to
                    && Arrays.equals(op.tokens, from, to, tokens, from, to)) {
                return op;
            }
        }
        return null;
    }

    /** Runs a loop step, counted as work in hand until it ends (each step was counted when it was queued). */
    private void step(Runnable step) {
        try {
            step.run();
        } finally {
            busy.decrementAndGet();
        }
    }

    /** Queues the next step of work in hand on {@code loop}; false (nothing queued, nothing counted) once it stopped. */
    private boolean resume(Loop<Runnable> loop, Runnable step) {
        busy.incrementAndGet();
        if (!loop.resume(step)) {
            busy.decrementAndGet();
            return false;
        }
        return true;
    }

    /* ---------------------------------------------------------------- the query stage */

    /** On the query loop: hashes the tail and asks the store about it, batch by batch, without waiting. */
    private void startQuery(Op op) {
        int pageSize = cache.config.pageSizeTokens();
        PageHasher h = new PageHasher(pageSize);
        int to = op.fromToken + op.pages * pageSize;
        PageHashes hashes = op.anchorHash == null
                ? h.hashPages(op.tokens, op.fromToken, to)
                : h.hashPages(op.tokens, op.fromToken, to, op.anchorHash);
        if (cache.agreement.enabled()) {
            pendingQueries.add(op);
        }
        boolean answers = op.trial || cache.storeAnswers(TimedPageStore.Kind.QUERY);
        PageStore store = answers ? cache.stores.acquire() : null; // null: detached or silent, no hits
        ask(op, store, hashes, 0, 0);
    }

    /**
     * Asks {@code store} about pages {@code from..} of {@code op} having counted {@code hits} before them; the answer
     * asks about the next batch or ends the query. Runs on the query loop, then on whatever thread answers.
     */
    private void ask(Op op, @Nullable PageStore store, PageHashes hashes, int from, int hits) {
        int batch = cache.config.storageBatchPages();
        boolean stop;
        synchronized (op) {
            stop = store == null || op.finished || op.cancelled || from >= op.pages;
        }
        if (stop || store == null) {
            answered(op, store, hashes, hits);
            return;
        }
        List<StoreKey> keys = keys(hashes, from, Math.min(op.pages, from + batch));
        Deadline deadline = deadline();
        synchronized (op) {
            op.callDeadline = deadline;
        }
        CompletableFuture<Integer> ask;
        try {
            ask = store.leadingHits(keys, deadline);
        } catch (RuntimeException e) {
            ask = CompletableFuture.failedFuture(e);
        }
        busy.incrementAndGet(); // the call, until it answers or is given up
        ask.copy()
                .orTimeout(givenUpAfterMillis(deadline), TimeUnit.MILLISECONDS)
                .whenComplete((n, e) -> {
                    busy.decrementAndGet();
                    if (e != null) {
                        cache.metrics.fail("prefetch: hit query "
                                + (timedOut(e)
                                        ? "given up past its deadline"
                                        : unwrap(e).getClass().getSimpleName()));
                        answered(op, store, hashes, hits); // what was counted before the failure still stands
                    } else if (n < keys.size()) {
                        answered(op, store, hashes, hits + n);
                    } else {
                        ask(op, store, hashes, from + keys.size(), hits + n);
                    }
                });
    }

    /** The query has its count: the rest is done on the query loop. */
    private void answered(Op op, @Nullable PageStore store, PageHashes hashes, int hits) {
        if (store != null) {
            cache.stores.release(store);
        }
        if (!resume(query, () -> queryAnswered(op, hashes, hits))) {
            synchronized (op) {
                op.ioDone = true; // closing: nothing more lands
            }
        }
    }

    /** On the query loop: ends the query (for ranks that agree, in the order the queries started). */
    private void queryAnswered(Op op, PageHashes hashes, int found) {
        int hits = found;
        List<PageHash> prefix = op.prefixHashes;
        HostParts parts = cache.parts;
        if (parts != null && prefix != null && hits > 0) {
            hits = hybridHits(op, parts, prefix, hashes, hits);
        }
        synchronized (op) {
            op.hashes = hashes;
            op.queryHits = hits;
        }
        if (!cache.agreement.enabled()) {
            endQuery(op);
            return;
        }
        while (!pendingQueries.isEmpty()) {
            Op first = pendingQueries.peek();
            synchronized (first) {
                if (first.queryHits < 0) {
                    return; // an earlier query has not answered yet: every rank reduces in the same order
                }
            }
            endQuery(pendingQueries.poll());
        }
    }

    /**
     * Of the {@code hits} pages the store has past the matched prefix, those every part of a hybrid model can restore
     * (with the end's parts brought to the host): the KV past that end would be fetched for nothing.
     */
    private int hybridHits(Op op, HostParts parts, List<PageHash> prefix, PageHashes tail, int hits) {
        PageStore store = cache.stores.acquire();
        if (store == null) {
            return 0;
        }
        try {
            List<PageHash> all = new ArrayList<>(prefix);
            all.addAll(tail.asList().subList(0, hits));
            int end = StoreParts.fetchEnd(cache, parts, store, all, all.size(), deadline());
            return Math.max(0, end - prefix.size());
        } catch (RuntimeException e) {
            cache.metrics.fail("prefetch: hybrid parts " + e.getClass().getSimpleName());
            return 0;
        } finally {
            cache.stores.release(store);
        }
    }

    /** Revokes {@code op} below the threshold, else trims its slots to what the store has and queues the fetch. */
    private void endQuery(Op op) {
        int hits;
        synchronized (op) {
            hits = op.queryHits;
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
            op.queried = true;
            op.callDeadline = null;
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
        cache.host().release(trimmed);
        if (revoke) {
            return;
        }
        if (!resume(io, () -> queueFetch(op))) {
            synchronized (op) {
                op.ioDone = true;
            }
        }
    }

    /* ---------------------------------------------------------------- the fetch stage */

    /** On the I/O loop: {@code op} waits for a lane. */
    private void queueFetch(Op op) {
        waitingFetches.add(op);
        startFetches();
    }

    /** On the I/O loop: gives free lanes to waiting operations. */
    private void startFetches() {
        while (lanesBusy < FETCH_LANES && !waitingFetches.isEmpty()) {
            lanesBusy++;
            fetchNext(waitingFetches.poll());
        }
    }

    /** On the I/O loop: {@code op}'s fetch is over (all landed, or it stopped): its lane goes to the next. */
    private void fetchOver(Op op) {
        synchronized (op) {
            op.ioDone = true;
        }
        lanesBusy--;
        startFetches();
    }

    /** On the I/O loop: starts the get of {@code op}'s next batch, or ends its fetch. */
    private void fetchNext(Op op) {
        boolean answers = op.trial || cache.storeAnswers(TimedPageStore.Kind.GET);
        PageStore store = answers ? cache.stores.acquire() : null; // null: detached, or it stopped answering
        boolean direct = cache.format.layout() != HostLayout.LAYER_FIRST;
        int batch = cache.config.storageBatchPages();
        Fetch f;
        List<StoreKey> keys;
        synchronized (op) {
            if (store == null || op.finished || op.cancelled || op.landed >= op.limit) {
                f = null;
                keys = null;
            } else {
                int from = op.landed;
                int to = Math.min(op.limit, from + batch);
                keys = keys(Checks.checkNotNull(op.hashes, "a queried prefetch's hashes"), from, to);
                // Claimed under the monitor, so that an ending request sees exactly which writes to give up.
                int begun = 0;
                try {
                    while (begun < keys.size() && cache.host().beginWrite(op.slots[from + begun], keys.get(begun))) {
                        begun++;
                    }
                } catch (RuntimeException e) {
                    cache.metrics.fail("prefetch: get " + e.getClass().getSimpleName());
                }
                f = new Fetch(op, from, to, begun, store, direct ? null : Arena.ofShared(), System.nanoTime());
                op.inFlight = f;
                op.callDeadline = begun == 0 ? null : deadline();
            }
        }
        if (f == null) {
            if (store != null) {
                cache.stores.release(store);
            }
            fetchOver(op);
            return;
        }
        CompletableFuture<BatchResult> get = null;
        Deadline deadline = op.callDeadline != null ? op.callDeadline : Deadline.expired();
        List<MemorySegment> targets = new ArrayList<>(f.begun);
        try {
            for (int i = 0; i < f.begun; i++) {
                Arena staging = f.staging;
                targets.add(
                        staging == null
                                ? cache.host().slab().page(op.slots[f.from + i])
                                : staging.allocate(cache.format.pageBytes(), 64));
            }
            if (f.begun > 0 && keys != null && store != null) {
                get = store.get(PageBatch.of(keys.subList(0, f.begun), targets), deadline);
            }
        } catch (RuntimeException e) {
            cache.metrics.fail("prefetch: get " + e.getClass().getSimpleName());
        }
        f.targets = targets;
        if (get == null) { // nothing was lent to the store
            batchEnded(f, 0, false);
            return;
        }
        CompletableFuture<BatchResult> answer = get;
        busy.incrementAndGet(); // the call, until it answers or is given up
        get.copy()
                .orTimeout(givenUpAfterMillis(deadline), TimeUnit.MILLISECONDS)
                .whenComplete((r, e) -> {
                    busy.decrementAndGet();
                    if (e != null && timedOut(e)) {
                        // Given up: the request may go on, but the store may still write into the batch's memory, which
                        // stays reserved until it answers.
                        cache.metrics.fail("prefetch: get given up past its deadline");
                        if (resume(io, () -> givenUp(f))) {
                            answer.whenComplete((late, error) -> resume(io, () -> batchEnded(f, 0, true)));
                        }
                        return;
                    }
                    if (e != null) {
                        cache.metrics.fail(
                                "prefetch: get " + unwrap(e).getClass().getSimpleName());
                    }
                    resume(io, () -> batchEnded(f, e == null ? leadingOk(r, f.begun) : 0, false));
                });
    }

    /** On the I/O loop: {@code f}'s get was given up; its writes are dropped and its lane goes on. */
    private void givenUp(Fetch f) {
        synchronized (f.op) {
            dropWrites(f);
        }
        fetchOver(f.op);
    }

    /**
     * Gives up the writes {@code f} began (the keys are free again, for a backup of the same pages), keeping its slots
     * reserved: the store may still write into them. Call holding the op's monitor.
     */
    private void dropWrites(Fetch f) {
        if (!f.writesDropped) {
            f.writesDropped = true;
            for (int i = 0; i < f.begun; i++) {
                cache.host().abortWrite(f.op.slots[f.from + i]);
            }
        }
    }

    private static int leadingOk(BatchResult r, int begun) {
        int ok = 0;
        while (ok < begun && r.status(ok) == PageStatus.OK) {
            ok++;
        }
        return ok;
    }

    /**
     * On the I/O loop: the batch's get answered ({@code ok} leading pages arrived), failed, or ({@code givenUp}) was
     * given up and has now answered at last. Commits what arrived (unless the operation ended meanwhile and dropped
     * the writes), gives back what did not, and fetches on.
     */
    private void batchEnded(Fetch f, int ok, boolean givenUp) {
        Op op = f.op;
        long pageBytes = cache.format.pageBytes();
        int landed = 0;
        boolean more;
        try {
            synchronized (op) {
                if (!f.writesDropped) {
                    try {
                        for (; landed < ok; landed++) {
                            int slot = op.slots[f.from + landed];
                            if (f.staging != null) {
                                cache.host().writePage(slot, f.targets.get(landed));
                            }
                            cache.host().commitWrite(slot);
                        }
                    } catch (RuntimeException e) {
                        cache.metrics.fail("prefetch: landing " + e.getClass().getSimpleName());
                    }
                    for (int i = landed; i < f.begun; i++) {
                        cache.host().abortWrite(op.slots[f.from + i]);
                    }
                    f.writesDropped = true;
                }
                op.inFlight = null;
                op.callDeadline = null;
                if (op.finished) {
                    // The request went on without these pages: give every slot of the batch back (ranks that agree
                    // free them, and the prefetch's other unused slots, at a settle, where every rank does).
                    if (op.inFlightRelease != null) {
                        op.inFlightRelease.done(true);
                    } else {
                        cache.host().release(Arrays.copyOfRange(op.slots, f.from, f.to));
                        heldPages.addAndGet(-(f.to - f.from));
                    }
                    more = false;
                    landed = 0;
                } else {
                    op.landed += landed;
                    more = !givenUp && landed == f.to - f.from;
                }
            }
        } finally {
            if (f.staging != null) {
                f.staging.close();
            }
            if (f.store != null) {
                cache.stores.release(f.store);
            }
        }
        if (landed < f.begun && !givenUp && f.begun > 0) {
            cache.metrics.fail("prefetch: " + (landed == 0 ? "no page of a batch arrived" : "a batch arrived in part"));
        }
        if (landed > 0) {
            double seconds = (System.nanoTime() - f.startNanos) / 1e9;
            double speed = landed * pageBytes / Math.max(seconds, 1e-6);
            storeBytesPerSecond = storeBytesPerSecond == 0 ? speed : 0.8 * storeBytesPerSecond + 0.2 * speed;
            cache.metrics.bytesStoreToHost.add(landed * pageBytes);
        }
        if (givenUp) {
            return; // its lane went on when it was given up
        }
        if (more) {
            fetchNext(op);
        } else {
            fetchOver(op);
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
        boolean timedOut;
        int heldBack = 0;
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
            if (op.callDeadline != null) {
                op.callDeadline.cancel(); // a store that honours it gives the batch's slots back at once
            }
            if (op.inFlight != null) {
                dropWrites(op.inFlight); // its keys are free for the request's own backups at once
            }
            revoked = op.revoked;
            timedOut = !force && !revoked && !op.ioDone && cache.config.prefetchPolicy() == PrefetchPolicy.TIMEOUT;
            landed = agreed != null ? agreed[1] : revoked ? 0 : op.landed;
            hashes = op.hashes;
            if (agreeing) {
                // Ranks that agree free every slot past what landed (the query kept them) at once, at a settle, once
                // the batch in flight here (if any) is done: every rank then has the same free host slots at every
                // call.
                int[] all = Arrays.copyOfRange(op.slots, landed, op.pages);
                op.inFlightRelease = cache.agreement.add(
                        RankAgreement.Lane.RELEASES,
                        all.length,
                        ok -> cache.host().release(all));
                if (op.inFlight == null) {
                    op.inFlightRelease.done(true);
                }
                release = new int[0];
            } else {
                // Slots past what landed, up to the query's limit, and not in a batch the I/O loop holds (it gives
                // those back when its get answers).
                Fetch f = op.inFlight;
                heldBack = f == null ? 0 : f.to - f.from;
                List<Integer> free = new ArrayList<>();
                for (int i = landed; i < op.limit; i++) {
                    if (f == null || i < f.from || i >= f.to) {
                        free.add(op.slots[i]);
                    }
                }
                release = free.stream().mapToInt(Integer::intValue).toArray();
            }
        }
        cache.host().release(release);
        int kept = 0;
        if (landed > 0) {
            RadixTree.HostInsert inserted = cache.tree.insertHost(
                    op.anchor,
                    op.tokens,
                    op.fromToken,
                    landed,
                    Arrays.copyOf(op.slots, landed),
                    Checks.checkNotNull(hashes, "a fetch's hashes").slice(0, landed));
            int[] unused = inserted.unusedSlots();
            cache.host().release(unused);
            kept = landed - unused.length;
            cache.metrics.prefetchedPages.add(kept);
            cache.metrics.storageHitTokens.add((long) kept * cache.config.pageSizeTokens());
            for (TreeNode n : inserted.storedOnHost()) {
                cache.events.stored(n, Medium.CPU);
            }
        }
        // Every ending is counted once, by how it ended. A revoke is one rank's view; what landed is all ranks'.
        boolean revokedHere = revoked && !agreeing;
        (revokedHere
                        ? cache.metrics.prefetchesRevoked
                        : kept > 0
                                ? cache.metrics.prefetchesCompleted
                                : timedOut ? cache.metrics.prefetchesTimedOut : cache.metrics.prefetchesEmpty)
                .increment();
        for (CacheRequest r : op.requests) {
            r.prefetchEnded(kept, op.pages, revokedHere, timedOut);
        }
        List<Op> fromAnchor = running.get(op.anchor);
        if (fromAnchor != null && fromAnchor.remove(op) && fromAnchor.isEmpty()) {
            running.remove(op.anchor);
        }
        if (!op.anchor.isRoot()) {
            cache.tree.releaseHost(op.anchor);
        }
        heldPages.addAndGet(-(op.pages - heldBack));
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

    /** How long to wait for a call made with {@code deadline} before giving it up: its time and the grace after. */
    private static long givenUpAfterMillis(Deadline deadline) {
        return deadline.remaining().plus(TimedPageStore.GRACE).toMillis();
    }

    private static boolean timedOut(Throwable e) {
        return unwrap(e) instanceof TimeoutException;
    }

    private static Throwable unwrap(Throwable e) {
        return e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
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

    /**
     * Host slots held by prefetches: unfinished ones' (reserved, in flight or landed), and ended ones' batches whose
     * gets have not answered yet. For the consistency check and the rate limit.
     */
    long heldPages() {
        return heldPages.get();
    }

    @Override
    public void close() {
        close(30_000);
    }

    /** Whether both loops' threads have ended: for tests. */
    boolean ended() {
        return query.ended() && io.ended();
    }

    /** Stops both loops, letting queued work run for up to {@code waitMillis} in all. */
    void close(long waitMillis) {
        long end = System.nanoTime() + waitMillis * 1_000_000;
        query.close(waitMillis);
        io.close(Math.max(1, (end - System.nanoTime()) / 1_000_000));
    }
}
