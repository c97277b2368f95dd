package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireCodec.*;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A wire client written from {@code docs/protocol.md} alone, over a plain socket: the bytes are {@link DocWireCodec}'s.
 * Not thread-safe, except that {@link #write} and {@link #read} may be used from two threads.
 */
final class DocWireClient implements AutoCloseable {
    private static final AtomicLong IDS = new AtomicLong(1000);

    // ---- the connection ----

    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;

    private DocWireClient(Socket socket) throws IOException {
        this.socket = socket;
        this.in = new DataInputStream(socket.getInputStream());
        this.out = new DataOutputStream(socket.getOutputStream());
    }

    /** Connects to 127.0.0.1:{@code port}; reads wait at most 10 s. Sends nothing. */
    static DocWireClient connect(int port) throws IOException {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
        s.setTcpNoDelay(true);
        s.setSoTimeout(10_000);
        return new DocWireClient(s);
    }

    /** Connects and says HELLO with the empty token. */
    static DocWireClient open(int port) throws IOException {
        DocWireClient c = connect(port);
        c.hello("");
        return c;
    }

    static long nextId() {
        return IDS.incrementAndGet();
    }

    /** Says HELLO with {@code token}; fails unless it is accepted. */
    HelloAnswer hello(String token) throws IOException {
        long id = nextId();
        write(frame(HELLO, id, 0, helloPayload(token)));
        Frame f = read();
        if (f.id() != id) {
            throw new AssertionError("HELLO " + id + " answered with id " + f.id());
        }
        return helloAnswer(f);
    }

    /** Writes {@code parts} in one go (so that they arrive together, pipelined). */
    synchronized void write(byte[]... parts) throws IOException {
        int n = Arrays.stream(parts).mapToInt(p -> p.length).sum();
        ByteBuffer all = ByteBuffer.allocate(n);
        for (byte[] p : parts) {
            all.put(p);
        }
        out.write(all.array());
        out.flush();
    }

    /** Reads one frame; EOFException when the daemon has closed the connection. */
    Frame read() throws IOException {
        long length = Integer.toUnsignedLong(in.readInt());
        if (length < HEADER_BYTES || length > (1L << 28)) {
            throw new AssertionError("an answer declared length " + length);
        }
        int op = in.readUnsignedByte();
        int flags = in.readUnsignedByte();
        int reserved = in.readUnsignedShort();
        long id = in.readLong();
        long timeout = Integer.toUnsignedLong(in.readInt());
        byte[] payload = new byte[(int) length - HEADER_BYTES];
        in.readFully(payload);
        return new Frame(op, flags, reserved, id, timeout, payload);
    }

    /** Sends one request and reads the next frame, which must carry its id. */
    Frame call(int op, long timeoutMs, byte[] payload) throws IOException {
        long id = nextId();
        write(frame(op, id, timeoutMs, payload));
        Frame f = read();
        if (f.id() != id) {
            throw new AssertionError("request " + id + " answered by " + f);
        }
        return f;
    }

    /** Sends one request and fails unless the answer is ERROR {@code code}; returns its message. */
    String callError(int op, long timeoutMs, byte[] payload, int code) throws IOException {
        Frame f = call(op, timeoutMs, payload);
        if (!f.isError() || f.errorCode() != code) {
            throw new AssertionError("expected ERROR " + code + ", got " + f);
        }
        expectCleanHeader(f);
        return f.errorMessage();
    }

    /**
     * Fails unless the daemon closes the connection within 5 s with nothing more sent: the next read ends (EOF or
     * reset), no frame arrives.
     */
    void expectClosed() throws IOException {
        socket.setSoTimeout(5_000);
        try {
            int b = in.read();
            if (b >= 0) {
                throw new AssertionError("expected the connection closed, but more bytes came: " + tryRest(b));
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("expected the daemon to close the connection; it stayed open", e);
        } catch (SocketException e) {
            // reset: closed
        }
    }

    private String tryRest(int first) {
        try {
            byte[] more = new byte[Math.min(in.available(), 64)];
            int n = in.read(more);
            return HexFormat.of().formatHex(new byte[] {(byte) first})
                    + HexFormat.of().formatHex(more, 0, Math.max(n, 0));
        } catch (IOException e) {
            return Integer.toHexString(first);
        }
    }

    /** Reads the next frame; fails unless it is ERROR {@code code} with request id {@code id}. */
    Frame expectError(int code, long id) throws IOException {
        Frame f;
        try {
            f = read();
        } catch (EOFException | SocketException e) {
            throw new AssertionError("expected ERROR " + code + " (request id " + id + "), the connection closed", e);
        } catch (SocketTimeoutException e) {
            throw new AssertionError("expected ERROR " + code + " (request id " + id + "), nothing came", e);
        }
        if (!f.isError() || f.errorCode() != code || f.id() != id) {
            throw new AssertionError("expected ERROR " + code + " with request id " + id + ", got " + f);
        }
        expectCleanHeader(f);
        return f;
    }

    void setReadTimeout(int ms) throws IOException {
        socket.setSoTimeout(ms);
    }

    // ---- operations, one at a time ----

    long leadingHits(Ns ns, long timeoutMs, List<byte[]> hashes) throws IOException {
        Frame f = call(LEADING_HITS, timeoutMs, hashesPayload(ns, hashes));
        expectOp(f, LEADING_HITS);
        Reader r = f.reader();
        long hits = r.u32();
        r.end();
        return hits;
    }

    long leadingHits(Ns ns, List<Page> pages) throws IOException {
        return leadingHits(ns, 0, hashes(pages));
    }

    int[] put(Ns ns, long timeoutMs, List<Page> pages) throws IOException {
        return statuses(call(PUT, timeoutMs, putPayload(ns, pages)), PUT);
    }

    int[] put(Ns ns, Page... pages) throws IOException {
        return put(ns, 0, List.of(pages));
    }

    List<PageAnswer> get(Ns ns, long timeoutMs, List<Page> pages) throws IOException {
        return getAnswer(call(GET, timeoutMs, getPayload(ns, pages)));
    }

    List<PageAnswer> get(Ns ns, Page... pages) throws IOException {
        return get(ns, 0, List.of(pages));
    }

    int[] delete(Ns ns, long timeoutMs, List<byte[]> hashes) throws IOException {
        return statuses(call(DELETE, timeoutMs, hashesPayload(ns, hashes)), DELETE);
    }

    LeaseAnswer lease(Ns ns, long timeoutMs, List<Page> pages, long holdMs) throws IOException {
        return leaseAnswer(call(LEASE, timeoutMs, leasePayload(ns, pages, holdMs)));
    }

    /** RELEASE; returns {@code released}. */
    int release(long leaseId) throws IOException {
        Frame f = call(RELEASE, 0, new Buf().u64(leaseId).done());
        expectOp(f, RELEASE);
        Reader r = f.reader();
        int released = r.u8();
        r.end();
        return released;
    }

    /** HEALTH; returns {@code state}. */
    int health() throws IOException {
        Frame f = call(HEALTH, 0, new byte[0]);
        expectOp(f, HEALTH);
        Reader r = f.reader();
        int state = r.u8();
        r.end();
        return state;
    }

    /** STATS; returns the text. */
    String stats() throws IOException {
        Frame f = call(STATS, 0, new byte[0]);
        expectOp(f, STATS);
        Reader r = f.reader();
        byte[] text = r.bytes((int) r.u32());
        r.end();
        return new String(text, StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
