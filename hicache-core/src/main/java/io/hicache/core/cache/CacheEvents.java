package io.hicache.core.cache;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockIds;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHashes;
import io.hicache.core.tree.TreeNode;
import java.util.Arrays;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * Turns what the cache does to its tree into SGLang's KV events, at the points SGLang's HiRadixCache emits them: a
 * {@link BlockStored} per run of pages (a tree node) that reaches a tier, with the block id of the page before it,
 * its tokens and the page size; a {@link BlockRemoved} per run that leaves one. Builds nothing when events are off.
 * The cache calls it under its lock, except the uploader, which captures a {@link Run} under the lock and reports
 * it after the store's answer. Thread-safe (the sink is); the cache closes it.
 */
final class CacheEvents implements AutoCloseable {
    private final KvEventSink sink;
    private final int pageSizeTokens;
    /** Where uploads land: DISK, or EXTERNAL for a shared store; set again when another store is attached. */
    volatile Medium storeMedium;

    /** A run of pages captured for later: block ids, the block before it, its tokens. Immutable once made. */
    record Run(long[] blockIds, OptionalLong parent, int[] tokens) {}

    CacheEvents(KvEventSink sink, int pageSizeTokens, Medium storeMedium) {
        this.sink = sink;
        this.pageSizeTokens = pageSizeTokens;
        this.storeMedium = storeMedium;
    }

    boolean enabled() {
        return sink.enabled();
    }

    KvEventSink sink() {
        return sink;
    }

    /** The run {@code n} holds now: for an event later, after the node may have changed. Call under the lock. */
    Run capture(TreeNode n) {
        return new Run(BlockIds.of(n.hashes()), parentOf(n), n.tokenIds());
    }

    /** {@code n}'s pages reached {@code medium}. Call under the lock. */
    void stored(TreeNode n, Medium medium) {
        if (sink.enabled()) {
            Run r = capture(n);
            sink.emit(new BlockStored(r.blockIds, r.parent, r.tokens, pageSizeTokens, OptionalInt.empty(), medium));
        }
    }

    /** Pages {@code [from, to)} of {@code run} reached {@code medium}. */
    void stored(Run run, int from, int to, Medium medium) {
        if (sink.enabled() && to > from) {
            OptionalLong parent = from == 0 ? run.parent : OptionalLong.of(run.blockIds[from - 1]);
            sink.emit(new BlockStored(
                    Arrays.copyOfRange(run.blockIds, from, to),
                    parent,
                    Arrays.copyOfRange(run.tokens, from * pageSizeTokens, to * pageSizeTokens),
                    pageSizeTokens,
                    OptionalInt.empty(),
                    medium));
        }
    }

    /** The pages {@code hashes} left {@code medium}. */
    void removed(PageHashes hashes, Medium medium) {
        if (sink.enabled() && !hashes.isEmpty()) {
            sink.emit(new BlockRemoved(BlockIds.of(hashes), medium));
        }
    }

    /** Everything announced before is gone from every tier (a reset). */
    void cleared() {
        if (sink.enabled()) {
            sink.emit(new AllBlocksCleared());
        }
    }

    /** The block id of the page before {@code n}: its parent's last page, none under the root. */
    private static OptionalLong parentOf(TreeNode n) {
        TreeNode p = n.parent();
        return p.isRoot() ? OptionalLong.empty() : OptionalLong.of(BlockIds.of(p.lastHash()));
    }

    /** Publishes what is queued, then closes the publisher. */
    @Override
    public void close() {
        sink.close();
    }
}
