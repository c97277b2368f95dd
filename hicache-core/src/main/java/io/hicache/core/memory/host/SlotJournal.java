package io.hicache.core.memory.host;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * What each slot durably holds, one 64-byte record per slot in a mapped file next to the slab. It is the truth
 * a reopened pool starts from: the index is reconciled against it on every open rather than trusted, because
 * Chronicle Map documents its recovery after a killed process as best effort, and because a kill can fall
 * between the journal's change and the index's.
 *
 * <pre>
 * record: key (48 bytes: namespace id, page hash) | word (8 bytes: CRC-32C in the high 32 bits, state in the low
 *         8) | unused (8)
 * </pre>
 *
 * Each change is one release-ordered 8-byte store of the word, after everything it vouches for: a page's key
 * before its WRITING word, its bytes before its READY word (which carries the checksum). So a killed process
 * leaves every record either as it was or as it became, never half changed. Thread-safe for distinct slots; the
 * pool's slot states give each slot one writer at a time.
 */
final class SlotJournal {
    static final int RECORD_BYTES = 64;
    private static final long WORD_OFFSET = HostIndex.KEY_BYTES;
    private static final VarHandle WORD = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment records;
    private final int capacity;

    /** A journal over {@code records}, which holds {@code capacity} records (all FREE when zero-filled). */
    SlotJournal(MemorySegment records, int capacity) {
        this.records = records;
        this.capacity = capacity;
    }

    static long bytesFor(int capacity) {
        return (long) capacity * RECORD_BYTES;
    }

    /** Records that {@code slot} is being written with the page {@code key}. */
    void writing(int slot, byte[] key) {
        MemorySegment.copy(key, 0, records, ValueLayout.JAVA_BYTE, base(slot), HostIndex.KEY_BYTES);
        WORD.setRelease(records, base(slot) + WORD_OFFSET, (long) SlotStates.WRITING);
    }

    /** Records that {@code slot} holds its page, with checksum {@code checksum}: the commit point of a write. */
    void ready(int slot, int checksum) {
        WORD.setRelease(records, base(slot) + WORD_OFFSET, ((long) checksum << 32) | SlotStates.READY);
    }

    /** Records that {@code slot} holds nothing. */
    void free(int slot) {
        WORD.setRelease(records, base(slot) + WORD_OFFSET, (long) SlotStates.FREE);
    }

    /** The recorded state of {@code slot}: FREE, WRITING or READY. */
    int state(int slot) {
        return (int) (word(slot) & 0xFF);
    }

    /** The recorded checksum of a READY slot. */
    int checksum(int slot) {
        return (int) (word(slot) >>> 32);
    }

    /** The recorded key of {@code slot}. */
    byte[] key(int slot) {
        byte[] key = new byte[HostIndex.KEY_BYTES];
        MemorySegment.copy(records, ValueLayout.JAVA_BYTE, base(slot), key, 0, key.length);
        return key;
    }

    /** True when {@code slot}'s recorded key is {@code key}. */
    boolean hasKey(int slot, byte[] key) {
        return MemorySegment.mismatch(records, base(slot), base(slot) + HostIndex.KEY_BYTES, MemorySegment.ofArray(key), 0,
                key.length) < 0;
    }

    int capacity() {
        return capacity;
    }

    private long word(int slot) {
        return (long) WORD.getAcquire(records, base(slot) + WORD_OFFSET);
    }

    private static long base(int slot) {
        return (long) slot * RECORD_BYTES;
    }
}
