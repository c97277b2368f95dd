package io.hicache.core.key;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * The layout of a page record: the 64 bytes that name a stored page by its key and vouch for its bytes with their
 * length and CRC-32C. Every place that keeps such a proof beside a page uses this one layout: the file store's page
 * file header (which appends its own fields after it), the nixl store's page trailer and the host pool's slot
 * journal. Little-endian:
 *
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                              Tag                              |  0
 *  +---------------------------------------------------------------+
 *  |                          Page CRC-32C                         |  4
 *  +---------------------------------------------------------------+
 *  |                          Page length                          |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   Namespace id (16 bytes)                    ...  16
 *  +---------------------------------------------------------------+
 *  |                     Page hash (32 bytes)                     ...  32
 *  +---------------------------------------------------------------+  64
 * </pre>
 *
 * <ul>
 *   <li><b>Tag</b> says what the record is: a magic number where it sits in a file or object (so a file that is not
 *       one of ours is told apart), the slot state in the journal (zero, FREE, in a zero-filled journal).</li>
 *   <li><b>Tag and CRC</b> form one aligned 8-byte word ({@link #TAG_AND_CRC_OFFSET}, tag in the low half): a
 *       writer that must change both at once, the journal's commit point, does it with one release store
 *       ({@link #setTagAndCrcRelease}).</li>
 *   <li><b>Key</b>: the namespace's raw id then the page hash, {@link #KEY_LENGTH} bytes ({@link #keyBytes}), so a
 *       page put under the wrong name is caught.</li>
 * </ul>
 *
 * <p>Stateless; the methods read and write the caller's memory at {@code recordOffset} and are as thread-safe as
 * the caller's use of that memory.
 */
public final class PageRecordDescriptor {
    /** Offset of the tag: a magic number, or the journal's slot state (4 bytes). */
    public static final int TAG_OFFSET = 0;
    /** Offset of the CRC-32C of the page's bytes (4 bytes). */
    public static final int PAGE_CRC_OFFSET = 4;
    /** Offset of the word that holds the tag (low half) and the CRC (high half), 8-byte aligned in the record. */
    public static final int TAG_AND_CRC_OFFSET = 0;
    /** Offset of the page's length in bytes (8 bytes). */
    public static final int PAGE_LENGTH_OFFSET = 8;
    /** Offset of the key: the namespace id, then the page hash. */
    public static final int KEY_OFFSET = 16;
    /** Offset of the namespace's raw id ({@link Namespace#ID_BYTES} bytes). */
    public static final int NAMESPACE_ID_OFFSET = KEY_OFFSET;
    /** Offset of the page hash ({@link PageHash#BYTES} bytes). */
    public static final int PAGE_HASH_OFFSET = NAMESPACE_ID_OFFSET + Namespace.ID_BYTES;
    /** Bytes of the key: namespace id and page hash. */
    public static final int KEY_LENGTH = Namespace.ID_BYTES + PageHash.BYTES;
    /** Bytes of a record. */
    public static final int LENGTH = KEY_OFFSET + KEY_LENGTH;
    /** The byte order of every field. */
    public static final ByteOrder BYTE_ORDER = ByteOrder.LITTLE_ENDIAN;

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(BYTE_ORDER);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(BYTE_ORDER);
    /** The tag-and-CRC word; aligned, so that release and acquire accesses are allowed on it. */
    private static final VarHandle TAG_AND_CRC =
            ValueLayout.JAVA_LONG.withOrder(BYTE_ORDER).varHandle();

    private PageRecordDescriptor() {}

    /**
     * Checks that a record fits in {@code memory} at {@code recordOffset}.
     *
     * @throws IllegalArgumentException with the offset and the sizes when it does not
     */
    public static void checkCapacity(MemorySegment memory, long recordOffset) {
        if (recordOffset < 0 || recordOffset > memory.byteSize() - LENGTH) {
            throw new IllegalArgumentException("a page record at offset " + recordOffset + " needs " + LENGTH
                    + " bytes; the memory has " + memory.byteSize());
        }
    }

    /** The key field of {@code key}'s page: its namespace's raw id, then its page hash. */
    public static byte[] keyBytes(StoreKey key) {
        byte[] bytes = new byte[KEY_LENGTH];
        key.namespace().writeIdTo(bytes, 0);
        key.hash().writeTo(bytes, Namespace.ID_BYTES);
        return bytes;
    }

    /**
     * Writes a whole record.
     *
     * @param key the {@link #KEY_LENGTH} bytes of {@link #keyBytes}
     * @throws IllegalArgumentException when the record does not fit or the key has the wrong length
     */
    public static void write(
            MemorySegment memory, long recordOffset, int tag, int pageCrc, long pageLength, byte[] key) {
        checkCapacity(memory, recordOffset);
        memory.set(INT, recordOffset + TAG_OFFSET, tag);
        memory.set(INT, recordOffset + PAGE_CRC_OFFSET, pageCrc);
        memory.set(LONG, recordOffset + PAGE_LENGTH_OFFSET, pageLength);
        writeKey(memory, recordOffset, key);
    }

    /** Writes the key field only. */
    public static void writeKey(MemorySegment memory, long recordOffset, byte[] key) {
        if (key.length != KEY_LENGTH) {
            throw new IllegalArgumentException("a page record's key is " + KEY_LENGTH + " bytes, got " + key.length);
        }
        MemorySegment.copy(key, 0, memory, ValueLayout.JAVA_BYTE, recordOffset + KEY_OFFSET, KEY_LENGTH);
    }

    public static int tag(MemorySegment memory, long recordOffset) {
        return memory.get(INT, recordOffset + TAG_OFFSET);
    }

    public static int pageCrc(MemorySegment memory, long recordOffset) {
        return memory.get(INT, recordOffset + PAGE_CRC_OFFSET);
    }

    public static long pageLength(MemorySegment memory, long recordOffset) {
        return memory.get(LONG, recordOffset + PAGE_LENGTH_OFFSET);
    }

    /** A copy of the key field. */
    public static byte[] key(MemorySegment memory, long recordOffset) {
        byte[] key = new byte[KEY_LENGTH];
        MemorySegment.copy(memory, ValueLayout.JAVA_BYTE, recordOffset + KEY_OFFSET, key, 0, KEY_LENGTH);
        return key;
    }

    /** Whether the key field is {@code key}, compared in place. */
    public static boolean hasKey(MemorySegment memory, long recordOffset, byte[] key) {
        return key.length == KEY_LENGTH
                && MemorySegment.mismatch(
                                memory,
                                recordOffset + KEY_OFFSET,
                                recordOffset + KEY_OFFSET + KEY_LENGTH,
                                MemorySegment.ofArray(key),
                                0,
                                KEY_LENGTH)
                        < 0;
    }

    /**
     * Sets tag and CRC with one release-ordered store: every write before it (the key, the page's bytes) is visible
     * to whoever reads the word with {@link #tagAndCrcAcquire}, and a process killed around it leaves the old word
     * or the new one, never half of each. The record must be 8-byte aligned.
     */
    public static void setTagAndCrcRelease(MemorySegment memory, long recordOffset, int tag, int pageCrc) {
        TAG_AND_CRC.setRelease(
                memory, recordOffset + TAG_AND_CRC_OFFSET, ((long) pageCrc << 32) | (tag & 0xFFFF_FFFFL));
    }

    /** Reads the tag-and-CRC word with acquire ordering; split it with {@link #tagOf} and {@link #crcOf}. */
    public static long tagAndCrcAcquire(MemorySegment memory, long recordOffset) {
        return (long) TAG_AND_CRC.getAcquire(memory, recordOffset + TAG_AND_CRC_OFFSET);
    }

    /** The tag in a word read by {@link #tagAndCrcAcquire}. */
    public static int tagOf(long tagAndCrc) {
        return (int) tagAndCrc;
    }

    /** The CRC in a word read by {@link #tagAndCrcAcquire}. */
    public static int crcOf(long tagAndCrc) {
        return (int) (tagAndCrc >>> 32);
    }
}
