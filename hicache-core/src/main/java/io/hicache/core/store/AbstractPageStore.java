package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;

/**
 * The skeleton of a {@link PageStore}: it checks arguments and the closed state, answers calls whose deadline
 * is already over without touching the backend, turns a backend's exceptions into per-page
 * {@link PageStatus#FAILED} outcomes (a broken backend must not kill the thread that called it), and counts
 * everything for {@link #stats()}. A backend implements the {@code do*} methods and sees only valid batches.
 *
 * <p>Thread-safe if the {@code do*} methods are.
 */
public abstract class AbstractPageStore implements PageStore {
    private static final System.Logger LOG = System.getLogger(AbstractPageStore.class.getName());

    private final String name;
    private final String location;
    private final StoreCapabilities capabilities;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Counters counters = new Counters();
    private final RateLimitedLog corruptLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));

    protected AbstractPageStore(String name, String location, StoreCapabilities capabilities) {
        this.name = Checks.checkNotNull(name, "name");
        this.location = Checks.checkNotNull(location, "location");
        this.capabilities = Checks.checkNotNull(capabilities, "capabilities");
    }

    /** Counts the leading stored keys; {@code keys} is non-empty and the deadline not yet over. */
    protected abstract CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline);

    /** Reads pages; targets are writable and no larger than the maximum page size. */
    protected abstract CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline);

    /** Writes pages; sources are no larger than the maximum page size. */
    protected abstract CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline);

    /** Removes pages; {@code keys} is non-empty. */
    protected abstract CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline);

    /** Removes one namespace's pages. */
    protected abstract CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline);

    /** Removes all pages. */
    protected abstract CompletableFuture<Void> doClearAll(Deadline deadline);

    /** Releases the store's resources; called once, by the first {@link #close()}. */
    protected abstract void doClose();

    /**
     * The index of the pages the store holds, if it keeps one: {@link #stats()} then takes the pages and bytes stored
     * from it. Empty by default.
     */
    protected Optional<PageUsageIndex<?>> usageIndex() {
        return Optional.empty();
    }

    /** Pages held now, or -1 if unknown: the {@linkplain #usageIndex() index}'s entries, by default. */
    protected long storedPages() {
        return usageIndex().map(index -> (long) index.size()).orElse(-1L);
    }

    /** Page bytes held now, or -1 if unknown: the {@linkplain #usageIndex() index}'s bytes, by default. */
    protected long storedBytes() {
        return usageIndex().map(PageUsageIndex::bytes).orElse(-1L);
    }

    /** The most page bytes the store will hold, or -1 for no limit. */
    protected long capacityBytes() {
        return -1;
    }

    @Override
    public final String name() {
        return name;
    }

    @Override
    public final String location() {
        return location;
    }

    @Override
    public final StoreCapabilities capabilities() {
        return capabilities;
    }

    @Override
    public final CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        checkKeys(keys);
        Checks.checkNotNull(deadline, "deadline");
        checkOpen();
        counters.leadingHitQueries.increment();
        if (keys.isEmpty() || deadline.isOver()) {
            return CompletableFuture.completedFuture(0);
        }
        return call(() -> doLeadingHits(keys, deadline)).handle((hits, error) -> {
            if (error != null) {
                report("leading-hit query", error);
                return 0;
            }
            return Math.clamp(hits == null ? 0 : hits, 0, keys.size());
        });
    }

    @Override
    public final CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        Checks.checkNotNull(targets, "targets");
        Checks.checkNotNull(deadline, "deadline");
        for (int i = 0; i < targets.size(); i++) {
            MemorySegment page = targets.page(i);
            Checks.requireArgument(!page.isReadOnly(), "targets[%d] is read-only: a get writes its targets", i);
            checkPageSize(page, i);
        }
        checkOpen();
        return run(targets.size(), deadline, "get", () -> doGet(targets, deadline))
                .thenApply(result -> counters.countGet(targets, result))
                .thenCompose(result -> removeCorrupt(targets, result, deadline));
    }

    /**
     * Whether a page a get found CORRUPT is deleted by this skeleton before the get completes (the default), so that
     * later reads miss it and leading-hit queries stop counting it (docs/keys.md, "read-side integrity"). A store
     * that removes such pages itself while reading, or whose pages live in other stores that do (a cluster's members),
     * says false.
     */
    protected boolean removesCorruptPages() {
        return true;
    }

    private volatile DroppedPages droppedPages = DroppedPages.NONE;

    @Override
    public final void onDropped(DroppedPages listener) {
        this.droppedPages = Checks.checkNotNull(listener, "listener");
    }

    /**
     * Tells the {@link #onDropped} listener that this store removed a page on its own (evicted it for capacity, or
     * found it damaged); a listener that throws is logged, never passed on.
     */
    protected final void dropped(String namespaceId, PageHash hash) {
        try {
            droppedPages.dropped(namespaceId, hash);
        } catch (RuntimeException e) {
            report("a dropped-pages listener", e);
        }
    }

    private CompletableFuture<BatchResult> removeCorrupt(PageBatch targets, BatchResult result, Deadline deadline) {
        List<StoreKey> corrupt = new ArrayList<>();
        for (int i = 0; i < result.size(); i++) {
            if (result.status(i) == PageStatus.CORRUPT) {
                corrupt.add(targets.key(i));
            }
        }
        if (corrupt.isEmpty()) {
            return CompletableFuture.completedFuture(result);
        }
        corruptLog.log("page store '" + name + "' at " + location + ": " + corrupt.size() + " page(s) failed their "
                + "checksum or identity check, e.g. " + corrupt.getFirst() + "; served as misses"
                + (removesCorruptPages() ? " and removed" : ""));
        if (!removesCorruptPages() || deadline.isOver() || closed.get()) {
            return CompletableFuture.completedFuture(result);
        }
        return call(() -> doDelete(corrupt, deadline)).handle((deleted, error) -> {
            if (error != null) {
                report("removal of corrupt pages", error);
            } else {
                counters.countDelete(deleted);
                for (int i = 0; i < deleted.size(); i++) {
                    if (deleted.status(i) == PageStatus.OK) {
                        dropped(corrupt.get(i).namespace().id(), corrupt.get(i).hash());
                    }
                }
            }
            return result;
        });
    }

    @Override
    public final CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        Checks.checkNotNull(sources, "sources");
        Checks.checkNotNull(deadline, "deadline");
        for (int i = 0; i < sources.size(); i++) {
            checkPageSize(sources.page(i), i);
        }
        checkOpen();
        return run(sources.size(), deadline, "put", () -> doPut(sources, deadline))
                .thenApply(result -> counters.countPut(sources, result));
    }

    @Override
    public final CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        checkKeys(keys);
        Checks.checkNotNull(deadline, "deadline");
        checkOpen();
        return run(keys.size(), deadline, "delete", () -> doDelete(keys, deadline))
                .thenApply(counters::countDelete);
    }

    @Override
    public final CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        Checks.checkNotNull(namespace, "namespace");
        return clearing(deadline, () -> doClear(namespace, deadline));
    }

    @Override
    public final CompletableFuture<Void> clearAll(Deadline deadline) {
        return clearing(deadline, () -> doClearAll(deadline));
    }

    private CompletableFuture<Void> clearing(Deadline deadline, Supplier<CompletableFuture<Void>> work) {
        Checks.checkNotNull(deadline, "deadline");
        checkOpen();
        if (deadline.isOver()) {
            return CompletableFuture.failedFuture(new HiCacheException(
                    ErrorCode.STORE_IO, "clear of page store '" + name + "' not started: deadline " + deadline));
        }
        return call(work);
    }

    @Override
    public final StoreStats stats() {
        return counters.snapshot(storedPages(), storedBytes(), capacityBytes());
    }

    @Override
    public final void close() {
        if (closed.compareAndSet(false, true)) {
            doClose();
        }
    }

    /** True once {@link #close()} was called. */
    protected final boolean isClosed() {
        return closed.get();
    }

    /**
     * Throws unless the store is open.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_CLOSED} naming the store
     */
    protected final void checkOpen() {
        if (closed.get()) {
            throw new HiCacheException(
                    ErrorCode.STORE_CLOSED, "page store '" + name + "' at " + location + " is closed");
        }
    }

    private void checkPageSize(MemorySegment page, int index) {
        Checks.requireArgument(
                page.byteSize() <= capabilities.maxPageBytes(),
                "page %d is %d bytes, over the %d-byte maximum of page store '%s'",
                index,
                page.byteSize(),
                capabilities.maxPageBytes(),
                name);
    }

    private static void checkKeys(List<StoreKey> keys) {
        Checks.checkNotNull(keys, "keys");
        for (int i = 0; i < keys.size(); i++) {
            Checks.checkNotNull(keys.get(i), "keys[" + i + "]");
        }
    }

    private CompletableFuture<BatchResult> run(
            int size, Deadline deadline, String what, Supplier<CompletableFuture<BatchResult>> work) {
        if (size == 0) {
            return CompletableFuture.completedFuture(BatchResult.of());
        }
        if (deadline.isOver()) {
            return CompletableFuture.completedFuture(
                    BatchResult.all(size, PageStatus.stoppedBy(deadline), what + " not started: deadline " + deadline));
        }
        return call(work).handle((result, error) -> {
            if (error != null) {
                report(what, error);
                return BatchResult.all(size, PageStatus.FAILED, what + " failed: " + unwrap(error));
            }
            if (result == null || result.size() != size) {
                String problem = "page store '" + name + "' returned "
                        + (result == null ? "no result" : result.size() + " outcomes") + " for a " + what + " of "
                        + size + " pages";
                report(what, new IllegalStateException(problem));
                return BatchResult.all(size, PageStatus.FAILED, problem);
            }
            return result;
        });
    }

    private static <T> CompletableFuture<T> call(Supplier<CompletableFuture<T>> work) {
        try {
            CompletableFuture<T> future = work.get();
            return future != null
                    ? future
                    : CompletableFuture.failedFuture(new IllegalStateException("the store returned no future"));
        } catch (RuntimeException | Error e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private void report(String what, Throwable error) {
        counters.backendErrors.increment();
        LOG.log(
                Level.WARNING,
                () -> "page store '" + name + "' at " + location + ": " + what + " failed",
                unwrap(error));
    }

    private static Throwable unwrap(Throwable t) {
        return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
    }

    /** Lock-free counters behind {@link #stats()}. */
    private static final class Counters {
        final LongAdder leadingHitQueries = new LongAdder();
        final LongAdder getPages = new LongAdder();
        final LongAdder getHits = new LongAdder();
        final LongAdder getMisses = new LongAdder();
        final LongAdder corruptPages = new LongAdder();
        final LongAdder putPages = new LongAdder();
        final LongAdder putStored = new LongAdder();
        final LongAdder putExisting = new LongAdder();
        final LongAdder putRejected = new LongAdder();
        final LongAdder deletedPages = new LongAdder();
        final LongAdder failedPages = new LongAdder();
        final LongAdder timedOutPages = new LongAdder();
        final LongAdder bytesRead = new LongAdder();
        final LongAdder bytesWritten = new LongAdder();
        final LongAdder backendErrors = new LongAdder();

        BatchResult countGet(PageBatch targets, BatchResult result) {
            getPages.add(result.size());
            for (int i = 0; i < result.size(); i++) {
                switch (result.status(i)) {
                    case OK -> {
                        getHits.increment();
                        bytesRead.add(targets.page(i).byteSize());
                    }
                    case MISS -> getMisses.increment();
                    case CORRUPT -> corruptPages.increment();
                    default -> countTrouble(result.status(i));
                }
            }
            return result;
        }

        BatchResult countPut(PageBatch sources, BatchResult result) {
            putPages.add(result.size());
            for (int i = 0; i < result.size(); i++) {
                switch (result.status(i)) {
                    case OK -> {
                        putStored.increment();
                        bytesWritten.add(sources.page(i).byteSize());
                    }
                    case EXISTS -> putExisting.increment();
                    case REJECTED -> putRejected.increment();
                    default -> countTrouble(result.status(i));
                }
            }
            return result;
        }

        BatchResult countDelete(BatchResult result) {
            for (int i = 0; i < result.size(); i++) {
                if (result.status(i) == PageStatus.OK) {
                    deletedPages.increment();
                } else {
                    countTrouble(result.status(i));
                }
            }
            return result;
        }

        private void countTrouble(PageStatus status) {
            switch (status) {
                case FAILED, SIZE_MISMATCH -> failedPages.increment();
                case TIMED_OUT, CANCELLED -> timedOutPages.increment();
                default -> {
                    // MISS on delete, EXISTS on get, ...: nothing to count
                }
            }
        }

        StoreStats snapshot(long storedPages, long storedBytes, long capacityBytes) {
            return new StoreStats(
                    leadingHitQueries.sum(),
                    getPages.sum(),
                    getHits.sum(),
                    getMisses.sum(),
                    corruptPages.sum(),
                    putPages.sum(),
                    putStored.sum(),
                    putExisting.sum(),
                    putRejected.sum(),
                    deletedPages.sum(),
                    failedPages.sum(),
                    timedOutPages.sum(),
                    backendErrors.sum(),
                    bytesRead.sum(),
                    bytesWritten.sum(),
                    storedPages,
                    storedBytes,
                    capacityBytes);
        }
    }
}
