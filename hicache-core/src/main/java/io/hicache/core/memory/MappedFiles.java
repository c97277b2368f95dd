package io.hicache.core.memory;

import io.hicache.core.util.Checks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Files mapped into memory with their space reserved first: the one way HiCache maps a file it writes through memory
 * (the host pool's slab, the daemon's slab, a transfer region shared with another process). A sparse file on tmpfs takes
 * memory only as its pages are first written; if the tmpfs fills up meanwhile, that write kills the process with
 * SIGBUS. Reserving every block when the file is created ({@code posix_fallocate}) turns that into a clear error at
 * once, naming the file system and the room it has. Stateless and thread-safe; the caller's arena owns each mapping.
 */
public final class MappedFiles {
    private MappedFiles() {}

    /**
     * Creates {@code file} ({@code createNew}: it must not exist; else it may, and is grown) at {@code bytes}, its space
     * reserved, and maps it read-write in {@code arena}. A file this creates and cannot reserve or map is deleted.
     *
     * @throws IOException when the file system has too little room (the message names it and its free bytes), or the
     *     file cannot be created or mapped
     */
    public static MemorySegment create(Path file, long bytes, boolean createNew, Arena arena) throws IOException {
        Checks.checkPositive(bytes, "bytes");
        boolean existed = Files.exists(file);
        try (FileChannel channel = FileChannel.open(
                file,
                createNew ? StandardOpenOption.CREATE_NEW : StandardOpenOption.CREATE,
                StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            reserve(file, bytes, channel);
            return channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
        } catch (IOException | RuntimeException e) {
            if (!existed) {
                Files.deleteIfExists(file);
            }
            throw e;
        }
    }

    /** Maps the first {@code bytes} of existing {@code file} read-write in {@code arena} (its space reserved before). */
    public static MemorySegment open(Path file, long bytes, Arena arena) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
        }
    }

    /**
     * Bytes free for a new file in {@code folder}'s file system, or -1 when it cannot be told: for a check before a
     * large file is made, so the message can say how much would fit.
     */
    public static long usableBytes(Path folder) {
        try {
            FileStore fs = Files.getFileStore(folder);
            return fs.getUsableSpace();
        } catch (IOException e) {
            return -1;
        }
    }

    private static void reserve(Path file, long bytes, FileChannel channel) throws IOException {
        if (Fallocate.available()) {
            try {
                Fallocate.reserve(file, bytes);
            } catch (IOException e) {
                Path folder = file.toAbsolutePath().getParent();
                long free = folder == null ? -1 : usableBytes(folder);
                throw new IOException(
                        "cannot reserve " + bytes + " bytes for " + file
                                + (free < 0 ? "" : " (its file system has " + free + " bytes free)") + ": "
                                + e.getMessage(),
                        e);
            }
        } else {
            // No posix_fallocate: at least give the file its length (it stays sparse, as before reservation).
            channel.write(ByteBuffer.wrap(new byte[1]), bytes - 1);
        }
    }
}
