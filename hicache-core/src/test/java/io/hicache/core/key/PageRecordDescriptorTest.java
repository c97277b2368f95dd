package io.hicache.core.key;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** The page record is an on-disk format of three stores: its offsets are pinned here, each one. */
class PageRecordDescriptorTest {
    private static final Namespace NS = Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final StoreKey KEY = NS.key(PageHash.fromHex("ab".repeat(32)));

    @Test
    void theLayoutIsPinned() {
        assertEquals(0, PageRecordDescriptor.TAG_OFFSET);
        assertEquals(4, PageRecordDescriptor.PAGE_CRC_OFFSET);
        assertEquals(0, PageRecordDescriptor.TAG_AND_CRC_OFFSET);
        assertEquals(8, PageRecordDescriptor.PAGE_LENGTH_OFFSET);
        assertEquals(16, PageRecordDescriptor.KEY_OFFSET);
        assertEquals(16, PageRecordDescriptor.NAMESPACE_ID_OFFSET);
        assertEquals(32, PageRecordDescriptor.PAGE_HASH_OFFSET);
        assertEquals(48, PageRecordDescriptor.KEY_LENGTH);
        assertEquals(64, PageRecordDescriptor.LENGTH);
        assertEquals(ByteOrder.LITTLE_ENDIAN, PageRecordDescriptor.BYTE_ORDER);
    }

    @Test
    void aRecordRoundTripsAtAnOffsetWithEveryFieldWhereTheLayoutSays() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(3 * PageRecordDescriptor.LENGTH);
            long at = PageRecordDescriptor.LENGTH;
            byte[] key = PageRecordDescriptor.keyBytes(KEY);
            PageRecordDescriptor.write(m, at, 0x314E4348, 0xCAFEBABE, 16_384, key);
            assertEquals(0x314E4348, PageRecordDescriptor.tag(m, at));
            assertEquals(0xCAFEBABE, PageRecordDescriptor.pageCrc(m, at));
            assertEquals(16_384, PageRecordDescriptor.pageLength(m, at));
            assertArrayEquals(key, PageRecordDescriptor.key(m, at));
            assertTrue(PageRecordDescriptor.hasKey(m, at, key));
            assertFalse(PageRecordDescriptor.hasKey(
                    m, at, PageRecordDescriptor.keyBytes(NS.key(PageHash.fromHex("cd".repeat(32))))));
            // The bytes themselves: "HCN1" as text, the namespace id, then the hash.
            assertEquals('H', m.get(ValueLayout.JAVA_BYTE, at));
            assertEquals('1', m.get(ValueLayout.JAVA_BYTE, at + 3));
            byte[] id = new byte[Namespace.ID_BYTES];
            NS.writeIdTo(id, 0);
            assertArrayEquals(
                    id,
                    m.asSlice(at + PageRecordDescriptor.NAMESPACE_ID_OFFSET, id.length)
                            .toArray(ValueLayout.JAVA_BYTE));
            assertEquals((byte) 0xab, m.get(ValueLayout.JAVA_BYTE, at + PageRecordDescriptor.PAGE_HASH_OFFSET));
            assertEquals(0, m.get(ValueLayout.JAVA_LONG, 0), "the record before is untouched");
            assertEquals(0, m.get(ValueLayout.JAVA_LONG, 2 * PageRecordDescriptor.LENGTH), "so is the one after");
        }
    }

    @Test
    void tagAndCrcChangeTogetherInOneWord() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(PageRecordDescriptor.LENGTH, 8);
            PageRecordDescriptor.setTagAndCrcRelease(m, 0, 3, -2);
            long word = PageRecordDescriptor.tagAndCrcAcquire(m, 0);
            assertEquals(3, PageRecordDescriptor.tagOf(word));
            assertEquals(-2, PageRecordDescriptor.crcOf(word));
            assertEquals(3, PageRecordDescriptor.tag(m, 0), "the word's low half is the tag field");
            assertEquals(-2, PageRecordDescriptor.pageCrc(m, 0), "its high half the CRC field");
        }
    }

    @Test
    void aRecordThatDoesNotFitIsRefusedWithTheNumbers() {
        MemorySegment small = MemorySegment.ofArray(new byte[100]);
        var e = assertThrows(
                IllegalArgumentException.class,
                () -> PageRecordDescriptor.write(small, 40, 1, 2, 3, new byte[PageRecordDescriptor.KEY_LENGTH]));
        assertTrue(e.getMessage().contains("offset 40 needs 64 bytes; the memory has 100"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> PageRecordDescriptor.write(small, 0, 1, 2, 3, new byte[47]));
    }
}
