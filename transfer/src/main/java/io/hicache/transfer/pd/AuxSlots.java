package io.hicache.transfer.pd;

import io.hicache.transfer.LocalRegion;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import org.jspecify.annotations.Nullable;

/**
 * A prefill rank's aux region ({@link RankSpec#AUX_REGION}) cut into slots: a room's aux data waits in one while it is
 * written into each decode's aux slot, which happens once every page of the room landed. The region stays the rank
 * starter's. Worker thread only.
 */
final class AuxSlots {
    /** A slot holding a room's aux data, zero-padded to the slot's size. */
    record Slot(int index, MemorySegment memory) {}

    private final LocalRegion region;
    private final int slotBytes;
    private final ArrayDeque<Integer> free = new ArrayDeque<>();

    AuxSlots(LocalRegion region, RankSpec spec) {
        this.region = region;
        this.slotBytes = spec.auxSlotBytes();
        for (int i = 0; i < spec.auxSlots(); i++) {
            free.add(i);
        }
    }

    /** A free slot holding {@code data} (cut to the slot's size), or null when every slot is in use. */
    @Nullable
    Slot stage(byte[] data) {
        Integer index = free.poll();
        if (index == null) {
            return null;
        }
        MemorySegment memory = region.memory().asSlice((long) index * slotBytes, slotBytes);
        memory.fill((byte) 0);
        MemorySegment.copy(MemorySegment.ofArray(data), 0, memory, 0, Math.min(data.length, slotBytes));
        return new Slot(index, memory);
    }

    /** Gives slot {@code index} back. */
    void free(int index) {
        free.add(index);
    }
}
