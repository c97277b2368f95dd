package io.hicache.core.events;

import io.hicache.core.util.Checks;
import java.util.Arrays;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.jspecify.annotations.Nullable;

/**
 * A run of pages stored in one tier, in prefix order, as SGLang's {@code BlockStored}: each page's block id (see
 * {@link BlockIds}), the block id of the page before the run (empty when the run starts at the root, or when the
 * publisher does not know it), the run's token ids ({@code blockSize} per page, empty when the publisher does not know
 * them), tokens per page, the LoRA id (empty: none), and the tier. Immutable: the arrays are copied in and out.
 *
 * @param blockHashes     the pages' block ids, in prefix order; not empty
 * @param parentBlockHash the block id of the page before the run, if any
 * @param tokenIds        the run's token ids, as unsigned 32-bit values in Java ints; empty or
 *                        {@code blockHashes.length * blockSize} long
 * @param blockSize       tokens per page (0 when unknown to the publisher: the daemon)
 * @param loraId          the LoRA adapter's id, if any
 * @param medium          the tier the pages are now in
 * @param placement       HiCache's tier and namespace of the pages, or null
 */
public record BlockStored(
        long[] blockHashes,
        OptionalLong parentBlockHash,
        int[] tokenIds,
        int blockSize,
        OptionalInt loraId,
        Medium medium,
        @Nullable Placement placement)
        implements KvEvent {
    /** A run stored in {@code medium}, with no placement. */
    public BlockStored(
            long[] blockHashes,
            OptionalLong parentBlockHash,
            int[] tokenIds,
            int blockSize,
            OptionalInt loraId,
            Medium medium) {
        this(blockHashes, parentBlockHash, tokenIds, blockSize, loraId, medium, null);
    }

    public BlockStored {
        Checks.checkNotNull(blockHashes, "blockHashes");
        Checks.requireArgument(blockHashes.length > 0, "a BlockStored names at least one block");
        Checks.checkNotNull(parentBlockHash, "parentBlockHash");
        Checks.checkNotNull(tokenIds, "tokenIds");
        Checks.checkNotNegative(blockSize, "blockSize");
        Checks.requireArgument(
                tokenIds.length == 0 || tokenIds.length == (long) blockHashes.length * blockSize,
                "%d token ids for %d blocks of %d tokens",
                tokenIds.length,
                blockHashes.length,
                blockSize);
        Checks.checkNotNull(loraId, "loraId");
        Checks.checkNotNull(medium, "medium");
        blockHashes = blockHashes.clone();
        tokenIds = tokenIds.clone();
    }

    /** A copy of the block ids. */
    @Override
    public long[] blockHashes() {
        return blockHashes.clone();
    }

    /** A copy of the token ids. */
    @Override
    public int[] tokenIds() {
        return tokenIds.clone();
    }

    /** How many pages the run has. */
    public int blockCount() {
        return blockHashes.length;
    }

    /** The block id of page {@code index} of the run. */
    public long blockHash(int index) {
        return blockHashes[index];
    }

    /** How many token ids the event carries. */
    public int tokenCount() {
        return tokenIds.length;
    }

    /** Token id {@code index}, as the unsigned value SGLang sends. */
    public long tokenId(int index) {
        return Integer.toUnsignedLong(tokenIds[index]);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BlockStored s
                && Arrays.equals(s.blockHashes, blockHashes)
                && s.parentBlockHash.equals(parentBlockHash)
                && Arrays.equals(s.tokenIds, tokenIds)
                && s.blockSize == blockSize
                && s.loraId.equals(loraId)
                && s.medium == medium
                && Objects.equals(s.placement, placement);
    }

    @Override
    public int hashCode() {
        return (Arrays.hashCode(blockHashes) * 31 + Arrays.hashCode(tokenIds)) * 31 + medium.hashCode();
    }

    @Override
    public String toString() {
        return "BlockStored[" + medium + (placement == null ? "" : ", " + placement) + ", blocks "
                + Arrays.toString(blockHashes) + ", parent "
                + (parentBlockHash.isPresent() ? parentBlockHash.getAsLong() : "none") + ", " + tokenIds.length
                + " tokens of " + blockSize + " per block, lora " + (loraId.isPresent() ? loraId.getAsInt() : "none")
                + "]";
    }
}
