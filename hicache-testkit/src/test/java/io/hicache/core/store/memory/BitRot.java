package io.hicache.core.store.memory;

import io.hicache.core.key.StoreKey;
import java.lang.foreign.ValueLayout;

/** Bit rot in the reference store, for the kit's corruption cases: one byte of a stored page flipped, its checksum not. */
public final class BitRot {
    private BitRot() {}

    /** Flips the middle byte of the page stored under {@code key}. */
    public static void flipMiddleByte(InMemoryPageStore store, StoreKey key) {
        boolean stored = store.withStoredBytes(key, bytes -> {
            long middle = bytes.byteSize() / 2;
            bytes.set(ValueLayout.JAVA_BYTE, middle, (byte) ~bytes.get(ValueLayout.JAVA_BYTE, middle));
        });
        if (!stored) {
            throw new IllegalArgumentException("no page stored under " + key);
        }
    }
}
