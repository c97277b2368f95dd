package io.hicache.core.events;

import io.hicache.core.util.Checks;
import java.util.Arrays;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Pages removed from one tier, as SGLang's {@code BlockRemoved}: their block ids (see {@link BlockIds}) and the tier.
 * A page still held by another tier stays there (a router keeps it under that medium). Immutable: the array is copied
 * in and out.
 *
 * @param blockHashes the pages' block ids; not empty
 * @param medium      the tier they left
 * @param placement   HiCache's tier and namespace of the pages (all of one namespace), or null
 */
public record BlockRemoved(
        long[] blockHashes, Medium medium, @Nullable Placement placement) implements KvEvent {
    /** Pages removed from {@code medium}, with no placement. */
    public BlockRemoved(long[] blockHashes, Medium medium) {
        this(blockHashes, medium, null);
    }

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
        return o instanceof BlockRemoved r
                && Arrays.equals(r.blockHashes, blockHashes)
                && r.medium == medium
                && Objects.equals(r.placement, placement);
    }

    @Override
    public int hashCode() {
        return (Arrays.hashCode(blockHashes) * 31 + medium.hashCode()) * 31 + Objects.hashCode(placement);
    }

    @Override
    public String toString() {
        return "BlockRemoved[" + medium + (placement == null ? "" : ", " + placement) + ", blocks "
                + Arrays.toString(blockHashes) + "]";
    }
}
