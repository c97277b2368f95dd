package io.hicache.core.memory.host;

import io.hicache.core.key.PageRecordDescriptor;
import java.lang.foreign.MemorySegment;

/**
 * What each slot durably holds, one {@link PageRecordDescriptor page record} per slot in a mapped file next to the
 * slab. It is the truth a reopened pool starts from: the index is reconciled against it on every open rather than
 * trusted, because Chronicle Map documents its recovery after a killed process as best effort, and because a kill
 * can fall between the journal's change and the index's.
 *
 * <p>A record's tag is the slot's state ({@link SlotStates#FREE}, {@link SlotStates#WRITING},
 * {@link SlotStates#READY}; zero-filled records are FREE), its CRC the page's checksum once READY, its key the page
 * the slot holds or is being written with; the page length field is not used (every slot is one page of the pool's
 * format). Each change is one release-ordered store of the tag-and-CRC word, after everything it vouches for: a
 * page's key before its WRITING word, its bytes before its READY word (which carries the checksum). So a killed
 * process leaves every record either as it was or as it became, never half changed. Thread-safe for distinct
 * slots; the pool's slot states give each slot one writer at a time.
 */
final class SlotJournal {
    static final int RECORD_BYTES = PageRecordDescriptor.LENGTH;

    private final MemorySegment records;
    private final int capacity;

    /** A journal over {@code records}, which holds {@code capacity} records (all FREE when zero-filled). */
    SlotJournal(MemorySegment records, int capacity) {
        this.records = records;
        this.capacity = capacity;
        if (capacity > 0) {
            PageRecordDescriptor.checkCapacity(records, base(capacity - 1));
        }
    }

    static long bytesFor(int capacity) {
        return (long) capacity * RECORD_BYTES;
    }

    /** Records that {@code slot} is being written with the page {@code key}. */
    void writing(int slot, byte[] key) {
        PageRecordDescriptor.writeKey(records, base(slot), key);
        PageRecordDescriptor.setTagAndCrcRelease(records, base(slot), SlotStates.WRITING, 0);
    }

    /** Records that {@code slot} holds its page, with checksum {@code checksum}: the commit point of a write. */
    void ready(int slot, int checksum) {
        PageRecordDescriptor.setTagAndCrcRelease(records, base(slot), SlotStates.READY, checksum);
    }

    /** Overwrites {@code slot}'s recorded key with zeros, a key no page has: the slot no longer names its page. */
    void forgetKey(int slot) {
        PageRecordDescriptor.writeKey(records, base(slot), new byte[PageRecordDescriptor.KEY_LENGTH]);
    }

    /** Records that {@code slot} holds nothing. */
    void free(int slot) {
        PageRecordDescriptor.setTagAndCrcRelease(records, base(slot), SlotStates.FREE, 0);
    }

    /** The recorded state of {@code slot}: FREE, WRITING or READY. */
    int state(int slot) {
        return PageRecordDescriptor.tagOf(PageRecordDescriptor.tagAndCrcAcquire(records, base(slot)));
    }

    /** The recorded checksum of a READY slot. */
    int checksum(int slot) {
        return PageRecordDescriptor.crcOf(PageRecordDescriptor.tagAndCrcAcquire(records, base(slot)));
    }

    /** The recorded key of {@code slot}. */
    byte[] key(int slot) {
        return PageRecordDescriptor.key(records, base(slot));
    }

    /** True when {@code slot}'s recorded key is {@code key}. */
    boolean hasKey(int slot, byte[] key) {
        return PageRecordDescriptor.hasKey(records, base(slot), key);
    }

    int capacity() {
        return capacity;
    }

    private static long base(int slot) {
        return (long) slot * RECORD_BYTES;
    }
}
