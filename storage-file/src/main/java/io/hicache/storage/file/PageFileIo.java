package io.hicache.storage.file;

import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.core.util.Checks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * Reads and writes single page files, buffered or with direct I/O ({@code O_DIRECT}, through
 * {@code DirectIoProbe.DIRECT}). Page bytes move between the caller's off-heap memory and the
 * file with no copy in buffered mode; with direct I/O too when the memory is block-aligned, except for the last
 * partial block, which goes through a block-aligned bounce buffer (so does all of an unaligned page, a chunk at a
 * time).
 *
 * <p>Thread-safe: each call takes a bounce buffer of its own from a pool sized to the I/O threads. Owns the bounce
 * buffers; the store closes it after its I/O threads have stopped.
 */
final class PageFileIo implements AutoCloseable {
    private static final int BOUNCE_BYTES = 1 << 20;

    private final PagePaths paths;
    private final boolean directIo;
    private final boolean fsync;
    private final int blockSize;
    private final Arena arena = Arena.ofShared();
    private final BlockingQueue<MemorySegment> bounces;
    private final OpenOption[] writeOptions;
    private final OpenOption[] readOptions;

    PageFileIo(PagePaths paths, boolean directIo, boolean fsync, int blockSize, int ioThreads) {
        this.paths = paths;
        this.directIo = directIo;
        this.fsync = fsync;
        this.blockSize = blockSize;
        this.bounces = new ArrayBlockingQueue<>(ioThreads);
        for (int i = 0; i < ioThreads; i++) {
            bounces.add(arena.allocate(BOUNCE_BYTES, Math.max(blockSize, 4096)));
        }
        this.writeOptions = directIo
                ? new OpenOption[] {StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, DirectIoProbe.DIRECT}
                : new OpenOption[] {StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE};
        this.readOptions = directIo
                ? new OpenOption[] {StandardOpenOption.READ, DirectIoProbe.DIRECT}
                : new OpenOption[] {StandardOpenOption.READ};
    }

    /** Where the page's bytes start in a file this store writes. */
    int dataOffset() {
        return directIo ? blockSize : PageFileHeader.BYTES;
    }

    /** The size of the file that holds a page of {@code pageBytes}: what counts against the capacity. */
    long fileBytes(long pageBytes) {
        return dataOffset() + (directIo ? roundUp(pageBytes) : pageBytes);
    }

    private long roundUp(long bytes) {
        return (bytes + blockSize - 1) / blockSize * blockSize;
    }

    /**
     * Writes {@code page} to a temporary file and renames it into place as the page {@code id}; with fsync, also
     * flushes the file and its folder first. Removes the temporary file if anything fails.
     */
    void write(PageId id, MemorySegment page, int crc) throws IOException, InterruptedException {
        Path temp = paths.tempFile(id);
        Path target = paths.pageFile(id);
        MemorySegment bounce = bounces.take();
        try {
            try (FileChannel ch = FileChannel.open(temp, writeOptions)) {
                PageFileHeader header = new PageFileHeader(dataOffset(), page.byteSize(), crc, id);
                if (directIo) {
                    writeDirect(ch, header, page, bounce);
                } else {
                    ByteBuffer head = ByteBuffer.allocate(PageFileHeader.BYTES);
                    header.writeTo(MemorySegment.ofBuffer(head));
                    writeFully(ch, new ByteBuffer[] {head, page.asByteBuffer()});
                }
                if (fsync) {
                    ch.force(true);
                }
            }
            Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
            if (fsync) {
                try (FileChannel dir = FileChannel.open(target.getParent(), StandardOpenOption.READ)) {
                    dir.force(true);
                }
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(temp);
            throw e;
        } finally {
            bounces.add(bounce);
        }
    }

    private void writeDirect(FileChannel ch, PageFileHeader header, MemorySegment page, MemorySegment bounce)
            throws IOException {
        long length = page.byteSize();
        MemorySegment headBlock = bounce.asSlice(0, blockSize);
        headBlock.fill((byte) 0);
        header.writeTo(headBlock);
        if (page.address() % blockSize == 0) {
            long whole = length - length % blockSize;
            int tail = (int) (length - whole);
            MemorySegment tailBlock = bounce.asSlice(blockSize, blockSize);
            if (tail > 0) {
                tailBlock.fill((byte) 0);
                MemorySegment.copy(page, whole, tailBlock, 0, tail);
            }
            List<ByteBuffer> parts = new ArrayList<>(3);
            parts.add(headBlock.asByteBuffer());
            if (whole > 0) {
                parts.add(page.asSlice(0, whole).asByteBuffer());
            }
            if (tail > 0) {
                parts.add(tailBlock.asByteBuffer());
            }
            writeFully(ch, parts.toArray(ByteBuffer[]::new));
            return;
        }
        // Unaligned memory: everything through the bounce buffer, the header block first.
        writeFully(ch, new ByteBuffer[] {headBlock.asByteBuffer()});
        for (long done = 0; done < length; ) {
            int chunk = (int) Math.min(BOUNCE_BYTES, length - done);
            int padded = (int) roundUp(chunk);
            MemorySegment.copy(page, done, bounce, 0, chunk);
            bounce.asSlice(chunk, padded - chunk).fill((byte) 0);
            writeFully(ch, new ByteBuffer[] {bounce.asSlice(0, padded).asByteBuffer()});
            done += chunk;
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer[] parts) throws IOException {
        long left = 0;
        for (ByteBuffer b : parts) {
            left += b.remaining();
        }
        while (left > 0) {
            long n = ch.write(parts);
            if (n <= 0) {
                throw new IOException("the file system accepted no bytes");
            }
            left -= n;
        }
    }

    /**
     * Reads the page {@code id} into {@code target}, checking the header and the page's checksum. MISS when there is
     * no file; SIZE_MISMATCH (target untouched) when the page's length differs; CORRUPT when the header, the name
     * or the checksum is wrong, or the file is cut short.
     */
    PageOutcome read(PageId id, MemorySegment target) throws IOException, InterruptedException {
        Path file = paths.pageFile(id);
        MemorySegment bounce = bounces.take();
        try (FileChannel ch = FileChannel.open(file, readOptions)) {
            int headRead = directIo ? blockSize : PageFileHeader.BYTES;
            ByteBuffer head = bounce.asSlice(0, headRead).asByteBuffer();
            if (readFully(ch, head, 0) < PageFileHeader.BYTES) {
                return corrupt("the file is shorter than its header");
            }
            PageFileHeader header;
            try {
                header = PageFileHeader.readFrom(bounce);
            } catch (PageFileHeader.BadHeaderException e) {
                return corrupt(Checks.checkNotNull(e.getMessage(), "a bad header's reason"));
            }
            if (!header.id().equals(id)) {
                return corrupt("the file holds page " + header.id());
            }
            if (header.pageBytes() != target.byteSize()) {
                return PageOutcome.of(
                        PageStatus.SIZE_MISMATCH,
                        "stored page is " + header.pageBytes() + " bytes, target is " + target.byteSize());
            }
            if (ch.size() < header.dataOffset() + header.pageBytes()) {
                return corrupt(
                        "the file is cut short: " + ch.size() + " bytes for a " + header.pageBytes() + "-byte page");
            }
            if (directIo && header.dataOffset() % blockSize == 0) {
                readDirect(ch, header.dataOffset(), target, bounce);
            } else if (directIo) {
                // Written by a store without direct I/O: its data is not block-aligned, read it the ordinary way.
                try (FileChannel plain = FileChannel.open(file, StandardOpenOption.READ)) {
                    readBody(plain, header.dataOffset(), target);
                }
            } else {
                readBody(ch, header.dataOffset(), target);
            }
            if (PageChecksum.of(target) != header.pageCrc()) {
                return corrupt("page checksum mismatch");
            }
            return PageOutcome.OK;
        } catch (NoSuchFileException e) {
            return PageOutcome.MISS;
        } finally {
            bounces.add(bounce);
        }
    }

    private static PageOutcome corrupt(String why) {
        return PageOutcome.of(PageStatus.CORRUPT, why);
    }

    private static void readBody(FileChannel ch, long position, MemorySegment target) throws IOException {
        ByteBuffer body = target.asByteBuffer();
        if (readFully(ch, body, position) < target.byteSize()) {
            throw new IOException("the page file ended early");
        }
    }

    private void readDirect(FileChannel ch, long position, MemorySegment target, MemorySegment bounce)
            throws IOException {
        long length = target.byteSize();
        if (target.address() % blockSize == 0) {
            long whole = length - length % blockSize;
            if (whole > 0 && readFully(ch, target.asSlice(0, whole).asByteBuffer(), position) < whole) {
                throw new IOException("the page file ended early");
            }
            if (whole < length) {
                ByteBuffer tail = bounce.asSlice(0, blockSize).asByteBuffer();
                if (readFully(ch, tail, position + whole) < length - whole) {
                    throw new IOException("the page file ended early");
                }
                MemorySegment.copy(bounce, 0, target, whole, length - whole);
            }
            return;
        }
        for (long done = 0; done < length; ) {
            int chunk = (int) Math.min(BOUNCE_BYTES, length - done);
            ByteBuffer buffer = bounce.asSlice(0, roundUp(chunk)).asByteBuffer();
            if (readFully(ch, buffer, position + done) < chunk) {
                throw new IOException("the page file ended early");
            }
            MemorySegment.copy(bounce, 0, target, done, chunk);
            done += chunk;
        }
    }

    /** Reads until {@code buffer} is full or the file ends; returns the bytes read. */
    private static long readFully(FileChannel ch, ByteBuffer buffer, long position) throws IOException {
        long read = 0;
        while (buffer.hasRemaining()) {
            int n = ch.read(buffer, position + read);
            if (n < 0) {
                break;
            }
            read += n;
        }
        return read;
    }

    @Override
    public void close() {
        arena.close();
    }
}
