package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A page store: the L3 tier, where pages live beyond host memory (a disk, RocksDB, S3, NIXL, a remote
 * daemon). The one SPI every backend implements, batched and asynchronous, in its final shape.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li><b>Pages are immutable under their key.</b> A key names the tokens and the namespace, so two puts of
 *       one key carry the same bytes; a put of a stored key may skip the write ({@link PageStatus#EXISTS}).
 *   <li><b>Per-page outcomes.</b> get, put and delete complete with a {@link BatchResult} holding one
 *       status per key, in order. I/O trouble with some pages never fails the whole call.
 *   <li><b>Verified reads.</b> Every stored page carries a checksum that get checks; a page that fails it is
 *       {@link PageStatus#CORRUPT}, a miss, never wrong bytes reported as {@link PageStatus#OK}.
 *   <li><b>Memory.</b> Pages move between the store and caller-owned off-heap memory ({@link PageBatch});
 *       the store never keeps a reference to it. Only a target whose page is OK holds page bytes;
 *       MISS and SIZE_MISMATCH leave the target untouched, and after any other status its bytes are
 *       undefined (a read may have stopped halfway).
 *   <li><b>Deadlines.</b> Every call takes a {@link Deadline}. Pages not done when it passes (or is
 *       cancelled) are reported as TIMED_OUT (or CANCELLED), and the future completes promptly after it.
 *       When a future completes, the store has stopped touching the batch's memory. Cancelling the
 *       returned future does not stop the work: cancel the deadline.
 *   <li><b>Errors.</b> Bad arguments throw {@link IllegalArgumentException} from the call itself, before any
 *       I/O. Calls on a closed store throw {@link HiCacheException} with {@link ErrorCode#STORE_CLOSED}.
 * </ul>
 *
 * <p>Implementations are thread-safe: any number of calls may run at once from any threads. Most should
 * extend {@link AbstractPageStore}, which does the checks and the counting. The opener of a store closes it.
 */
public interface PageStore extends AutoCloseable {
    /** The provider's name ({@code file}, {@code s3}, ...). */
    String name();

    /** Where the pages live, for logs: a folder, a bucket and prefix, an address. */
    String location();

    /** What this store declares about itself. */
    StoreCapabilities capabilities();

    /**
     * Counts how many of {@code keys}, from the first, are stored: it stops at the first missing key even
     * if later ones are stored. This is the prefetch query: the usable part of a prefix ends at its first
     * missing page. A key it cannot check before the deadline, or because of an error, counts as missing.
     */
    CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline);

    /** Reads each page into its target, which must be writable and exactly the stored page's length. */
    CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline);

    /** Stores each page from its source; a key already stored may be skipped ({@link PageStatus#EXISTS}). */
    CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline);

    /** Removes the pages; OK for each removed, MISS for each that was not stored. */
    CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline);

    /** Removes every page of {@code namespace} and no other. */
    CompletableFuture<Void> clear(Namespace namespace, Deadline deadline);

    /** Removes every page of every namespace: what SGLang's flush does to L3. */
    CompletableFuture<Void> clearAll(Deadline deadline);

    /**
     * Sets who is told of the pages this store removes on its own (capacity eviction, damaged pages), replacing the
     * previous listener ({@link DroppedPages#NONE} to stop). Stores that never drop pages on their own, or cannot say
     * which (a remote daemon's own eviction), tell nobody: the default.
     */
    default void onDropped(DroppedPages listener) {}

    /** Counters since opening, and what the store holds now. Cheap; callable at any time, also after close. */
    StoreStats stats();

    /**
     * Closes the store and releases what it holds (threads, handles, connections), exactly once; later calls
     * do nothing. Calls still in flight complete, possibly as FAILED. Pages stay where they are stored.
     */
    @Override
    void close();
}
