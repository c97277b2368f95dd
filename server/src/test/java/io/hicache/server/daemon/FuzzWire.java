package io.hicache.server.daemon;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.testkit.PagePattern;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Well-formed requests with a deadline (timeout_ms) for the fuzz, over pages whose bytes are the pattern of their key
 * ({@link PagePattern}), and strict readers of their answers: an answer that does not parse exactly (counts, lengths,
 * bytes left over) fails the test. All keys of one request share a namespace. Stateless.
 */
final class FuzzWire {
    /** The size of the fuzz's pages. */
    static final int PAGE = 4096;

    /** A page as a GET or LEASE answers it; {@code body} for an OK page of a GET, {@code offset} for a LEASE. */
    record Page(PageStatus status, int length, int crc, long offset, byte[] body) {}

    /** A LEASE's answer. */
    record Lease(long id, List<Page> pages) {}

    private FuzzWire() {}

    static byte[] frame(int op, long id, int timeoutMillis, Consumer<ByteBuf> payload) {
        ByteBuf b = Unpooled.buffer();
        try {
            Codec.beginFrame(b, op, id, timeoutMillis);
            payload.accept(b);
            return ByteBufUtil.getBytes(Codec.endFrame(b));
        } finally {
            b.release();
        }
    }

    /** The bytes every writer of {@code key} puts: its pattern. */
    static byte[] body(StoreKey key, int length) {
        byte[] b = new byte[length];
        PagePattern.fill(MemorySegment.ofArray(b), key);
        return b;
    }

    static byte[] put(long id, int timeoutMillis, List<StoreKey> keys, int length) {
        List<byte[]> bodies = new ArrayList<>(keys.size());
        keys.forEach(k -> bodies.add(body(k, length)));
        return frame(Wire.PUT, id, timeoutMillis, b -> {
            Codec.writeNamespace(b, keys.getFirst().namespace());
            b.writeInt(keys.size());
            for (int i = 0; i < keys.size(); i++) {
                Codec.writeHash(b, keys.get(i).hash());
                b.writeInt(length);
                b.writeInt(PageChecksum.of(MemorySegment.ofArray(bodies.get(i))));
            }
            bodies.forEach(b::writeBytes);
        });
    }

    static byte[] get(long id, int timeoutMillis, List<StoreKey> keys, int length) {
        return frame(Wire.GET, id, timeoutMillis, b -> keysWithLengths(b, keys, length));
    }

    static byte[] lease(long id, int timeoutMillis, List<StoreKey> keys, int length, int holdMillis) {
        return frame(Wire.LEASE, id, timeoutMillis, b -> {
            keysWithLengths(b, keys, length);
            b.writeInt(holdMillis);
        });
    }

    static byte[] release(long id, long lease) {
        return frame(Wire.RELEASE, id, 0, b -> b.writeLong(lease));
    }

    static byte[] delete(long id, int timeoutMillis, List<StoreKey> keys) {
        return frame(Wire.DELETE, id, timeoutMillis, b -> keys(b, keys));
    }

    static byte[] leadingHits(long id, int timeoutMillis, List<StoreKey> keys) {
        return frame(Wire.LEADING_HITS, id, timeoutMillis, b -> keys(b, keys));
    }

    static byte[] clear(long id, int timeoutMillis, Namespace ns) {
        return frame(Wire.CLEAR, id, timeoutMillis, b -> Codec.writeNamespace(b, ns));
    }

    private static void keys(ByteBuf b, List<StoreKey> keys) {
        Codec.writeNamespace(b, keys.getFirst().namespace());
        b.writeInt(keys.size());
        keys.forEach(k -> Codec.writeHash(b, k.hash()));
    }

    private static void keysWithLengths(ByteBuf b, List<StoreKey> keys, int length) {
        Codec.writeNamespace(b, keys.getFirst().namespace());
        b.writeInt(keys.size());
        for (StoreKey k : keys) {
            Codec.writeHash(b, k.hash());
            b.writeInt(length);
        }
    }

    /* ---------------------------------------------------------------- answers */

    /** Fails unless {@code f} answers {@code op} (not with an ERROR). */
    static ByteBuffer answerTo(int op, RawClient.Frame f) {
        if (f.op() != (op | Wire.RESPONSE)) {
            throw new AssertionError("a " + Wire.opName(op) + " was answered " + describe(f));
        }
        return f.payload().duplicate();
    }

    static List<Page> pagesOfGet(RawClient.Frame f, int n) {
        ByteBuffer p = answerTo(Wire.GET, f);
        List<Page> pages = table(p, n, false);
        List<Page> withBodies = new ArrayList<>(n);
        for (Page page : pages) {
            byte[] body = null;
            if (page.status() == PageStatus.OK) {
                expect(p.remaining() >= page.length(), "a GET answer short of its bodies", f);
                body = new byte[page.length()];
                p.get(body);
            }
            withBodies.add(new Page(page.status(), page.length(), page.crc(), -1, body));
        }
        expect(!p.hasRemaining(), p.remaining() + " bytes after a GET answer's bodies", f);
        return withBodies;
    }

    static Lease lease(RawClient.Frame f, int n) {
        ByteBuffer p = answerTo(Wire.LEASE, f);
        expect(p.remaining() >= 8, "a LEASE answer without its id", f);
        long id = p.getLong();
        List<Page> pages = table(p, n, true);
        expect(!p.hasRemaining(), p.remaining() + " bytes after a LEASE answer", f);
        return new Lease(id, pages);
    }

    private static List<Page> table(ByteBuffer p, int n, boolean offsets) {
        int each = offsets ? 17 : 9;
        if (p.remaining() < 4 || p.getInt() != n || p.remaining() < (long) n * each) {
            throw new AssertionError("an answer that does not list the " + n + " pages asked for");
        }
        List<Page> pages = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            PageStatus s = Wire.status(p.get());
            pages.add(new Page(s, p.getInt(), p.getInt(), offsets ? p.getLong() : -1, null));
        }
        return pages;
    }

    static PageStatus[] statuses(int op, RawClient.Frame f, int n) {
        ByteBuffer p = answerTo(op, f);
        expect(
                p.remaining() == 4 + n && p.getInt() == n,
                "a " + Wire.opName(op) + " answer not of " + n + " statuses",
                f);
        PageStatus[] out = new PageStatus[n];
        for (int i = 0; i < n; i++) {
            out[i] = Wire.status(p.get());
        }
        return out;
    }

    static int hits(RawClient.Frame f) {
        ByteBuffer p = answerTo(Wire.LEADING_HITS, f);
        expect(p.remaining() == 4, "a LEADING_HITS answer of " + p.remaining() + " bytes", f);
        return p.getInt();
    }

    /** Null if {@code page} is {@code key}'s pattern with a matching CRC, else what is wrong. */
    static String wrongBytes(StoreKey key, Page page) {
        MemorySegment body = MemorySegment.ofArray(page.body());
        if (PageChecksum.of(body) != page.crc()) {
            return "its CRC-32C does not match its body";
        }
        long at = PagePattern.firstMismatch(body, key, 0);
        return at < 0 ? null : "its byte " + at + " is not the page's";
    }

    static int errorCode(RawClient.Frame f) {
        return f.isError() ? f.errorCode() : -1;
    }

    static String errorMessage(RawClient.Frame f) {
        ByteBuffer p = f.payload().duplicate();
        p.getShort();
        byte[] text = new byte[Short.toUnsignedInt(p.getShort())];
        p.get(text);
        return new String(text, StandardCharsets.UTF_8);
    }

    static String describe(RawClient.Frame f) {
        if (f == null) {
            return "nothing (the connection closed)";
        }
        return f.isError()
                ? "ERROR " + Wire.errorName(f.errorCode()) + " (" + errorMessage(f) + "), request " + f.requestId()
                : Wire.opName(f.op() & ~Wire.RESPONSE) + " answer to request " + f.requestId();
    }

    private static void expect(boolean ok, String what, RawClient.Frame f) {
        if (!ok) {
            throw new AssertionError(what + ": " + describe(f));
        }
    }

    /**
     * Sends {@code requests} (id to frame) at once and reads one answer for each; fails on an answer to no pending
     * request or a connection closed before every answer came.
     */
    static Map<Long, RawClient.Frame> pipeline(RawClient c, Map<Long, byte[]> requests) throws IOException {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        requests.values().forEach(all::writeBytes);
        c.send(all.toByteArray());
        Map<Long, RawClient.Frame> answers = new HashMap<>();
        while (answers.size() < requests.size()) {
            RawClient.Frame f = c.read();
            if (f == null) {
                throw new AssertionError("the daemon closed the connection with " + (requests.size() - answers.size())
                        + " of " + requests.size() + " pipelined requests unanswered");
            }
            if (!requests.containsKey(f.requestId()) || answers.put(f.requestId(), f) != null) {
                throw new AssertionError(
                        "an answer to request " + f.requestId() + ", which is not pending: " + describe(f));
            }
        }
        return answers;
    }
}
