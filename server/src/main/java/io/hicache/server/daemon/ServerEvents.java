package io.hicache.server.daemon;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockIds;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageStore;
import java.util.List;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.jspecify.annotations.Nullable;

/**
 * The daemon's KV events ({@code server.kv-events-config}): a page stored in the slab is a {@link BlockStored} in
 * {@link Medium#CPU}, one written behind to L3 a BlockStored in the L3 store's medium ({@link Medium#ofStore}); pages
 * evicted or deleted are {@link BlockRemoved}; a CLEAR or CLEAR_ALL is {@link AllBlocksCleared}. The daemon sees pages,
 * not token sequences: each BlockStored names one page, with no parent, no token ids and a block size of 0, and no
 * event names a namespace. Builds nothing when events are off. Thread-safe; the slab cache closes it last.
 */
final class ServerEvents implements AutoCloseable {
    private static final int[] NO_TOKENS = new int[0];

    private final KvEventSink sink;
    /** Changes when another L3 store is attached (STORE). */
    private volatile Medium l3Medium;

    ServerEvents(KvEventSink sink, Medium l3Medium) {
        this.sink = sink;
        this.l3Medium = l3Medium;
    }

    /** The medium KV events name for pages in {@code store} (null: none). */
    static Medium mediumOf(@Nullable PageStore store) {
        return Medium.ofStore(store != null && store.capabilities().has(Capability.SHARED));
    }

    /** Pages written behind from now on go to a store of {@code medium}. */
    void l3Medium(Medium medium) {
        this.l3Medium = medium;
    }

    boolean enabled() {
        return sink.enabled();
    }

    KvEventSink sink() {
        return sink;
    }

    /** {@code key}'s page is in the slab now. */
    void storedHere(StoreKey key) {
        stored(key, Medium.CPU);
    }

    /** {@code key}'s page reached L3. */
    void writtenBehind(StoreKey key) {
        stored(key, l3Medium);
    }

    private void stored(StoreKey key, Medium medium) {
        if (sink.enabled()) {
            sink.emit(new BlockStored(
                    new long[] {BlockIds.of(key.hash())},
                    OptionalLong.empty(),
                    NO_TOKENS,
                    0,
                    OptionalInt.empty(),
                    medium));
        }
    }

    /** The pages of {@code keys} left the slab. */
    void removedHere(List<StoreKey> keys) {
        removed(keys, Medium.CPU);
    }

    /** The pages of {@code keys} left L3. */
    void removedFromL3(List<StoreKey> keys) {
        removed(keys, l3Medium);
    }

    private void removed(List<StoreKey> keys, Medium medium) {
        if (sink.enabled() && !keys.isEmpty()) {
            long[] ids = new long[keys.size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = BlockIds.of(keys.get(i).hash());
            }
            sink.emit(new BlockRemoved(ids, medium));
        }
    }

    /** Pages were cleared: the daemon cannot name the ones L3 dropped, so a router forgets all it knows of it. */
    void cleared() {
        if (sink.enabled()) {
            sink.emit(new AllBlocksCleared());
        }
    }

    /** Publishes what is queued, then closes the publisher. */
    @Override
    public void close() {
        sink.close();
    }
}
