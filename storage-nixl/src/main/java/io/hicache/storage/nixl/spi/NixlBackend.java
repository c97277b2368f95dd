package io.hicache.storage.nixl.spi;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * One backend made by a {@link NixlPlugin}: the south-bound interface an agent drives. Registration gives the backend a
 * chance to prepare per-region state (an open file, an object's name); transfers are prepared once from {@link Piece}s
 * over registered regions and posted any number of times, one post at a time.
 *
 * <p>Thread-safe. Owned by the agent that created it, which closes it after releasing its requests and
 * registrations.
 */
public interface NixlBackend extends AutoCloseable {
    /** The plugin's name. */
    String name();

    /** The memory types it serves. */
    Set<MemoryType> memoryTypes();

    /**
     * Prepares a region of a type it serves.
     *
     * @return the backend's state for the region (given back in {@link Piece}s and to {@link #deregister}), or null
     * @throws NixlException when the region cannot be used (its folder does not exist, a mode it cannot do)
     */
    @Nullable
    Object register(MemoryRegion region);

    /** Releases what {@link #register} made. Called once per registration, after its last transfer. */
    void deregister(MemoryRegion region, @Nullable Object state);

    /** Whether each storage region (FILE, OBJ) exists now; never fails as a whole (an error reads as false). */
    CompletableFuture<List<Boolean>> query(List<MemoryRegion> regions);

    /**
     * Prepares a transfer between local pieces (DRAM or VRAM) and storage pieces of the same count and lengths.
     *
     * @throws NixlException when the pieces cannot be moved by this backend ({@link NixlStatus#ERR_NOT_SUPPORTED},
     *     {@link NixlStatus#ERR_NOT_ALLOWED}, {@link NixlStatus#ERR_INVALID_PARAM})
     */
    Request prepare(XferOp op, List<Piece> local, List<Piece> remote);

    /** Releases threads, clients and buffers. */
    @Override
    void close();

    /** A transfer prepared by a backend. Posted by one thread at a time; cancel may come from any thread. */
    interface Request {
        /** Starts the transfer without blocking for I/O; {@code done} is called exactly once for this post. */
        void post(Completion done);

        /**
         * Stops issuing I/O, without blocking; the post's completion then reports {@link NixlStatus#ERR_CANCELED}
         * once nothing of it is in flight any more (it may still report success if everything had landed).
         */
        void cancel();

        /** Frees what {@link NixlBackend#prepare} made; never called while a post is in progress. */
        void release();
    }

    /** How a post ends. */
    @FunctionalInterface
    interface Completion {
        /** {@code status} is final; {@code detail} says why for an error and is null otherwise. */
        void complete(NixlStatus status, @Nullable String detail);
    }
}
