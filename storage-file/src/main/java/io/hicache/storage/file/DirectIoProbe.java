package io.hicache.storage.file;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.DirectIoOption;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.jspecify.annotations.Nullable;

/**
 * Checks at open that the root's file system takes direct I/O, so {@code file.direct-io=true} on one that does not
 * (some network and FUSE file systems; tmpfs takes it since Linux 6.6) fails with a message at start-up rather than on every page. Stateless.
 */
final class DirectIoProbe {
    /** The JDK's {@code O_DIRECT} open option, or null without one ({@link DirectIoOption}). */
    static final @Nullable OpenOption DIRECT = DirectIoOption.DIRECT;

    private DirectIoProbe() {}

    static void check(Path root, int blockSize) {
        if (DIRECT == null) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "file.direct-io is on, but this JDK has no O_DIRECT open option; turn file.direct-io off");
        }
        Path probe = root.resolve(".direct-io-probe");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment block = arena.allocate(blockSize, blockSize);
            block.fill((byte) 0x5A);
            try (FileChannel ch = FileChannel.open(
                    probe,
                    StandardOpenOption.CREATE,
                    StandardOpenOption.WRITE,
                    StandardOpenOption.READ,
                    StandardOpenOption.TRUNCATE_EXISTING,
                    DIRECT)) {
                ch.write(block.asByteBuffer(), 0);
                block.fill((byte) 0);
                ch.read(block.asByteBuffer(), 0);
            }
            if (block.get(ValueLayout.JAVA_BYTE, blockSize - 1) != 0x5A) {
                throw new IOException("a block written with direct I/O read back differently");
            }
        } catch (IOException | UnsupportedOperationException e) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "file.direct-io is on, but the file system of " + root + " does not take direct I/O (" + e
                            + "); turn file.direct-io off or use a disk file system",
                    e);
        } finally {
            try {
                Files.deleteIfExists(probe);
            } catch (IOException e) {
                // a leftover probe is harmless
            }
        }
    }
}
