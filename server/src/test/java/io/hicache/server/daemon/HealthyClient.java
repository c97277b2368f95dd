package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * A well-behaved client beside a fuzz: on its own namespace, which nothing else touches, it puts 4 pages, gets them
 * back and counts their leading hits, round after round, and every few rounds gets some of its older pages (which a
 * small slab has evicted to L3). Every operation must succeed and every byte must be right; the first that is not is
 * kept and {@link #stop} throws it. {@link #verifyAll} then checks that every page it was told OK for is still there
 * with its bytes. A daemon without L3 drops pages when its slab is full (it is a cache then), so for one the client
 * stops putting at {@code maxPages} and only reads its pages from then on. Its own thread runs the rounds; not
 * otherwise thread-safe.
 */
final class HealthyClient implements AutoCloseable {
    private static final int PAGES_PER_ROUND = 4;
    private static final int OLD_PAGES = 8;
    private static final int VERIFY_BATCH = 64;

    private final RemotePageStore store;
    private final int pageBytes;
    private final int maxPages;
    private final SplittableRandom random;
    private final Namespace ns = Pages.namespace("healthy");
    private final Arena arena = Arena.ofShared();
    private final MemorySegment[] sources = new MemorySegment[PAGES_PER_ROUND];
    private final MemorySegment[] targets = new MemorySegment[VERIFY_BATCH];
    /** Pages the daemon answered OK to a put for: the thread appends, others read after {@link #stop}. */
    private final List<StoreKey> acknowledged = new ArrayList<>();

    private volatile boolean stopping;
    private volatile Throwable failure;
    private volatile int rounds;
    private Thread thread;

    /** A client of pages of {@code pageBytes} that puts at most {@code maxPages} (Integer.MAX_VALUE: no limit). */
    HealthyClient(RemotePageStore store, int pageBytes, int maxPages, long seed) {
        this.store = store;
        this.pageBytes = pageBytes;
        this.maxPages = maxPages;
        this.random = new SplittableRandom(seed);
        for (int i = 0; i < sources.length; i++) {
            sources[i] = arena.allocate(pageBytes);
        }
        for (int i = 0; i < targets.length; i++) {
            targets[i] = arena.allocate(pageBytes);
        }
    }

    /** Starts the rounds on a thread of its own. */
    HealthyClient start() {
        thread = Thread.ofPlatform().name("fuzz-healthy-client").start(() -> {
            try {
                while (!stopping && failure == null) {
                    round();
                    rounds++;
                    Thread.sleep(1); // the fuzz and the daemon share two cores with it
                }
            } catch (Throwable t) {
                failure = t;
            }
        });
        return this;
    }

    /** Fails now if an operation has failed so far. */
    void check() {
        if (failure != null) {
            throw new AssertionError("the healthy client failed after " + rounds + " rounds: " + failure, failure);
        }
    }

    /** Stops the rounds and returns how many there were; throws if any operation failed. */
    int stop() throws InterruptedException {
        stopping = true;
        thread.join(60_000);
        if (thread.isAlive()) {
            throw new AssertionError("the healthy client is stuck after " + rounds + " rounds");
        }
        check();
        return rounds;
    }

    /** Rounds done so far. */
    int rounds() {
        return rounds;
    }

    int pagesAcknowledged() {
        return acknowledged.size();
    }

    private void round() throws Exception {
        if (acknowledged.size() + PAGES_PER_ROUND > maxPages) {
            List<StoreKey> old = pick(OLD_PAGES);
            getAndCheck(old, "older pages");
            int hits = store.leadingHits(old, deadline()).get(60, TimeUnit.SECONDS);
            if (hits != old.size()) {
                throw new AssertionError("leading hits of " + old.size() + " stored pages: " + hits);
            }
            return;
        }
        List<StoreKey> keys = new ArrayList<>(PAGES_PER_ROUND);
        PageBatch.Builder b = PageBatch.builder(PAGES_PER_ROUND);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < PAGES_PER_ROUND; i++) {
            random.nextBytes(hash);
            StoreKey k = ns.key(PageHash.fromBytes(hash, 0));
            keys.add(k);
            PagePattern.fill(sources[i], k);
            b.add(k, sources[i]);
        }
        BatchResult put = store.put(b.build(), deadline()).get(60, TimeUnit.SECONDS);
        for (int i = 0; i < PAGES_PER_ROUND; i++) {
            if (put.status(i) == PageStatus.OK) {
                acknowledged.add(keys.get(i));
            }
        }
        if (put.count(PageStatus.OK) != PAGES_PER_ROUND) {
            throw new AssertionError("put: " + put);
        }
        getAndCheck(keys, "its new pages");
        int hits = store.leadingHits(keys, deadline()).get(60, TimeUnit.SECONDS);
        if (hits != PAGES_PER_ROUND) {
            throw new AssertionError("leading hits of 4 pages just put: " + hits);
        }
        if (rounds % 4 == 3) {
            getAndCheck(pick(OLD_PAGES), "older pages");
        }
    }

    /** {@code n} pages acknowledged so far, at random (some maybe twice). */
    private List<StoreKey> pick(int n) {
        List<StoreKey> old = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            old.add(acknowledged.get(random.nextInt(acknowledged.size())));
        }
        return old;
    }

    /** Gets every acknowledged page back (after {@link #stop}) and fails unless each is OK with its bytes. */
    void verifyAll() throws Exception {
        for (int from = 0; from < acknowledged.size(); from += VERIFY_BATCH) {
            getAndCheck(
                    acknowledged.subList(from, Math.min(acknowledged.size(), from + VERIFY_BATCH)),
                    "acknowledged pages after the phase (" + from + " of " + acknowledged.size() + " checked before)");
        }
    }

    private void getAndCheck(List<StoreKey> keys, String what) throws Exception {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            PagePattern.fillSentinel(targets[i]);
            b.add(keys.get(i), targets[i]);
        }
        BatchResult got = store.get(b.build(), deadline()).get(60, TimeUnit.SECONDS);
        for (int i = 0; i < keys.size(); i++) {
            if (got.status(i) != PageStatus.OK) {
                throw new AssertionError("get of " + what + ": page " + i + " is " + got.status(i) + " ("
                        + got.detail(i).orElse("") + "), acknowledged as stored: " + keys.get(i));
            }
            long at = PagePattern.firstMismatch(targets[i], keys.get(i), 0);
            if (at >= 0) {
                throw new AssertionError("get of " + what + ": page " + i + " has a wrong byte at " + at + " of "
                        + pageBytes + ": " + keys.get(i));
            }
        }
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    @Override
    public void close() {
        stopping = true;
        try {
            if (thread != null) {
                thread.join(60_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread == null || !thread.isAlive()) {
            arena.close(); // else leaked: the stuck thread may still use it
        }
    }
}
