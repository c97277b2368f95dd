package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PagePart;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.HybridHits;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A hybrid model's parts between the page store and {@link HostParts}: where a prefetch asks how far the KV it found
 * can be restored (every part, in the host or the store: SGLang #38452 asks the store only while the host has nothing)
 * and brings that end's missing parts to the host; and the write of a committed end's parts to the store.
 *
 * <p>Stateless. {@link #fetchEnd} blocks its caller (the prefetch's query loop) up to the deadline.
 */
final class StoreParts {
    private StoreParts() {}

    /**
     * The greatest {@code e <= kvPages} that the host's and the store's parts restore together, with its parts
     * brought to the host; what the host alone restores if bringing them failed.
     *
     * @param hashes the prefix's page hashes, at least {@code kvPages}
     */
    static int fetchEnd(
            CacheCore cache, HostParts parts, PageStore store, List<PageHash> hashes, int kvPages, Deadline deadline) {
        HostParts.Held held = (part, some) -> {
            boolean[] has = parts.heldHere(part, some);
            List<CompletableFuture<Integer>> asks = new ArrayList<>(); // one per page the host lacks, all in flight
            for (int i = 0; i < has.length; i++) {
                if (!has[i]) {
                    asks.add(ask(store, List.of(cache.partNamespace(part).key(some.get(i))), deadline));
                }
            }
            int next = 0;
            for (int i = 0; i < has.length; i++) {
                has[i] = has[i] || await(asks.get(next++), deadline) == 1;
            }
            return has;
        };
        int e = HybridHits.restorablePages(kvPages, new int[0], parts.trailing(hashes, held));
        if (e == 0) {
            return 0;
        }
        HostParts.Fill fill = parts.beginFill(hashes, e);
        if (fill == null) { // kept in the host already, or no room for it
            return parts.restorablePages(hashes, kvPages);
        }
        boolean ok = true;
        if (!fill.parts().isEmpty()) {
            List<StoreKey> keys = new ArrayList<>();
            for (int i = 0; i < fill.parts().size(); i++) {
                keys.add(cache.partNamespace(fill.parts().get(i))
                        .key(fill.hashes().get(i)));
            }
            CompletableFuture<BatchResult> get;
            try {
                get = store.get(PageBatch.of(keys, fill.targets()), deadline);
            } catch (RuntimeException x) {
                get = CompletableFuture.failedFuture(x);
            }
            BatchResult r = awaitResult(get, deadline);
            ok = r != null && r.allSucceeded();
            if (!ok) {
                cache.metrics.fail("prefetch: hybrid parts get " + (r == null ? "failed" : r.toString()));
            }
            if (!get.isDone()) { // the store may still write the slots: they are given back once it stops
                get.whenComplete((v, x) -> parts.finishFill(fill, false));
                return parts.restorablePages(hashes, kvPages);
            }
        }
        parts.finishFill(fill, ok);
        return ok ? e : parts.restorablePages(hashes, kvPages);
    }

    /**
     * Writes the end of {@code hashes.size()} pages' parts to {@code store} (pinned in the host until the write is
     * done); window pages only where this rank uploads KV ({@code hicache-mla-upload-rank}). A failed write is counted;
     * what was written of it is never a hit without the rest ({@link HybridHits}).
     */
    static void upload(CacheCore cache, HostParts parts, List<PageHash> hashes) {
        PageStore store = cache.stores.acquire();
        if (store == null) {
            return;
        }
        HostParts.Hold hold = parts.pinAt(hashes, hashes.size());
        if (hold == null) {
            cache.stores.release(store);
            return;
        }
        List<PagePart> kinds = new ArrayList<>();
        List<MemorySegment> bytes = parts.slices(hold, kinds);
        PageBatch.Builder batch = PageBatch.builder(kinds.size());
        int w = 0;
        for (int i = 0; i < kinds.size(); i++) {
            PagePart part = kinds.get(i);
            PageHash h = part == PagePart.SLIDING_WINDOW ? hold.window.get(w++) : hashes.getLast();
            if (part == PagePart.RECURRENT_STATE || cache.uploadsHere) {
                batch.add(cache.partNamespace(part).key(h), bytes.get(i));
            }
        }
        cache.outstanding.incrementAndGet(); // work in flight: awaitIdle and close wait for it
        CompletableFuture<BatchResult> put;
        try {
            put = store.put(batch.build(), Deadline.after(cache.config.storageTimeout()));
        } catch (RuntimeException e) {
            put = CompletableFuture.failedFuture(e);
        }
        put.whenComplete((r, e) -> {
            try {
                parts.release(hold);
                cache.stores.release(store);
                if (e != null || !r.allSucceeded()) {
                    cache.metrics.fail(
                            "upload: hybrid parts " + (e != null ? e.getClass().getSimpleName() : r.toString()));
                }
            } finally {
                cache.outstanding.decrementAndGet();
            }
        });
    }

    private static CompletableFuture<Integer> ask(PageStore store, List<StoreKey> keys, Deadline deadline) {
        try {
            return store.leadingHits(keys, deadline);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private static int await(CompletableFuture<Integer> call, Deadline deadline) {
        try {
            return call.get(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 0;
        } catch (Exception e) { // an error or no answer in time: not held, as the store contract counts it
            return 0;
        }
    }

    private static @Nullable BatchResult awaitResult(CompletableFuture<BatchResult> call, Deadline deadline) {
        try {
            // the store completes promptly after the deadline (its contract): the grace lets it say how
            return call.get(deadline.remaining().plus(TimedPageStore.GRACE).toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (Exception e) {
            return null;
        }
    }
}
