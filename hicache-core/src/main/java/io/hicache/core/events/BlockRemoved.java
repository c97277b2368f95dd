package io.hicache.core.events;

import io.hicache.core.util.Checks;
import java.util.Arrays;

/**
 * Pages removed from one tier, as SGLang's {@code BlockRemoved}: their block ids (see {@link BlockIds}) and the tier.
 * A page still held by another tier stays there (a router keeps it under that medium). Immutable: the array is copied
 * in and out.
 *
 * @param blockHashes the pages' block ids; not empty
 * @param medium      the tier they left
 */
public record BlockRemoved(long[] blockHashes, Medium medium) implements KvEvent {
    public BlockRemoved {
        Checks.checkNotNull(blockHashes, "blockHashes");
        Checks.requireArgument(blockHashes.length > 0, "a BlockRemoved names at least one block");
        Checks.checkNotNull(medium, "medium");
        blockHashes = blockHashes.clone();
    }

    /** A copy of the block ids. */
    @Override
    public long[] blockHashes() {
        return blockHashes.clone();
    }

    /** How many pages it names. */
    public int blockCount() {
        return blockHashes.length;
    }

    /** The block id of page {@code index}. */
    public long blockHash(int index) {
        return blockHashes[index];
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BlockRemoved r && Arrays.equals(r.blockHashes, blockHashes) && r.medium == medium;
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(blockHashes) * 31 + medium.hashCode();
    }

    @Override
    public String toString() {
        return "BlockRemoved[" + medium + ", blocks " + Arrays.toString(blockHashes) + "]";
    }
}
