package io.hicache.storage.file;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.stream.Stream;

/**
 * A local store's root folder, held for as long as the store is open: it is created if missing, marked as a HiCache
 * store (a folder that holds other things is refused, since clearing a store deletes what is in it), and locked, so
 * that one store at a time, in this process or another, owns it; the lock goes with the process if it dies.
 *
 * <p>Shared by the local stores ({@code file}, {@code rocksdb}). Not thread-safe; the store opens and closes it. Owns
 * the lock file's channel.
 */
public final class StoreRoot implements AutoCloseable {
    private static final String LOCK_FILE = ".lock";

    private final Path root;
    private final FileChannel lockChannel;
    private final FileLock lock;

    /**
     * Takes {@code root} for a store of kind {@code kind} (its marker file is {@code hicache-KIND-store}).
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the folder cannot be made, holds other
     *     things, or another store has it
     */
    public StoreRoot(Path root, String kind) {
        this.root = root.toAbsolutePath().normalize();
        Path marker = this.root.resolve("hicache-" + kind + "-store");
        try {
            Files.createDirectories(this.root);
            if (!Files.exists(marker)) {
                try (Stream<Path> entries = Files.list(this.root)) {
                    if (entries.anyMatch(p -> !p.getFileName().toString().equals(LOCK_FILE))) {
                        throw new HiCacheException(
                                ErrorCode.STORE_UNAVAILABLE,
                                this.root + " holds files and is not a "
                                        + kind
                                        + " store's root; a store deletes what is in its root when cleared, so give it an "
                                        + "empty or new folder");
                    }
                }
                Files.writeString(marker, "HiCache " + kind + " store, format 1\n", StandardCharsets.UTF_8);
            }
            this.lockChannel =
                    FileChannel.open(this.root.resolve(LOCK_FILE), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "cannot use " + this.root + " as a " + kind + " store's root: " + e,
                    e);
        }
        FileLock taken;
        try {
            taken = lockChannel.tryLock();
        } catch (OverlappingFileLockException e) {
            closeQuietly();
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    this.root + " is already open as a " + kind
                            + " store in this process; share that store instead of opening the folder twice");
        } catch (IOException e) {
            closeQuietly();
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "cannot lock " + this.root + ": " + e, e);
        }
        if (taken == null) {
            closeQuietly();
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    this.root + " is in use by another process's " + kind
                            + " store; use another folder, or the HiCache daemon to share one store between processes");
        }
        this.lock = taken;
        try {
            lockChannel
                    .truncate(0)
                    .write(ByteBuffer.wrap((ProcessHandle.current().pid() + "\n").getBytes(StandardCharsets.UTF_8)));
        } catch (IOException e) {
            // The pid is a courtesy for whoever looks; the lock is what counts.
        }
    }

    public Path path() {
        return root;
    }

    private void closeQuietly() {
        try {
            lockChannel.close();
        } catch (IOException e) {
            // nothing held yet
        }
    }

    @Override
    public void close() {
        try {
            lock.release();
        } catch (IOException e) {
            // closing the channel releases it too
        }
        closeQuietly();
    }
}
