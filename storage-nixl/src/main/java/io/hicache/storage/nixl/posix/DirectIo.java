package io.hicache.storage.nixl.posix;

import io.hicache.core.util.Checks;
import io.hicache.core.util.DirectIoOption;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.OpenOption;
import org.jspecify.annotations.Nullable;

/**
 * Positional reads and writes of whole ranges between files and off-heap memory, buffered or with {@code O_DIRECT}.
 * With direct I/O a range whose file offset, length and memory address are all block-aligned moves straight between
 * the file and the caller's memory; any other goes through a block-aligned bounce buffer, block by block, read first
 * where a write covers part of a block. Stateless apart from the block size.
 */
final class DirectIo {
    /** The JDK's {@code O_DIRECT} option, or null without one ({@link DirectIoOption}). */
    static final @Nullable OpenOption DIRECT = DirectIoOption.DIRECT;

    private final int blockBytes;

    DirectIo(int blockBytes) {
        this.blockBytes = blockBytes;
    }

    /** Reads {@code target.byteSize()} bytes at {@code offset}; a file that ends first is an error. */
    void read(FileChannel ch, boolean direct, MemorySegment target, long offset, @Nullable MemorySegment bounce)
            throws IOException {
        if (!direct || aligned(target, offset)) {
            readFully(ch, target.asByteBuffer(), offset, true);
            return;
        }
        Checks.checkNotNull(bounce, "the bounce buffer (direct I/O gets one)");
        long end = offset + target.byteSize();
        for (long pos = offset; pos < end; ) {
            long start = floor(pos);
            long chunkEnd = Math.min(end, start + bounce.byteSize() - blockBytes);
            MemorySegment window = bounce.asSlice(0, ceil(chunkEnd) - start);
            int got = readFully(ch, window.asByteBuffer(), start, false);
            if (got < chunkEnd - start) {
                throw new EOFException("the file ends at " + (start + got) + ", before " + chunkEnd);
            }
            MemorySegment.copy(window, pos - start, target, pos - offset, chunkEnd - pos);
            pos = chunkEnd;
        }
    }

    /** Writes all of {@code source} at {@code offset}. */
    void write(FileChannel ch, boolean direct, MemorySegment source, long offset, @Nullable MemorySegment bounce)
            throws IOException {
        if (!direct || aligned(source, offset)) {
            writeFully(ch, source.asByteBuffer(), offset);
            return;
        }
        Checks.checkNotNull(bounce, "the bounce buffer (direct I/O gets one)");
        long end = offset + source.byteSize();
        for (long pos = offset; pos < end; ) {
            long start = floor(pos);
            long chunkEnd = Math.min(end, start + bounce.byteSize() - blockBytes);
            MemorySegment window = bounce.asSlice(0, ceil(chunkEnd) - start);
            if (pos != start || chunkEnd != start + window.byteSize()) {
                // Part of a block: keep what the file holds around it (zeros past its end).
                window.fill((byte) 0);
                readFully(ch, window.asByteBuffer(), start, false);
            }
            MemorySegment.copy(source, pos - offset, window, pos - start, chunkEnd - pos);
            writeFully(ch, window.asByteBuffer(), start);
            pos = chunkEnd;
        }
    }

    private boolean aligned(MemorySegment memory, long offset) {
        return memory.address() % blockBytes == 0 && offset % blockBytes == 0 && memory.byteSize() % blockBytes == 0;
    }

    private long floor(long pos) {
        return pos - pos % blockBytes;
    }

    private long ceil(long pos) {
        return floor(pos + blockBytes - 1);
    }

    /**
     * Reads until {@code into} is full or the file ends. A short read ends it too when {@code !mustFill}: with direct
     * I/O a short read means the end of the file, and reading on from an unaligned position would fail.
     */
    private static int readFully(FileChannel ch, ByteBuffer into, long offset, boolean mustFill) throws IOException {
        int total = 0;
        while (into.hasRemaining()) {
            int wanted = into.remaining();
            int n = ch.read(into, offset + total);
            if (n < 0 || (!mustFill && n < wanted)) {
                if (mustFill) {
                    throw new EOFException(
                            "the file ends at " + (offset + total) + ", " + into.remaining() + " bytes short");
                }
                return total + Math.max(n, 0);
            }
            total += n;
        }
        return total;
    }

    private static void writeFully(FileChannel ch, ByteBuffer from, long offset) throws IOException {
        long at = offset;
        while (from.hasRemaining()) {
            at += ch.write(from, at);
        }
    }

    /** Refuses direct I/O where the JDK has no {@code O_DIRECT}. */
    static void checkAvailable() {
        if (DIRECT == null) {
            throw new NixlException(NixlStatus.ERR_NOT_SUPPORTED, "this JDK has no O_DIRECT open option");
        }
    }
}
