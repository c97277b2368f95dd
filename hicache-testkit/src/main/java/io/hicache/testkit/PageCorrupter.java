package io.hicache.testkit;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStore;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Damages one stored page behind the store's back (flips bytes on disk, in an object, in memory) without
 * updating its checksum, so the kit can check that the store reads it as a miss. A store's test supplies one
 * when its pages can be reached from outside; the corruption case is skipped for stores without one.
 * Called from the test thread only.
 */
@FunctionalInterface
public interface PageCorrupter {
    /** Corrupts the stored page {@code key} of {@code store}; the page must exist. */
    void corrupt(PageStore store, StoreKey key) throws Exception;

    /** Flips the byte in the middle of {@code file}, for stores that keep a page per file. */
    static void flipMiddleByte(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long middle = ch.size() / 2;
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, middle);
            b.put(0, (byte) ~b.get(0)).rewind();
            ch.write(b, middle);
        }
    }
}
