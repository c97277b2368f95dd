package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.config.Setting;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * A slow L3 for the daemon's tests: an in-memory store, shared by name across daemons of one JVM (so a second daemon
 * finds in L3 what a first one wrote behind), that answers reads, deletes and clears only after a delay, with the
 * caller's deadline (a store honouring it answers TIMED_OUT then). Puts are not delayed; the first
 * {@code delaying.failed-puts} puts of each page fail (FAILED), to test the write-behind's retries. Clears may be late
 * by another delay ({@code delaying.clear-delay}), and may block their caller for it and ignore their deadline, as
 * the file store's do ({@code delaying.blocking-clears}). Thread-safe.
 */
final class DelayingPageStore extends ForwardingPageStore {
    private static final Map<String, InMemoryPageStore> SHARED = new ConcurrentHashMap<>();
    /** Clears asked of each shared store (CLEAR and CLEAR_ALL alike). */
    private static final Map<String, AtomicInteger> CLEARS = new ConcurrentHashMap<>();

    private final InMemoryPageStore inner;
    private final AtomicInteger clears;
    private final Executor later;
    private final Executor laterClears;
    private final Duration clearDelay;
    private final boolean blockingClears;
    private final int failedPuts;
    private final Map<StoreKey, AtomicInteger> putTries = new ConcurrentHashMap<>();

    private DelayingPageStore(
            InMemoryPageStore inner,
            AtomicInteger clears,
            Duration delay,
            Duration clearDelay,
            boolean blockingClears,
            int failedPuts) {
        super(inner);
        this.inner = inner;
        this.clears = clears;
        this.later = CompletableFuture.delayedExecutor(delay.toNanos(), TimeUnit.NANOSECONDS);
        this.laterClears = CompletableFuture.delayedExecutor(clearDelay.toNanos(), TimeUnit.NANOSECONDS);
        this.clearDelay = clearDelay;
        this.blockingClears = blockingClears;
        this.failedPuts = failedPuts;
    }

    /** A clear, late: answered after the clear delay, or (blocking) done in the caller's thread after it. */
    private CompletableFuture<Void> lateClear(Supplier<CompletableFuture<Void>> call) {
        clears.incrementAndGet();
        if (!blockingClears) {
            return CompletableFuture.supplyAsync(() -> null, laterClears).thenCompose(ignored -> call.get());
        }
        try {
            Thread.sleep(clearDelay.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return CompletableFuture.failedFuture(e);
        }
        return call.get();
    }

    /** How many clears the shared store {@code name} has been asked for. */
    static int clears(String name) {
        AtomicInteger n = CLEARS.get(name);
        return n == null ? 0 : n.get();
    }

    /** Forgets the shared store {@code name}. */
    static void drop(String name) {
        CLEARS.remove(name);
        InMemoryPageStore s = SHARED.remove(name);
        if (s != null) {
            s.close();
        }
    }

    private <T> CompletableFuture<T> late(Supplier<CompletableFuture<T>> call) {
        return CompletableFuture.supplyAsync(() -> null, later).thenCompose(ignored -> call.get());
    }

    @Override
    public String name() {
        return "delaying";
    }

    @Override
    public String location() {
        return "memory, late";
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return late(() -> inner.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return late(() -> inner.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        if (failedPuts == 0) {
            return inner.put(sources, deadline);
        }
        BatchResult.Builder out = BatchResult.builder(sources.size());
        for (int i = 0; i < sources.size(); i++) {
            if (putTries.computeIfAbsent(sources.key(i), k -> new AtomicInteger())
                            .incrementAndGet()
                    <= failedPuts) {
                out.set(i, PageStatus.FAILED, "injected failure");
            } else {
                out.set(
                        i,
                        inner.put(PageBatch.of(List.of(sources.key(i)), List.of(sources.page(i))), deadline)
                                .join()
                                .status(0));
            }
        }
        return CompletableFuture.completedFuture(out.build());
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return late(() -> inner.delete(keys, deadline));
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return lateClear(() -> inner.clear(namespace, blockingClears ? Deadline.after(Duration.ofHours(1)) : deadline));
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return lateClear(() -> inner.clearAll(blockingClears ? Deadline.after(Duration.ofHours(1)) : deadline));
    }

    @Override
    public void close() {
        // the shared store outlives this daemon: drop() closes it
    }

    /** Opens the store under the name {@code delaying}. Stateless. */
    public static final class Provider implements PageStoreProvider {
        static final Setting<Duration> DELAY =
                Setting.duration("delaying.delay", "0ms", "how late reads, deletes and clears answer");
        static final Setting<String> SHARED_NAME =
                Setting.string("delaying.shared", "default", "the shared store's name");
        static final Setting<Integer> FAILED_PUTS = Setting.integer(
                "delaying.failed-puts", 0, 0, Integer.MAX_VALUE, "how many puts of each page fail before one succeeds");
        static final Setting<Duration> CLEAR_DELAY =
                Setting.duration("delaying.clear-delay", null, "how late clears answer (default: delaying.delay)");
        static final Setting<Boolean> BLOCKING_CLEARS = Setting.bool(
                "delaying.blocking-clears",
                false,
                "clears block their caller for their delay and ignore their deadline, as the file store's do");

        @Override
        public String name() {
            return "delaying";
        }

        @Override
        public String description() {
            return "tests only: a shared in-memory store that answers late";
        }

        @Override
        public List<Setting<?>> settings() {
            return List.of(DELAY, SHARED_NAME, FAILED_PUTS, CLEAR_DELAY, BLOCKING_CLEARS);
        }

        @Override
        public PageStore open(StoreConfig config) {
            InMemoryPageStore backing =
                    SHARED.computeIfAbsent(config.settings().get(SHARED_NAME), n -> new InMemoryPageStore(256L << 20));
            Duration delay = config.settings().get(DELAY);
            AtomicInteger clears = CLEARS.computeIfAbsent(config.settings().get(SHARED_NAME), n -> new AtomicInteger());
            return new DelayingPageStore(
                    backing,
                    clears,
                    delay,
                    CLEAR_DELAY.find(config.settings()).orElse(delay),
                    config.settings().get(BLOCKING_CLEARS),
                    config.settings().get(FAILED_PUTS));
        }
    }
}
