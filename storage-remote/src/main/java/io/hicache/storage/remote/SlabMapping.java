package io.hicache.storage.remote;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.jspecify.annotations.Nullable;

/**
 * The daemon's slab file as seen by a same-host client: opened read-only at the first lease, and mapped piece by
 * piece, each lease's span in the lease's own arena (so that closing a lease unmaps what it could read).
 * Thread-safe; the store closes it.
 */
final class SlabMapping implements AutoCloseable {
    private final Path file;
    /** Opened at the first lease; null until then. */
    private @Nullable FileChannel channel;

    private boolean closed;

    SlabMapping(String file) {
        this.file = Path.of(file);
    }

    /**
     * Maps {@code length} bytes at {@code offset}, read-only, into {@code arena}.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the file cannot be opened: the client is
     *     on another host, or may not read the daemon's files
     */
    synchronized MemorySegment map(long offset, long length, Arena arena) {
        if (closed) {
            throw new HiCacheException(ErrorCode.STORE_CLOSED, "the store is closed");
        }
        try {
            FileChannel ch = channel;
            if (ch == null) {
                ch = FileChannel.open(file, StandardOpenOption.READ);
                channel = ch;
            }
            return ch.map(FileChannel.MapMode.READ_ONLY, offset, length, arena);
        } catch (IOException | UnsupportedOperationException e) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "cannot map the daemon's slab " + file
                            + " (leases work only on the daemon's host, for a user who may read its files): " + e,
                    e);
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        FileChannel ch = channel;
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException e) {
                // Read-only: nothing is lost.
            }
        }
    }
}
