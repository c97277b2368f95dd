package io.hicache.server.daemon;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockIds;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.Medium;
import io.hicache.core.events.Placement;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageStore;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.jspecify.annotations.Nullable;

/**
 * The daemon's KV events ({@code server.kv-events-config}): a page stored in the slab is a {@link BlockStored} in
 * {@link Medium#CPU}, one written behind to L3 a BlockStored in the L3 store's medium ({@link Medium#ofStore}); pages
 * evicted or deleted, and pages the L3 store drops on its own (capacity eviction, damaged pages), are
 * {@link BlockRemoved}; a CLEAR or CLEAR_ALL is {@link AllBlocksCleared}. The daemon sees pages, not token sequences:
 * each BlockStored names one page, with no parent, no token ids and a block size of 0. Every BlockStored and
 * BlockRemoved carries a {@link Placement}: the tier ({@code slab} or {@code l3}), the L3 store's name, and the pages'
 * namespace id. Builds nothing when events are off. Thread-safe; the slab cache closes it last.
 */
final class ServerEvents implements AutoCloseable {
    private static final int[] NO_TOKENS = new int[0];
    private static final String SLAB = "slab";
    private static final String L3 = "l3";

    private final KvEventSink sink;
    /** Change when another L3 store is attached (STORE). */
    private volatile Medium l3Medium;

    private volatile String l3Name;

    ServerEvents(KvEventSink sink, @Nullable PageStore l3) {
        this.sink = sink;
        this.l3Medium = mediumOf(l3);
        this.l3Name = l3 == null ? "" : l3.name();
        if (l3 != null) {
            l3.onDropped(this::droppedFromL3);
        }
    }

    /** The medium KV events name for pages in {@code store} (null: none). */
    static Medium mediumOf(@Nullable PageStore store) {
        return Medium.ofStore(store != null && store.capabilities().has(Capability.SHARED));
    }

    /** Pages written behind from now on go to {@code store}, whose own drops are announced from now on. */
    void l3Attached(PageStore store) {
        this.l3Medium = mediumOf(store);
        this.l3Name = store.name();
        store.onDropped(this::droppedFromL3);
    }

    boolean enabled() {
        return sink.enabled();
    }

    KvEventSink sink() {
        return sink;
    }

    /** {@code key}'s page is in the slab now. */
    void storedHere(StoreKey key) {
        stored(key, Medium.CPU, SLAB, "");
    }

    /** {@code key}'s page reached L3. */
    void writtenBehind(StoreKey key) {
        stored(key, l3Medium, L3, l3Name);
    }

    private void stored(StoreKey key, Medium medium, String tier, String store) {
        if (sink.enabled()) {
            sink.emit(new BlockStored(
                    new long[] {BlockIds.of(key.hash())},
                    OptionalLong.empty(),
                    NO_TOKENS,
                    0,
                    OptionalInt.empty(),
                    medium,
                    new Placement(tier, store, key.namespace().id())));
        }
    }

    /** The pages of {@code keys} left the slab. */
    void removedHere(List<StoreKey> keys) {
        removed(keys, Medium.CPU, SLAB, "");
    }

    /** The pages of {@code keys} left L3. */
    void removedFromL3(List<StoreKey> keys) {
        removed(keys, l3Medium, L3, l3Name);
    }

    /** L3 dropped a page on its own: evicted it for capacity, or found it damaged. */
    void droppedFromL3(String namespaceId, PageHash hash) {
        if (sink.enabled()) {
            sink.emit(
                    new BlockRemoved(new long[] {BlockIds.of(hash)}, l3Medium, new Placement(L3, l3Name, namespaceId)));
        }
    }

    /** One BlockRemoved per namespace of {@code keys}, in the order each namespace first comes. */
    private void removed(List<StoreKey> keys, Medium medium, String tier, String store) {
        if (!sink.enabled() || keys.isEmpty()) {
            return;
        }
        Map<String, List<StoreKey>> byNamespace = new LinkedHashMap<>();
        for (StoreKey k : keys) {
            byNamespace
                    .computeIfAbsent(k.namespace().id(), n -> new ArrayList<>())
                    .add(k);
        }
        for (Map.Entry<String, List<StoreKey>> e : byNamespace.entrySet()) {
            long[] ids = new long[e.getValue().size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = BlockIds.of(e.getValue().get(i).hash());
            }
            sink.emit(new BlockRemoved(ids, medium, new Placement(tier, store, e.getKey())));
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
