package io.hicache.bench.server;

import io.hicache.core.key.Namespace;
import io.hicache.core.store.PageChecksum;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A minimal same-host client of the daemon for the {@code server} suite, written as the Python client's same-host path
 * is: one blocking connection speaking version 2 with CRC-32C, the slab file named by HELLO mapped whole once
 * (read-only for leases, read-write for reservations), LEASE asking for no checksums (flag 0x01) and RELEASE, RESERVE
 * and COMMIT, and a batched PUT over the socket for the TCP reference. One request at a time; not thread-safe.
 */
final class SameHostClient implements AutoCloseable {
    private static final long TIMEOUT_MILLIS = 60_000;
    private static final int NO_CHECKSUMS = 0x01;

    private final SocketChannel socket;
    private final Arena arena = Arena.ofShared();
    /** The slab, read-only: where leased pages are read. */
    final MemorySegment slab;
    /** The same file, read-write: where reserved pages are written. */
    private final MemorySegment writable;

    private long nextId = 1;

    /** Offsets in the slab of a lease's or a reservation's pages, all OK. */
    record Granted(long id, long[] offsets) {}

    SameHostClient(int port) throws IOException {
        socket = SocketChannel.open(new InetSocketAddress("127.0.0.1", port));
        try {
            socket.socket().setTcpNoDelay(true);
            ByteBuf hello = Codec.beginFrame(Unpooled.buffer(64), Wire.HELLO, nextId++, TIMEOUT_MILLIS);
            hello.writeInt(Wire.MAGIC).writeShort(Wire.VERSION_2);
            Codec.writeString(hello, "");
            hello.writeByte(0); // CRC-32C, the daemon's own checksum: nothing to convert
            ByteBuf answer = call(Codec.endFrame(hello));
            answer.skipBytes(2 + 4 + 4);
            Path file = Path.of(Codec.readString(answer));
            try (FileChannel ro = FileChannel.open(file, StandardOpenOption.READ);
                    FileChannel rw = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                slab = ro.map(FileChannel.MapMode.READ_ONLY, 0, ro.size(), arena);
                writable = rw.map(FileChannel.MapMode.READ_WRITE, 0, rw.size(), arena);
            }
        } catch (IOException | RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Leases {@code hashes} of {@code ns}, each {@code pageBytes} long, without checksums; every page must be OK. */
    Granted lease(Namespace ns, byte[][] hashes, int pageBytes) throws IOException {
        ByteBuf out = keysFrame(Wire.LEASE, ns, hashes, pageBytes);
        out.writeInt((int) TIMEOUT_MILLIS);
        out.setByte(5, NO_CHECKSUMS);
        ByteBuf in = call(Codec.endFrame(out));
        long id = in.readLong();
        long[] offsets = new long[checkCount(in, hashes.length)];
        for (int i = 0; i < offsets.length; i++) {
            byte status = in.readByte();
            in.skipBytes(8);
            offsets[i] = in.readLong();
            requireOk(status, "lease", i);
        }
        return new Granted(id, offsets);
    }

    /** Ends a lease or abandons a reservation; false if it had already ended. */
    boolean release(long id) throws IOException {
        ByteBuf out = Codec.beginFrame(Unpooled.buffer(32), Wire.RELEASE, nextId++, TIMEOUT_MILLIS);
        out.writeLong(id);
        return call(Codec.endFrame(out)).readByte() == 1;
    }

    /**
     * Stores {@code pages} under {@code hashes} the same-host way: RESERVE, a copy of each page into the mapped slab
     * and its CRC-32C, COMMIT. Every page must be OK.
     */
    void putLocal(Namespace ns, byte[][] hashes, MemorySegment[] pages) throws IOException {
        int pageBytes = (int) pages[0].byteSize();
        ByteBuf out = keysFrame(Wire.RESERVE, ns, hashes, pageBytes);
        out.writeInt((int) TIMEOUT_MILLIS);
        ByteBuf in = call(Codec.endFrame(out));
        long id = in.readLong();
        int n = checkCount(in, hashes.length);
        int[] crcs = new int[n];
        for (int i = 0; i < n; i++) {
            byte status = in.readByte();
            long offset = in.readLong();
            requireOk(status, "reserve", i);
            MemorySegment.copy(pages[i], 0, writable, offset, pageBytes);
            crcs[i] = PageChecksum.of(pages[i]);
        }
        ByteBuf commit = Codec.beginFrame(Unpooled.buffer(32 + 4 * n), Wire.COMMIT, nextId++, TIMEOUT_MILLIS);
        commit.writeLong(id).writeInt(n);
        for (int crc : crcs) {
            commit.writeInt(crc);
        }
        ByteBuf done = call(Codec.endFrame(commit));
        checkCount(done, n);
        for (int i = 0; i < n; i++) {
            requireOk(done.readByte(), "commit", i);
        }
    }

    /** Stores {@code pages} under {@code hashes} with one PUT over the socket (CRC-32C of each). Every page must be OK. */
    void putTcp(Namespace ns, byte[][] hashes, MemorySegment[] pages) throws IOException {
        int n = hashes.length;
        ByteBuf head = Codec.beginFrame(Unpooled.buffer(256 + n * 40), Wire.PUT, nextId++, TIMEOUT_MILLIS);
        Codec.writeNamespace(head, ns);
        head.writeInt(n);
        long bodies = 0;
        for (int i = 0; i < n; i++) {
            head.writeBytes(hashes[i]).writeInt((int) pages[i].byteSize()).writeInt(PageChecksum.of(pages[i]));
            bodies += pages[i].byteSize();
        }
        head.setInt(0, (int) (head.readableBytes() - 4 + bodies));
        ByteBuffer[] all = new ByteBuffer[n + 1];
        all[0] = head.nioBuffer();
        for (int i = 0; i < n; i++) {
            all[i + 1] = pages[i].asByteBuffer();
        }
        long left = head.readableBytes() + bodies;
        while (left > 0) {
            left -= socket.write(all);
        }
        ByteBuf in = answer();
        checkCount(in, n);
        for (int i = 0; i < n; i++) {
            requireOk(in.readByte(), "put", i);
        }
    }

    private ByteBuf keysFrame(byte op, Namespace ns, byte[][] hashes, int pageBytes) {
        ByteBuf out = Codec.beginFrame(Unpooled.buffer(256 + hashes.length * 36), op, nextId++, TIMEOUT_MILLIS);
        Codec.writeNamespace(out, ns);
        out.writeInt(hashes.length);
        for (byte[] hash : hashes) {
            out.writeBytes(hash).writeInt(pageBytes);
        }
        return out;
    }

    private static int checkCount(ByteBuf in, int expected) {
        int n = in.readInt();
        if (n != expected) {
            throw new IllegalStateException("the daemon answered " + n + " pages for " + expected);
        }
        return n;
    }

    private static void requireOk(byte status, String what, int page) {
        if (status != 0) {
            throw new IllegalStateException(
                    "the daemon answered the " + what + " of page " + page + " with " + Wire.status(status));
        }
    }

    /** Sends one frame and returns its answer's payload (after the header). */
    private ByteBuf call(ByteBuf frame) throws IOException {
        ByteBuffer out = frame.nioBuffer();
        while (out.hasRemaining()) {
            socket.write(out);
        }
        return answer();
    }

    private ByteBuf answer() throws IOException {
        ByteBuffer length = ByteBuffer.allocate(4);
        readFully(length);
        ByteBuffer frame = ByteBuffer.allocate(length.getInt(0));
        readFully(frame);
        ByteBuf in = Unpooled.wrappedBuffer(frame.flip());
        byte op = in.readByte();
        in.skipBytes(Wire.HEADER_BYTES - 1);
        if (op == Wire.ERROR) {
            int code = in.readUnsignedShort();
            String message = in.readCharSequence(in.readUnsignedShort(), StandardCharsets.UTF_8)
                    .toString();
            throw new IllegalStateException("the daemon answered " + Wire.errorName(code) + ": " + message);
        }
        return in;
    }

    private void readFully(ByteBuffer into) throws IOException {
        while (into.hasRemaining()) {
            if (socket.read(into) < 0) {
                throw new IOException("the daemon closed the connection");
            }
        }
    }

    @Override
    public void close() throws IOException {
        try {
            socket.close();
        } finally {
            arena.close();
        }
    }
}
