package io.hicache.core.key;

import io.hicache.core.util.Checks;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.HexFormat;

/**
 * The 32-byte SHA-256 hash that names one page of a token sequence, chained from the page before it (see
 * {@link PageHasher}). Its hex form is SGLang's page key. Immutable; held as four longs so that equality
 * and hashing are cheap in trees and maps.
 */
public final class PageHash implements Comparable<PageHash> {
    /** Bytes in a page hash. */
    public static final int BYTES = 32;
    /** Characters in the hex form. */
    public static final int HEX_LENGTH = 2 * BYTES;

    static final VarHandle LONG_BE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final HexFormat HEX = HexFormat.of();

    // The digest bytes, big-endian in each word, so word order is byte order.
    final long w0;
    final long w1;
    final long w2;
    final long w3;

    PageHash(long w0, long w1, long w2, long w3) {
        this.w0 = w0;
        this.w1 = w1;
        this.w2 = w2;
        this.w3 = w3;
    }

    /** The hash whose bytes are {@code bytes[offset .. offset + 32)}. */
    public static PageHash fromBytes(byte[] bytes, int offset) {
        Checks.checkNotNull(bytes, "bytes");
        if (offset < 0 || offset > bytes.length - BYTES) {
            throw new IllegalArgumentException(
                    "a page hash needs 32 bytes at offset " + offset + " of a " + bytes.length + "-byte array");
        }
        return new PageHash(
                (long) LONG_BE.get(bytes, offset),
                (long) LONG_BE.get(bytes, offset + 8),
                (long) LONG_BE.get(bytes, offset + 16),
                (long) LONG_BE.get(bytes, offset + 24));
    }

    /** Parses the 64-character hex form (either case). */
    public static PageHash fromHex(CharSequence hex) {
        Checks.checkNotNull(hex, "hex");
        if (hex.length() != HEX_LENGTH) {
            throw new IllegalArgumentException("a page hash is " + HEX_LENGTH + " hex characters, got " + hex.length()
                    + ": '" + abbreviate(hex) + "'");
        }
        try {
            return fromBytes(HEX.parseHex(hex), 0);
        } catch (IllegalArgumentException notHex) {
            throw new IllegalArgumentException("a page hash is hex digits only, got '" + hex + "'", notHex);
        }
    }

    /** Writes the 32 bytes to {@code dst[offset ..]}. */
    public void writeTo(byte[] dst, int offset) {
        LONG_BE.set(dst, offset, w0);
        LONG_BE.set(dst, offset + 8, w1);
        LONG_BE.set(dst, offset + 16, w2);
        LONG_BE.set(dst, offset + 24, w3);
    }

    /** A fresh copy of the 32 bytes. */
    public byte[] toBytes() {
        byte[] bytes = new byte[BYTES];
        writeTo(bytes, 0);
        return bytes;
    }

    /** The 64-character lowercase hex form: SGLang's page key. */
    public String toHex() {
        return HEX.toHexDigits(w0) + HEX.toHexDigits(w1) + HEX.toHexDigits(w2) + HEX.toHexDigits(w3);
    }

    /** The first 8 bytes as a long: uniformly distributed, good for sharding and hashing. */
    public long prefix64() {
        return w0;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PageHash h && h.w0 == w0 && h.w1 == w1 && h.w2 == w2 && h.w3 == w3;
    }

    /**
     * Mixes all 32 bytes: SHA-256 hashes would do with any 4 of them, but the daemon takes hashes from clients, and
     * keys that differ only past their first bytes must not all land in one bucket of a hash map.
     */
    @Override
    public int hashCode() {
        long h = w0 * 0x9E3779B97F4A7C15L + w1;
        h = h * 0x9E3779B97F4A7C15L + w2;
        h = h * 0x9E3779B97F4A7C15L + w3;
        h ^= h >>> 29;
        return (int) (h ^ (h >>> 32));
    }

    /** Orders hashes as their bytes compare, unsigned. */
    @Override
    public int compareTo(PageHash o) {
        int c = Long.compareUnsigned(w0, o.w0);
        if (c == 0) {
            c = Long.compareUnsigned(w1, o.w1);
        }
        if (c == 0) {
            c = Long.compareUnsigned(w2, o.w2);
        }
        return c != 0 ? c : Long.compareUnsigned(w3, o.w3);
    }

    @Override
    public String toString() {
        return toHex();
    }

    private static String abbreviate(CharSequence s) {
        return s.length() <= 80 ? s.toString() : s.subSequence(0, 77) + "...";
    }
}
