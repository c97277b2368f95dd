package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStore;
import io.hicache.core.tree.RadixTree;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Answers {@link HiCache#prefixHits} and {@link HiCache#prefixHitsInMemory}: the tree is read under the cache's lock
 * without a hit (no recency, no retention refresh, no split, no pin); the page store is asked, batch by batch of
 * {@code hicache-storage-batch-pages}, for the leading hits of the prompt's page keys, without the lock.
 *
 * <p>Stateless; its methods are thread-safe. A store it acquires is released when its answer is complete.
 */
final class PrefixQuery {
    private PrefixQuery() {}

    /** The device and host parts, now; the store not asked. */
    static PrefixHits inMemory(CacheCore core, String extraKey, int[] tokens) {
        core.lock.lock();
        try {
            core.checkOpen();
            RadixTree.HeldPages held = core.tree.heldPages(extraKey, tokens);
            return new PrefixHits(
                    core.config.pageSizeTokens(),
                    held.devicePages(),
                    held.hostPages(),
                    0,
                    PrefixHits.StoreAnswer.NOT_ASKED);
        } finally {
            core.lock.unlock();
        }
    }

    /** The device and host parts now, and the store's once it answers (or does not, by {@code timeout}). */
    static CompletableFuture<PrefixHits> withStore(CacheCore core, String extraKey, int[] tokens, Duration timeout) {
        PrefixHits memory = inMemory(core, extraKey, tokens);
        if (!core.stores.attached()) {
            return CompletableFuture.completedFuture(answered(memory, 0, PrefixHits.StoreAnswer.NO_STORE));
        }
        // A store known to be silent is not asked (the answer would come at the deadline, and say nothing), but for
        // a trial now and then, as a prefetch would take one: an answer in time ends the silence for all.
        boolean ask = core.admitStoreWork(TimedPageStore.Kind.QUERY) != TimedPageStore.Admission.NO;
        PageStore store = ask ? core.stores.acquire() : null;
        if (store == null) {
            return CompletableFuture.completedFuture(answered(memory, 0, PrefixHits.StoreAnswer.NO_ANSWER));
        }
        CompletableFuture<PrefixHits> out = new CompletableFuture<>();
        out.whenComplete((hits, error) -> core.stores.release(store));
        try {
            ask(core, store, keys(core, extraKey, tokens), 0, 0, Deadline.after(timeout), memory, out);
        } catch (RuntimeException e) {
            out.complete(answered(memory, 0, PrefixHits.StoreAnswer.NO_ANSWER));
        }
        return out;
    }

    /** The store keys of {@code tokens}' whole pages, chained as the tree chains them (from the extra key's root). */
    private static List<StoreKey> keys(CacheCore core, String extraKey, int[] tokens) {
        int pageSize = core.config.pageSizeTokens();
        int end = tokens.length / pageSize * pageSize;
        PageHasher hasher = new PageHasher(pageSize);
        PageHashes hashes = extraKey.isEmpty()
                ? hasher.hashPages(tokens, 0, end)
                : hasher.hashPages(tokens, 0, end, PageHasher.extraKeyRoot(extraKey));
        List<StoreKey> keys = new ArrayList<>(hashes.size());
        for (int i = 0; i < hashes.size(); i++) {
            keys.add(core.namespace.key(hashes.get(i)));
        }
        return keys;
    }

    /** Asks about {@code keys[from ..]} having counted {@code hits} before them; completes {@code out} at the end. */
    private static void ask(
            CacheCore core,
            PageStore store,
            List<StoreKey> keys,
            int from,
            int hits,
            Deadline deadline,
            PrefixHits memory,
            CompletableFuture<PrefixHits> out) {
        if (from >= keys.size()) {
            out.complete(answered(memory, hits, PrefixHits.StoreAnswer.COUNTED));
            return;
        }
        int to = Math.min(keys.size(), from + core.config.storageBatchPages());
        CompletableFuture<Integer> call;
        try {
            call = store.leadingHits(keys.subList(from, to), deadline);
        } catch (RuntimeException e) {
            call = CompletableFuture.failedFuture(e);
        }
        // A store that never answers breaks its contract; the answer still comes, the deadline and a grace after.
        long giveUpMillis = deadline.remaining().plus(TimedPageStore.GRACE).toMillis();
        call.copy().orTimeout(giveUpMillis, TimeUnit.MILLISECONDS).whenComplete((n, e) -> {
            if (e != null) {
                out.complete(answered(memory, hits, PrefixHits.StoreAnswer.NO_ANSWER));
            } else if (n < to - from) {
                out.complete(answered(memory, hits + n, PrefixHits.StoreAnswer.COUNTED));
            } else {
                ask(core, store, keys, to, hits + n, deadline, memory, out);
            }
        });
    }

    private static PrefixHits answered(PrefixHits memory, int storePages, PrefixHits.StoreAnswer how) {
        return new PrefixHits(memory.pageSizeTokens(), memory.devicePages(), memory.hostPages(), storePages, how);
    }
}
