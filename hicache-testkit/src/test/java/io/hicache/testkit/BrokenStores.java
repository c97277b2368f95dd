package io.hicache.testkit;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Stores with one deliberate bug each, built on the reference store, and a kit subclass for each. They are
 * nested classes so the build does not run them as tests; {@link KitCatchesBrokenStoresTest} runs them and
 * checks that the kit fails them.
 */
final class BrokenStores {
    private BrokenStores() {}

    /** Forwards everything to an in-memory store; each broken store overrides one thing. */
    abstract static class Forwarding extends AbstractPageStore {
        final PageStore inner = new InMemoryPageStore(1L << 30);

        Forwarding(String name) {
            super(name, "broken on purpose", new InMemoryPageStore(1).capabilities());
        }

        @Override
        protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
            return inner.leadingHits(keys, deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
            return inner.get(targets, deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
            return inner.put(sources, deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
            return inner.delete(keys, deadline);
        }

        @Override
        protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
            return inner.clear(namespace, deadline);
        }

        @Override
        protected CompletableFuture<Void> doClearAll(Deadline deadline) {
            return inner.clearAll(deadline);
        }

        @Override
        protected void doClose() {
            inner.close();
        }
    }

    /** Reports OK but delivers one wrong byte per page. */
    static final class WrongBytesStore extends Forwarding {
        WrongBytesStore() {
            super("wrong-bytes");
        }

        @Override
        protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
            return inner.get(targets, deadline).thenApply(result -> {
                for (int i = 0; i < result.size(); i++) {
                    if (result.status(i) == PageStatus.OK) {
                        MemorySegment page = targets.page(i);
                        long at = page.byteSize() - 1;
                        page.set(ValueLayout.JAVA_BYTE, at, (byte) (page.get(ValueLayout.JAVA_BYTE, at) + 1));
                    }
                }
                return result;
            });
        }
    }

    /** Counts every stored key, not just the leading ones: hits past a gap. */
    static final class GapCountingStore extends Forwarding {
        GapCountingStore() {
            super("gap-counting");
        }

        @Override
        protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
            int stored = 0;
            for (StoreKey key : keys) {
                stored += inner.leadingHits(List.of(key), deadline).join();
            }
            return CompletableFuture.completedFuture(stored);
        }
    }

    /** Keys pages by hash alone, as SGLang does: every namespace shares one page per hash. */
    static final class NamespaceLeakingStore extends Forwarding {
        private static final Namespace ONE =
                Namespace.of("everyone", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

        NamespaceLeakingStore() {
            super("namespace-leaking");
        }

        private static List<StoreKey> flatten(List<StoreKey> keys) {
            List<StoreKey> flat = new ArrayList<>(keys.size());
            for (StoreKey k : keys) {
                flat.add(ONE.key(k.hash()));
            }
            return flat;
        }

        private static PageBatch flatten(PageBatch batch) {
            PageBatch.Builder flat = PageBatch.builder(batch.size());
            for (int i = 0; i < batch.size(); i++) {
                PageHash hash = batch.key(i).hash();
                flat.add(ONE.key(hash), batch.page(i));
            }
            return flat.build();
        }

        @Override
        protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
            return inner.leadingHits(flatten(keys), deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
            return inner.get(flatten(targets), deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
            return inner.put(flatten(sources), deadline);
        }

        @Override
        protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
            return inner.delete(flatten(keys), deadline);
        }

        @Override
        protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
            return inner.clearAll(deadline);
        }
    }

    /**
     * An evicting store of 8 MiB that evicts pages in the order they were put, a batch first page first: a chain's
     * prefix goes before its suffix, leaving a hole in a cached prefix.
     */
    static final class PrefixFirstEvictingStore extends Forwarding {
        private static final long CAPACITY = 8L << 20;
        private final java.util.LinkedHashMap<StoreKey, Long> order = new java.util.LinkedHashMap<>();
        private long bytes;

        PrefixFirstEvictingStore() {
            super("prefix-first-evicting");
        }

        @Override
        protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
            return inner.put(sources, deadline).thenApply(r -> {
                synchronized (order) {
                    for (int i = 0; i < sources.size(); i++) {
                        if (r.status(i) == io.hicache.core.store.PageStatus.OK
                                && order.putIfAbsent(
                                                sources.key(i), sources.page(i).byteSize())
                                        == null) {
                            bytes += sources.page(i).byteSize();
                        }
                    }
                    List<StoreKey> evict = new java.util.ArrayList<>();
                    var it = order.entrySet().iterator();
                    while (bytes > CAPACITY && it.hasNext()) {
                        var e = it.next();
                        evict.add(e.getKey());
                        bytes -= e.getValue();
                        it.remove();
                    }
                    if (!evict.isEmpty()) {
                        inner.delete(evict, deadline).join();
                    }
                }
                return r;
            });
        }

        @Override
        protected long capacityBytes() {
            return CAPACITY;
        }

        @Override
        protected long storedBytes() {
            synchronized (order) {
                return bytes;
            }
        }

        @Override
        public String toString() {
            return "prefix-first-evicting";
        }
    }

    /** The kit against {@link PrefixFirstEvictingStore}, which declares {@code EVICTING}. */
    static final class PrefixFirstEvictingKit extends PageStoreConformanceKit {
        @Override
        protected PageStore openStore() {
            return new EvictingCapabilities(new PrefixFirstEvictingStore());
        }
    }

    /** {@code store} declaring {@code EVICTING} as well. */
    static final class EvictingCapabilities extends io.hicache.core.store.ForwardingPageStore {
        EvictingCapabilities(PageStore store) {
            super(store);
        }

        @Override
        public io.hicache.core.store.StoreCapabilities capabilities() {
            io.hicache.core.store.StoreCapabilities c = delegate.capabilities();
            java.util.Set<io.hicache.core.store.Capability> features = new java.util.HashSet<>(c.features());
            features.add(io.hicache.core.store.Capability.EVICTING);
            return new io.hicache.core.store.StoreCapabilities(features, c.maxPageBytes(), c.preferredBatchKeys());
        }
    }

    /** The kit against {@link WrongBytesStore}. */
    static final class WrongBytesKit extends PageStoreConformanceKit {
        @Override
        protected PageStore openStore() {
            return new WrongBytesStore();
        }
    }

    /** The kit against {@link GapCountingStore}. */
    static final class GapCountingKit extends PageStoreConformanceKit {
        @Override
        protected PageStore openStore() {
            return new GapCountingStore();
        }
    }

    /** The kit against {@link NamespaceLeakingStore}. */
    static final class NamespaceLeakingKit extends PageStoreConformanceKit {
        @Override
        protected PageStore openStore() {
            return new NamespaceLeakingStore();
        }
    }
}
