package io.hicache.core.cache;

import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;

/**
 * A hybrid model's parts at the end of a prefix, beside its full-attention KV (docs/embedding.md, "Hybrid models"):
 * the sliding-window layers' KV of the prefix's last pages and the recurrent state (Mamba, linear attention) after its
 * last page. An engine hands them to {@link CacheRequest#commit(int[], int[], boolean, PrefixParts)} where it has a
 * page-aligned state to keep, and passes targets of the same shape to {@link CacheRequest#restoreParts} to get a
 * cached prefix's parts back.
 *
 * <p>Window pages are in the flat layout of {@link io.hicache.core.memory.KvPool#readPage} (what a pool of
 * {@link io.hicache.core.page.HybridGeometry#windowFormat} reads and writes), one page of window KV each; the state is
 * one checkpoint of {@code stateBytes}. Immutable; the segments are the caller's, and the cache copies from or into
 * them during the call and keeps no reference.
 *
 * @param windowPages the window KV of the prefix's last {@code min(windowPages, pages)} pages, oldest first; empty for
 *                    a model without window layers
 * @param state       the recurrent state after the prefix's last page; empty for a model without recurrent layers
 */
public record PrefixParts(List<MemorySegment> windowPages, Optional<MemorySegment> state) {
    public PrefixParts {
        windowPages = List.copyOf(Checks.checkNotNull(windowPages, "windowPages"));
        Checks.checkNotNull(state, "state");
    }

    /** The parts of a model with recurrent layers only. */
    public static PrefixParts state(MemorySegment state) {
        return new PrefixParts(List.of(), Optional.of(state));
    }
}
