package io.hicache.storage.crypt;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The {@code encrypted} page store: every page encrypted with AES-256-GCM on its way into another store (the inner
 * store: file, rocksdb, s3, nixl, remote, memory, cluster) and authenticated and decrypted on its way out. The inner
 * store holds each page sealed ({@link SealedPageDescriptor}): a 44-byte header naming the key, the ciphertext, a
 * 16-byte tag, {@value #OVERHEAD_BYTES} bytes longer than the page; the tag also covers the page's store key, so bytes
 * copied under another key do not open. Callers see pages of their own length, as with any store.
 *
 * <h2>Reads that do not open</h2>
 * A page whose tag fails (damaged bytes, another page's bytes, an edited header) is {@link PageStatus#CORRUPT}: a miss,
 * counted ({@link CryptStats#authenticationFailures()}, and {@code corruptPages} in {@link #stats()}), and removed
 * from the inner store by {@link AbstractPageStore} before the get completes, as any store's corrupt page is. A page
 * sealed under a key id this store's key ring lacks (a key rotated out, a tenant's key taken away) is a
 * {@link PageStatus#MISS}, counted ({@link CryptStats#unknownKeyPages()}) and removed too: it can never open here, and
 * would otherwise block a fresh put of its key. A page sealed under another key with an id the ring holds (the key
 * check in its header differs: a key file gone wrong) is a MISS, counted ({@link CryptStats#wrongKeyPages()}) and
 * left in place, so that a bad key file cannot cost the store its pages. None of these ever throws or delivers
 * bytes.
 *
 * <h2>Memory and threads</h2>
 * A call stages its sealed pages in off-heap memory (as long as the batch plus {@value #OVERHEAD_BYTES} bytes a page),
 * taken from a pool of this store's ({@code encrypted.staging-pool-bytes} kept between calls) and given back when the
 * call completes; page bytes never go to the Java heap whole ({@link PageCipher}). Encryption and decryption run on {@code encrypted.threads} threads of this store
 * ({@code hicache-crypt-N}), a batch's pages split among them, never on the caller's thread nor on the inner store's
 * (an S3 event loop must not decrypt). A batch of 8 MiB or more goes between them and the inner store in runs (4 MiB
 * or more, up to 8), so that the inner store reads or writes one run while the crypto threads work on the next. Leading-hit queries, deletes and clears go to the inner store as they are, so
 * a leading hit may still be a page this store cannot open.
 *
 * <p>Thread-safe. The store owns the inner store: closing it closes the inner store and stops its threads; it takes
 * the inner store's {@link PageStore#onDropped} listener, to pass on what the inner store drops.
 */
public final class EncryptedPageStore extends AbstractPageStore {
    /** How many bytes longer a page is in the inner store: header and tag. */
    public static final int OVERHEAD_BYTES = SealedPageDescriptor.OVERHEAD_BYTES;

    /**
     * The largest page, whatever the inner store takes: a page is encrypted through one {@link java.nio.ByteBuffer}
     * view, which cannot pass 2 GiB; 1 GiB is also the largest page the page format allows.
     */
    static final long MAX_PAGE_BYTES = 1L << 30;

    /** A batch is passed between encryption and the inner store in runs of at least this many bytes. */
    private static final long PIPELINE_RUN_BYTES = 4L << 20;

    /** ... and in at most this many runs. */
    private static final int MAX_PIPELINE_RUNS = 8;

    /** Sealed pages at least this long start on a 4 KiB boundary of the staging memory, for inner stores' direct I/O. */
    private static final long BLOCK_ALIGNED_FROM_BYTES = 16 * 1024;

    private static final System.Logger LOG = System.getLogger(EncryptedPageStore.class.getName());

    private final PageStore inner;
    private final KeyRing keys;
    private final int threads;
    private final ExecutorService crypto;
    private final StagingPool staging;
    private final SecureRandom random = new SecureRandom();
    private final LongAdder authenticationFailures = new LongAdder();
    private final LongAdder unknownKeyPages = new LongAdder();
    private final LongAdder wrongKeyPages = new LongAdder();
    private final RateLimitedLog unreadableLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));

    /**
     * Counters of the encrypted store's own, beside {@link #stats()} (whose {@code corruptPages} and {@code getMisses}
     * include these pages): how many pages did not open, and why. An immutable snapshot.
     *
     * @param authenticationFailures pages found CORRUPT: their tag failed, or their header was not a sealed page's
     * @param unknownKeyPages        pages found sealed under a key id this store does not hold (a MISS; removed)
     * @param wrongKeyPages          pages found sealed under another key with an id this store holds (a MISS; left)
     */
    public record CryptStats(long authenticationFailures, long unknownKeyPages, long wrongKeyPages) {}

    private EncryptedPageStore(PageStore inner, CryptConfig config) {
        super(
                EncryptedPageStoreProvider.NAME,
                inner.name() + " store at " + inner.location(),
                capabilities(inner.capabilities()));
        this.inner = inner;
        this.keys = config.keys();
        this.threads = config.cryptoThreads();
        this.crypto = Executors.newFixedThreadPool(threads, Threads.factory("crypt"));
        this.staging = new StagingPool(config.stagingPoolBytes());
    }

    /**
     * Encrypts everything stored in {@code inner} with {@code config}'s keys; {@code config}'s inner store name is not
     * used (the provider opens the inner store by it). The returned store owns {@code inner} and closes it.
     *
     * @throws IllegalArgumentException if {@code inner} cannot hold a sealed page of even one byte
     */
    public static EncryptedPageStore wrap(PageStore inner, CryptConfig config) {
        Checks.checkNotNull(inner, "inner");
        Checks.checkNotNull(config, "config");
        EncryptedPageStore store = new EncryptedPageStore(inner, config);
        // What the inner store removes on its own (capacity eviction, its own checks) are this store's pages: whoever
        // listens to this store hears of them. Pages this store finds CORRUPT are removed by its skeleton, which tells
        // its listener itself (the inner store sees an ordinary delete).
        inner.onDropped(store::dropped);
        return store;
    }

    private static StoreCapabilities capabilities(StoreCapabilities inner) {
        Checks.requireArgument(
                inner.maxPageBytes() > OVERHEAD_BYTES,
                "the inner store's largest page (%d bytes) cannot hold the %d bytes of header and tag",
                inner.maxPageBytes(),
                OVERHEAD_BYTES);
        return new StoreCapabilities(
                inner.features(),
                Math.min(MAX_PAGE_BYTES, inner.maxPageBytes() - OVERHEAD_BYTES),
                inner.preferredBatchKeys());
    }

    /** The store that holds the sealed pages (for tools and tests: what it returns is ciphertext). */
    public PageStore inner() {
        return inner;
    }

    /** The key ring: which key ids it holds and which one new pages are sealed under. */
    public KeyRing keys() {
        return keys;
    }

    /** How many pages did not open, and why, since the store opened. Cheap; callable after close. */
    public CryptStats cryptStats() {
        return new CryptStats(authenticationFailures.sum(), unknownKeyPages.sum(), wrongKeyPages.sum());
    }

    /* ---------------------------------------------------------------- reads */

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        int n = targets.size();
        long[] offsets = new long[n];
        int[] bounds = runs(targets);
        StagingPool.Buffer buffer = staging.take(layout(targets, offsets));
        PageBatch[] runs = new PageBatch[bounds.length - 1];
        MemorySegment[] sealed;
        try {
            sealed = slices(buffer, targets, offsets);
            for (int r = 0; r < runs.length; r++) {
                runs[r] = PageBatch.of(
                        targets.keys().subList(bounds[r], bounds[r + 1]),
                        Arrays.asList(sealed).subList(bounds[r], bounds[r + 1]));
            }
        } catch (RuntimeException | Error e) {
            staging.giveBack(buffer);
            throw e;
        }
        // Each run is decrypted as soon as the inner store has read it, while it reads the next ones.
        PageOutcome[] outcomes = new PageOutcome[n];
        boolean[] retired = new boolean[n];
        CompletableFuture<?>[] parts = new CompletableFuture<?>[runs.length];
        // The inner store is asked for the runs last run first, one after another, so that it uses a batch (a chain,
        // first page first) last page first, as it does a batch of one run: its eviction then takes the chain's suffix
        // first (leaf-first). Decryption of a run overlaps the inner read of the next.
        CompletableFuture<?> turn = CompletableFuture.completedFuture(null);
        for (int r = runs.length - 1; r >= 0; r--) {
            int from = bounds[r];
            int to = bounds[r + 1];
            PageBatch run = runs[r];
            CompletableFuture<BatchResult> read =
                    turn.handle((v, e) -> null).thenCompose(v -> call(() -> inner.get(run, deadline)));
            turn = read;
            parts[r] = read.thenCompose(found ->
                            perPage(from, to, i -> open(targets, sealed, found, i - from, i, retired, deadline)))
                    .handle((opened, error) -> fill(outcomes, from, to, opened, error, "get"));
        }
        // allOf completes after every run has filled its outcomes, and only then is the staging memory given back.
        return CompletableFuture.allOf(parts)
                .thenCompose(v -> removeRetired(targets, retired, outcomes, deadline))
                .whenComplete((result, error) -> staging.giveBack(buffer));
    }

    /**
     * Opens page {@code i} of the batch, which the inner store answered as page {@code at} of {@code found}; marks it in
     * {@code retired} when it was encrypted under a key this store no longer holds, so that it is removed before the get
     * completes.
     */
    private PageOutcome open(
            PageBatch targets,
            MemorySegment[] sealed,
            BatchResult found,
            int at,
            int i,
            boolean[] retired,
            Deadline deadline) {
        PageStatus status = found.status(at);
        MemorySegment target = targets.page(i);
        if (status == PageStatus.SIZE_MISMATCH) {
            return PageOutcome.of(
                    status,
                    "the stored page is not " + target.byteSize() + " bytes (the " + inner.name() + " store holds it "
                            + OVERHEAD_BYTES + " bytes longer, encrypted: "
                            + found.detail(at).orElse("its length differs") + ")");
        }
        if (status != PageStatus.OK) {
            return new PageOutcome(status, found.detail(at).orElse(null));
        }
        if (deadline.isOver()) {
            return PageOutcome.of(PageStatus.stoppedBy(deadline), "the deadline passed before the page was decrypted");
        }
        StoreKey key = targets.key(i);
        PageCipher.Result opened;
        try {
            opened = PageCipher.open(keys, key, sealed[i], target);
        } catch (GeneralSecurityException e) {
            return PageOutcome.of(PageStatus.FAILED, "AES-GCM failed: " + e);
        }
        String keyId = opened.keyId().orElse("?");
        return switch (opened.outcome()) {
            case OK -> PageOutcome.OK;
            case MALFORMED -> {
                authenticationFailures.increment();
                yield PageOutcome.of(
                        PageStatus.CORRUPT, "not an encrypted page: its header is damaged or was never written");
            }
            case AUTHENTICATION_FAILED -> {
                authenticationFailures.increment();
                yield PageOutcome.of(
                        PageStatus.CORRUPT,
                        "failed AES-GCM authentication under key '" + keyId
                                + "': its bytes were changed, or are another page's");
            }
            case UNKNOWN_KEY -> {
                unknownKeyPages.increment();
                retired[i] = true;
                yield unreadable(
                        key,
                        "was encrypted under key '" + keyId + "', which " + keysText() + " lacks",
                        "served as a miss and removed");
            }
            case WRONG_KEY -> {
                wrongKeyPages.increment();
                yield unreadable(
                        key,
                        "was encrypted under a key named '" + keyId + "' that is not this store's key '" + keyId
                                + "' (the key check in its header differs)",
                        "served as a miss and left in place");
            }
        };
    }

    private PageOutcome unreadable(StoreKey key, String why, String what) {
        unreadableLog.log("encrypted store over " + location() + ": page " + key + " " + why + "; " + what);
        return PageOutcome.of(PageStatus.MISS, "page " + why);
    }

    /**
     * Removes the pages of a get encrypted under key ids this store does not hold (a key rotated out, a tenant's key
     * taken away), before the get completes: they can never open here, and a put of the same key would find it
     * stored and skip it. Told to the dropped-pages listener as a corrupt page is. A page under another key with an id
     * this store holds is left alone: that is a key file gone wrong, which must not cost the store its pages.
     */
    private CompletableFuture<BatchResult> removeRetired(
            PageBatch targets, boolean[] retired, PageOutcome[] outcomes, Deadline deadline) {
        BatchResult result = result(outcomes);
        List<StoreKey> gone = new ArrayList<>();
        for (int i = 0; i < retired.length; i++) {
            if (retired[i]) {
                gone.add(targets.key(i));
            }
        }
        if (gone.isEmpty() || deadline.isOver() || isClosed()) {
            return CompletableFuture.completedFuture(result);
        }
        CompletableFuture<BatchResult> removal;
        try {
            removal = inner.delete(gone, deadline);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "encrypted store: removing pages under keys it lacks failed", e);
            return CompletableFuture.completedFuture(result);
        }
        return removal.handle((deleted, error) -> {
            if (error != null) {
                LOG.log(Level.WARNING, "encrypted store: removing pages under keys it lacks failed", error);
            } else {
                for (int j = 0; j < deleted.size(); j++) {
                    if (deleted.status(j) == PageStatus.OK) {
                        dropped(gone.get(j).namespace().id(), gone.get(j).hash());
                    }
                }
            }
            return result;
        });
    }

    private String keysText() {
        return "this store's key ring (" + String.join(", ", keys.keyIds()) + ")";
    }

    /* ---------------------------------------------------------------- writes */

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        int n = sources.size();
        long[] offsets = new long[n];
        int[] bounds = runs(sources);
        StagingPool.Buffer buffer = staging.take(layout(sources, offsets));
        MemorySegment[] sealed;
        try {
            sealed = slices(buffer, sources, offsets);
        } catch (RuntimeException | Error e) {
            staging.giveBack(buffer);
            throw e;
        }
        // Each run goes to the inner store as soon as it is encrypted, while the next ones are encrypted.
        PageOutcome[] outcomes = new PageOutcome[n];
        CompletableFuture<?>[] parts = new CompletableFuture<?>[bounds.length - 1];
        // Runs are encrypted at once, and put into the inner store last run first, one after another (as reads are,
        // for leaf-first eviction in the inner store).
        CompletableFuture<?> turn = CompletableFuture.completedFuture(null);
        for (int r = parts.length - 1; r >= 0; r--) {
            int from = bounds[r];
            int to = bounds[r + 1];
            CompletableFuture<?> previous = turn.handle((v, e) -> null);
            CompletableFuture<PageOutcome[]> put = perPage(from, to, i -> seal(sources, sealed, i, deadline))
                    .thenCombine(previous, (encrypted, v) -> encrypted)
                    .thenCompose(encrypted -> putSealed(sources, sealed, from, encrypted, deadline));
            turn = put;
            parts[r] = put.handle((done, error) -> fill(outcomes, from, to, done, error, "put"));
        }
        return CompletableFuture.allOf(parts)
                .thenApply(v -> result(outcomes))
                .whenComplete((result, error) -> staging.giveBack(buffer));
    }

    private PageOutcome seal(PageBatch sources, MemorySegment[] sealed, int i, Deadline deadline) {
        if (deadline.isOver()) {
            return PageOutcome.of(PageStatus.stoppedBy(deadline), "the deadline passed before the page was encrypted");
        }
        StoreKey key = sources.key(i);
        try {
            PageCipher.seal(keys.forWrite(key.namespace().tenant()), key, sources.page(i), sealed[i], random);
            return PageOutcome.OK;
        } catch (GeneralSecurityException e) {
            return PageOutcome.of(PageStatus.FAILED, "AES-GCM failed: " + e);
        }
    }

    /** Puts the pages of the run from {@code from} that were encrypted; the run's outcomes. */
    private CompletableFuture<PageOutcome[]> putSealed(
            PageBatch sources, MemorySegment[] sealed, int from, PageOutcome[] encrypted, Deadline deadline) {
        PageOutcome[] outcomes = encrypted.clone();
        PageBatch.Builder toInner = PageBatch.builder(outcomes.length);
        int[] index = new int[outcomes.length];
        int n = 0;
        for (int j = 0; j < outcomes.length; j++) {
            if (outcomes[j].status() == PageStatus.OK) {
                toInner.add(sources.key(from + j), sealed[from + j]);
                index[n++] = j;
            }
        }
        if (n == 0) {
            return CompletableFuture.completedFuture(outcomes);
        }
        int stored = n;
        PageBatch batch = toInner.build();
        return call(() -> inner.put(batch, deadline)).thenApply(put -> {
            for (int k = 0; k < stored; k++) {
                outcomes[index[k]] =
                        new PageOutcome(put.status(k), put.detail(k).orElse(null));
            }
            return outcomes;
        });
    }

    /* ---------------------------------------------------------------- the rest goes to the inner store */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        return inner.leadingHits(keys, deadline);
    }

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        return inner.delete(keys, deadline);
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return inner.clear(namespace, deadline);
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return inner.clearAll(deadline);
    }

    @Override
    protected void doClose() {
        try {
            inner.close();
        } finally {
            // Work already queued still runs (and gives its staging memory back); new work is refused, failing its
            // call. Staging memory on loan is freed as it comes back.
            crypto.shutdown();
            staging.close();
        }
    }

    /** Pages held now, as the inner store counts them. */
    @Override
    protected long storedPages() {
        return inner.stats().storedPages();
    }

    /** Bytes held now, as the inner store counts them: each page {@value #OVERHEAD_BYTES} bytes longer. */
    @Override
    protected long storedBytes() {
        return inner.stats().storedBytes();
    }

    @Override
    protected long capacityBytes() {
        return inner.stats().capacityBytes();
    }

    /* ---------------------------------------------------------------- helpers */

    /**
     * Where each page of {@code batch} goes, sealed, in one staging buffer (into {@code offsets}), and the buffer's
     * length: each slice is {@link #OVERHEAD_BYTES} longer than its page, 4 KiB-aligned for pages of 16 KiB and more
     * (so that an inner store with direct I/O need not bounce them), else 64-byte aligned.
     */
    private static long layout(PageBatch batch, long[] offsets) {
        long total = 0;
        for (int i = 0; i < batch.size(); i++) {
            long bytes = SealedPageDescriptor.sealedBytes(batch.page(i).byteSize());
            long alignment = bytes >= BLOCK_ALIGNED_FROM_BYTES ? 4096 : 64;
            total = (total + alignment - 1) & -alignment;
            offsets[i] = total;
            total += bytes;
        }
        return total;
    }

    private static MemorySegment[] slices(StagingPool.Buffer buffer, PageBatch batch, long[] offsets) {
        MemorySegment[] sealed = new MemorySegment[batch.size()];
        for (int i = 0; i < sealed.length; i++) {
            sealed[i] = buffer.memory()
                    .asSlice(
                            offsets[i],
                            SealedPageDescriptor.sealedBytes(batch.page(i).byteSize()));
        }
        return sealed;
    }

    /**
     * Splits a batch into runs of neighbouring pages that are passed between the crypto threads and the inner store
     * one after another, so that the two overlap: up to {@value #MAX_PIPELINE_RUNS} runs of at least
     * {@value #PIPELINE_RUN_BYTES} bytes (a batch smaller than two such runs is one run). Returns the bounds: run
     * {@code r} is pages {@code bounds[r]} to {@code bounds[r + 1]} (exclusive).
     */
    private static int[] runs(PageBatch batch) {
        int n = batch.size();
        long pieces = Math.min(Math.min(MAX_PIPELINE_RUNS, n), batch.totalBytes() / PIPELINE_RUN_BYTES);
        int count = (int) Math.max(1, pieces);
        int[] bounds = new int[count + 1];
        for (int r = 0; r <= count; r++) {
            bounds[r] = (int) ((long) n * r / count);
        }
        return bounds;
    }

    /**
     * Runs {@code work} for pages {@code from .. to-1} on the crypto threads, split into up to {@code threads} runs of
     * neighbours; completes with their outcomes (index 0 is page {@code from}) when every page has one. A page whose
     * work throws is FAILED, so one bad page never loses the others' outcomes.
     */
    private CompletableFuture<PageOutcome[]> perPage(int from, int to, IntFunction<PageOutcome> work) {
        int count = to - from;
        PageOutcome[] outcomes = new PageOutcome[count];
        int runs = Math.min(threads, count);
        CompletableFuture<?>[] parts = new CompletableFuture<?>[runs];
        try {
            for (int r = 0; r < runs; r++) {
                int first = from + (int) ((long) count * r / runs);
                int end = from + (int) ((long) count * (r + 1) / runs);
                parts[r] = CompletableFuture.runAsync(
                        () -> {
                            for (int i = first; i < end; i++) {
                                try {
                                    outcomes[i - from] = work.apply(i);
                                } catch (RuntimeException e) {
                                    outcomes[i - from] = PageOutcome.of(PageStatus.FAILED, "encrypted store: " + e);
                                }
                            }
                        },
                        crypto);
            }
        } catch (RejectedExecutionException e) {
            // The store closed while the call was in flight: these pages fail, as calls in flight at close may. Work
            // already submitted finishes before the call completes and its staging memory is given back.
            CompletableFuture<?>[] started =
                    Arrays.stream(parts).filter(p -> p != null).toArray(CompletableFuture<?>[]::new);
            return CompletableFuture.allOf(started).handle((v, error) -> {
                throw new IllegalStateException("the encrypted store was closed during the call", e);
            });
        }
        // allOf completes after every run, so each run's writes to the array are visible to what follows.
        return CompletableFuture.allOf(parts).thenApply(v -> outcomes);
    }

    /**
     * Copies a run's outcomes into the batch's; a run that failed as a whole (the inner store's call failed, or the
     * store closed under it) gives each of its pages FAILED, saying why, and is logged.
     */
    private @Nullable Void fill(
            PageOutcome[] outcomes,
            int from,
            int to,
            PageOutcome @Nullable [] run,
            @Nullable Throwable error,
            String what) {
        if (run != null && error == null) {
            System.arraycopy(run, 0, outcomes, from, to - from);
            return null;
        }
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        LOG.log(
                Level.WARNING,
                () -> "encrypted store over " + location() + ": a " + what + " of " + (to - from) + " pages failed",
                cause);
        Arrays.fill(outcomes, from, to, PageOutcome.of(PageStatus.FAILED, what + " failed: " + cause));
        return null;
    }

    /** {@code work}'s future; an exception it throws becomes a failed future (the runs around it go on). */
    private static <T> CompletableFuture<T> call(Supplier<CompletableFuture<T>> work) {
        try {
            return work.get();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private static BatchResult result(PageOutcome[] outcomes) {
        BatchResult.Builder b = BatchResult.builder(outcomes.length);
        for (int i = 0; i < outcomes.length; i++) {
            b.set(i, outcomes[i]);
        }
        return b.build();
    }
}
