package io.hicache.core.key;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PageHashTest {
    private static final String HEX = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210";

    @Test
    void hexAndBytesRoundTrip() {
        PageHash h = PageHash.fromHex(HEX);
        assertEquals(HEX, h.toHex());
        assertArrayEquals(HexFormat.of().parseHex(HEX), h.toBytes());
        assertEquals(h, PageHash.fromBytes(h.toBytes(), 0));
        assertEquals(h, PageHash.fromHex(HEX.toUpperCase()));
        assertEquals(0x0011223344556677L, h.prefix64());
    }

    @Test
    void hashCodesSpreadHashesThatDifferOnlyInTheirLastBytes() {
        // A client may send structured hashes (a counter at the end): they must not share one hash-map bucket.
        for (int word = 0; word < 4; word++) {
            Set<Integer> codes = new HashSet<>();
            for (int i = 0; i < 10_000; i++) {
                byte[] b = new byte[PageHash.BYTES];
                ByteBuffer.wrap(b).putLong(8 * word, i);
                codes.add(PageHash.fromBytes(b, 0).hashCode());
            }
            assertTrue(codes.size() > 9_990, "word " + word + ": " + codes.size() + " distinct codes of 10000");
        }
    }

    @Test
    void badHexIsRejectedWithTheText() {
        var shortHex = assertThrows(IllegalArgumentException.class, () -> PageHash.fromHex("abc"));
        assertTrue(shortHex.getMessage().contains("64 hex characters, got 3"), shortHex.getMessage());
        String notHex = "zz" + HEX.substring(2);
        var bad = assertThrows(IllegalArgumentException.class, () -> PageHash.fromHex(notHex));
        assertTrue(bad.getMessage().contains(notHex), bad.getMessage());
        assertThrows(IllegalArgumentException.class, () -> PageHash.fromBytes(new byte[31], 0));
        assertThrows(IllegalArgumentException.class, () -> PageHash.fromBytes(new byte[40], 9));
    }

    @Test
    void orderIsUnsignedByteOrder() {
        PageHash low = PageHash.fromHex("7f" + "00".repeat(31));
        PageHash high = PageHash.fromHex("80" + "00".repeat(31));
        PageHash lastByte = PageHash.fromHex("7f" + "00".repeat(30) + "01");
        assertTrue(low.compareTo(high) < 0);
        assertTrue(low.compareTo(lastByte) < 0);
        assertNotEquals(low, lastByte);
        assertEquals(0, low.compareTo(PageHash.fromHex("7f" + "00".repeat(31))));
    }

    @Test
    void hashesSliceAndConcatWithoutChangingValues() {
        PageHashes all = new PageHasher(2).hashPages(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
        assertEquals(4, all.size());
        PageHashes middle = all.slice(1, 3);
        assertEquals(List.of(all.get(1), all.get(2)), middle.asList());
        assertEquals(all, all.slice(0, 2).concat(all.slice(2, 4)));
        assertEquals(all.hashCode(), all.slice(0, 1).concat(all.slice(1, 4)).hashCode());
        assertEquals(all.slice(1, 3), PageHashes.of(middle.asList()));
        assertTrue(all.slice(2, 2).isEmpty());
        assertEquals(all.get(3), all.last());
        assertThrows(IndexOutOfBoundsException.class, () -> middle.get(2));
        assertThrows(IllegalStateException.class, () -> PageHashes.empty().last());
    }

    @Test
    void hasherIsReusableAndIgnoresPartialTail() {
        PageHasher hasher = new PageHasher(3);
        PageHashes first = hasher.hashPages(new int[] {9, 8, 7, 6, 5, 4, 3});
        assertEquals(2, first.size());
        assertEquals(first, hasher.hashPages(new int[] {9, 8, 7, 6, 5, 4}));
        assertEquals(first.slice(1, 2), hasher.hashPages(new int[] {6, 5, 4}, 0, 3, first.get(0)));
        assertThrows(IndexOutOfBoundsException.class, () -> hasher.hashPages(new int[3], 2, 4));
        assertThrows(IllegalArgumentException.class, () -> new PageHasher(0));
    }
}
