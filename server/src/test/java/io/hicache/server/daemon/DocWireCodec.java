package io.hicache.server.daemon;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.zip.CRC32C;

/**
 * The bytes of docs/protocol.md, written from the document alone (no daemon or client code): frames (§1), strings,
 * namespaces and hashes (§1), page statuses (§1), HELLO (§2), the requests and their answers (§3) and ERROR (§4).
 * Answers are parsed strictly (no byte left over, flags/reserved/timeout 0), so a test that parses an answer also
 * checks the document's layout of it. {@link DocWireClient} sends and receives them.
 */
final class DocWireCodec {
    private DocWireCodec() {}

    // §1-§3: ops
    static final int HELLO = 0x01,
            LEADING_HITS = 0x10,
            GET = 0x11,
            PUT = 0x12,
            DELETE = 0x13,
            CLEAR = 0x14,
            CLEAR_ALL = 0x15,
            STATS = 0x16,
            HEALTH = 0x17,
            LEASE = 0x18,
            RELEASE = 0x19,
            ERROR = 0xFF;
    static final int MAGIC = 0x48435750;
    static final int VERSION = 1;
    static final int HEADER_BYTES = 16;
    // §1 page statuses
    static final int OK = 0,
            EXISTS = 1,
            MISS = 2,
            CORRUPT = 3,
            SIZE_MISMATCH = 4,
            REJECTED = 5,
            TIMED_OUT = 6,
            CANCELLED = 7,
            FAILED = 8;
    // §4 error codes
    static final int E_MALFORMED = 1,
            E_VERSION = 2,
            E_AUTH = 3,
            E_UNKNOWN_OP = 4,
            E_TOO_LARGE = 5,
            E_BUSY = 6,
            E_SHUTTING_DOWN = 7,
            E_INTERNAL = 8,
            E_TIMED_OUT = 9;
    /** §3 LEASE: the offset of a page that is not OK. */
    static final long NO_OFFSET = 0xFFFFFFFFFFFFFFFFL;

    /** A received frame: the 16-byte header's fields and the payload. */
    record Frame(int op, int flags, int reserved, long id, long timeoutMs, byte[] payload) {
        boolean isError() {
            return op == ERROR;
        }

        /** ERROR's code; fails if this is not an ERROR. */
        int errorCode() {
            if (!isError()) {
                throw new AssertionError("not an ERROR: " + this);
            }
            return reader().u16();
        }

        /** ERROR's message, its layout checked (code:u16 message:string, nothing after). */
        String errorMessage() {
            Reader r = reader();
            r.u16();
            String m = r.str();
            r.end();
            return m;
        }

        Reader reader() {
            return new Reader(payload);
        }

        @Override
        public String toString() {
            String body = op == ERROR && payload.length >= 4
                    ? " ERROR " + errorCode() + " " + errorMessage()
                    : " payload " + payload.length + " bytes";
            return "Frame[op=0x" + Integer.toHexString(op) + " flags=" + flags + " reserved=" + reserved + " id=" + id
                    + " timeout=" + timeoutMs + body + "]";
        }
    }

    /** A namespace as raw strings, so that tests can send invalid UTF-8. */
    record Ns(byte[] model, byte[] dtype, int order, int tpRank, int tpSize, byte[] extra) {
        static Ns of(String model) {
            return new Ns(utf8(model), utf8("bfloat16"), 0, 0, 1, new byte[0]);
        }

        /** A namespace with a random model name, so that tests do not see each other's pages. */
        static Ns fresh() {
            return of("model-" + Long.toHexString(ThreadLocalRandom.current().nextLong()));
        }

        Ns model(String m) {
            return new Ns(utf8(m), dtype, order, tpRank, tpSize, extra);
        }

        Ns modelBytes(byte[] m) {
            return new Ns(m, dtype, order, tpRank, tpSize, extra);
        }

        Ns dtype(String d) {
            return new Ns(model, utf8(d), order, tpRank, tpSize, extra);
        }

        Ns dtypeBytes(byte[] d) {
            return new Ns(model, d, order, tpRank, tpSize, extra);
        }

        Ns order(int o) {
            return new Ns(model, dtype, o, tpRank, tpSize, extra);
        }

        Ns tp(int rank, int size) {
            return new Ns(model, dtype, order, rank, size, extra);
        }

        Ns extra(String e) {
            return new Ns(model, dtype, order, tpRank, tpSize, utf8(e));
        }

        Ns extraBytes(byte[] e) {
            return new Ns(model, dtype, order, tpRank, tpSize, e);
        }

        /** {@code namespace = model:string dtype:string order:u8 tp_rank:u16 tp_size:u16 extra:string}. */
        void writeTo(Buf b) {
            b.str(model).str(dtype).u8(order).u16(tpRank).u16(tpSize).str(extra);
        }
    }

    /** A page: its 32-byte hash and its body. */
    record Page(byte[] hash, byte[] body) {
        static Page random(int length) {
            byte[] body = new byte[length];
            ThreadLocalRandom.current().nextBytes(body);
            return new Page(randomHash(), body);
        }

        int crc() {
            return crc32c(body);
        }

        int length() {
            return body.length;
        }
    }

    /** HELLO's answer. */
    record HelloAnswer(int version, long maxFrameBytes, long maxPageBytes, String slabPath) {}

    /** One page of a GET or LEASE answer; {@code offset} is LEASE's only, {@code body} GET's OK pages' only. */
    record PageAnswer(int status, long length, int crc, long offset, byte[] body) {}

    /** A LEASE answer. */
    record LeaseAnswer(long leaseId, List<PageAnswer> pages) {}

    // ---- building payloads ----

    /** A payload or frame being written, big-endian. */
    static final class Buf {
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        private final DataOutputStream out = new DataOutputStream(bytes);

        Buf u8(int v) {
            return io(() -> out.writeByte(v));
        }

        Buf u16(int v) {
            return io(() -> out.writeShort(v));
        }

        Buf u32(long v) {
            return io(() -> out.writeInt((int) v));
        }

        Buf u64(long v) {
            return io(() -> out.writeLong(v));
        }

        Buf bytes(byte[] b) {
            return io(() -> out.write(b));
        }

        /** {@code string = length:u16 bytes[length]}. */
        Buf str(byte[] b) {
            return u16(b.length).bytes(b);
        }

        Buf str(String s) {
            return str(utf8(s));
        }

        Buf ns(Ns ns) {
            ns.writeTo(this);
            return this;
        }

        byte[] done() {
            return bytes.toByteArray();
        }

        private interface IoAction {
            void run() throws IOException;
        }

        private Buf io(IoAction a) {
            try {
                a.run();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return this;
        }
    }

    /** Reads a payload, big-endian; {@link #end} checks nothing is left. */
    static final class Reader {
        private final ByteBuffer b;

        Reader(byte[] payload) {
            b = ByteBuffer.wrap(payload);
        }

        int u8() {
            return Byte.toUnsignedInt(b.get());
        }

        int u16() {
            return Short.toUnsignedInt(b.getShort());
        }

        long u32() {
            return Integer.toUnsignedLong(b.getInt());
        }

        long u64() {
            return b.getLong();
        }

        byte[] bytes(int n) {
            byte[] r = new byte[n];
            b.get(r);
            return r;
        }

        String str() {
            return new String(bytes(u16()), StandardCharsets.UTF_8);
        }

        int remaining() {
            return b.remaining();
        }

        void end() {
            if (b.hasRemaining()) {
                throw new AssertionError(b.remaining() + " bytes left over in an answer");
            }
        }
    }

    /** A whole frame with flags and reserved 0. */
    static byte[] frame(int op, long id, long timeoutMs, byte[] payload) {
        return frame(op, 0, 0, id, timeoutMs, payload);
    }

    /** {@code frame = length:u32 op:u8 flags:u8 reserved:u16 request_id:u64 timeout_ms:u32 payload}. */
    static byte[] frame(int op, int flags, int reserved, long id, long timeoutMs, byte[] payload) {
        return new Buf()
                .u32(HEADER_BYTES + payload.length)
                .u8(op)
                .u8(flags)
                .u16(reserved)
                .u64(id)
                .u32(timeoutMs)
                .bytes(payload)
                .done();
    }

    static byte[] helloPayload(int magic, int version, byte[] token) {
        return new Buf().u32(magic).u16(version).str(token).done();
    }

    static byte[] helloPayload(String token) {
        return helloPayload(MAGIC, VERSION, utf8(token));
    }

    /** LEADING_HITS and DELETE: {@code namespace n:u32 hash[n]}. */
    static byte[] hashesPayload(Ns ns, List<byte[]> hashes) {
        Buf b = new Buf().ns(ns).u32(hashes.size());
        hashes.forEach(b::bytes);
        return b.done();
    }

    /** GET: {@code namespace n:u32 n × (hash length:u32)}, the lengths of {@code pages}. */
    static byte[] getPayload(Ns ns, List<Page> pages) {
        Buf b = new Buf().ns(ns).u32(pages.size());
        pages.forEach(p -> b.bytes(p.hash()).u32(p.length()));
        return b.done();
    }

    /** PUT: {@code namespace n:u32 n × (hash length:u32 crc32c:u32) body[...]}, lengths and CRCs the bodies'. */
    static byte[] putPayload(Ns ns, List<Page> pages) {
        Buf b = new Buf().ns(ns).u32(pages.size());
        pages.forEach(p -> b.bytes(p.hash()).u32(p.length()).u32(p.crc()));
        pages.forEach(p -> b.bytes(p.body()));
        return b.done();
    }

    /** LEASE: {@code namespace n:u32 n × (hash length:u32) hold_ms:u32}. */
    static byte[] leasePayload(Ns ns, List<Page> pages, long holdMs) {
        Buf b = new Buf().ns(ns).u32(pages.size());
        pages.forEach(p -> b.bytes(p.hash()).u32(p.length()));
        return b.u32(holdMs).done();
    }

    // ---- parsing answers (strictly) ----

    static HelloAnswer helloAnswer(Frame f) {
        expectOp(f, HELLO);
        Reader r = f.reader();
        HelloAnswer a = new HelloAnswer(r.u16(), r.u32(), r.u32(), r.str());
        r.end();
        return a;
    }

    /** PUT and DELETE: {@code n:u32 status:u8[n]}. */
    static int[] statuses(Frame f, int op) {
        expectOp(f, op);
        Reader r = f.reader();
        int[] s = new int[(int) r.u32()];
        for (int i = 0; i < s.length; i++) {
            s[i] = r.u8();
        }
        r.end();
        return s;
    }

    /** GET: {@code n:u32 n × (status:u8 length:u32 crc32c:u32) body[...]}, bodies of OK pages in order. */
    static List<PageAnswer> getAnswer(Frame f) {
        expectOp(f, GET);
        Reader r = f.reader();
        int n = (int) r.u32();
        int[] st = new int[n];
        long[] len = new long[n];
        int[] crc = new int[n];
        for (int i = 0; i < n; i++) {
            st[i] = r.u8();
            len[i] = r.u32();
            crc[i] = (int) r.u32();
        }
        List<PageAnswer> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new PageAnswer(st[i], len[i], crc[i], 0, st[i] == OK ? r.bytes((int) len[i]) : null));
        }
        r.end();
        return out;
    }

    /** LEASE: {@code lease_id:u64 n:u32 n × (status:u8 length:u32 crc32c:u32 offset:u64)}. */
    static LeaseAnswer leaseAnswer(Frame f) {
        expectOp(f, LEASE);
        Reader r = f.reader();
        long id = r.u64();
        int n = (int) r.u32();
        List<PageAnswer> pages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            pages.add(new PageAnswer(r.u8(), r.u32(), (int) r.u32(), r.u64(), null));
        }
        r.end();
        return new LeaseAnswer(id, pages);
    }

    /** Fails unless {@code f} answers {@code op}: its op is {@code op | 0x80}, flags, reserved and timeout 0. */
    static void expectOp(Frame f, int op) {
        if (f.op() != (op | 0x80)) {
            throw new AssertionError("expected the answer to op 0x" + Integer.toHexString(op) + ", got " + f);
        }
        expectCleanHeader(f);
    }

    /** §1: answers set flags, reserved and timeout_ms to 0. */
    static void expectCleanHeader(Frame f) {
        if (f.flags() != 0 || f.reserved() != 0 || f.timeoutMs() != 0) {
            throw new AssertionError("an answer's flags, reserved and timeout_ms must be 0: " + f);
        }
    }

    // ---- helpers ----

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static byte[] randomHash() {
        byte[] h = new byte[32];
        ThreadLocalRandom.current().nextBytes(h);
        return h;
    }

    static int crc32c(byte[] body) {
        CRC32C c = new CRC32C();
        c.update(body);
        return (int) c.getValue();
    }

    static List<byte[]> hashes(List<Page> pages) {
        return pages.stream().map(Page::hash).toList();
    }

    static List<Page> randomPages(int n, int length) {
        List<Page> pages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            pages.add(Page.random(length));
        }
        return pages;
    }

    static int[] fill(int n, int value) {
        int[] a = new int[n];
        Arrays.fill(a, value);
        return a;
    }
}
