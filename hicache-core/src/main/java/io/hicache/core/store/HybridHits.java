package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PagePart;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * How many pages of a prefix every part of a hybrid model can restore ({@link PagePart}): the greatest {@code e}
 * such that the KV holds pages {@code [0, e)}, each all-pages part holds {@code [0, e)}, and each trailing part of
 * window {@code W} holds {@code [e - W, e)} (fewer at the start of the prompt). Not the minimum of what each part
 * alone can restore: with trailing parts that differs when their pages have gaps (SGLang issue #39147: a state
 * after page 2 and a window ending at page 3 restore nothing). A backup that wrote some parts of a page and not
 * others leaves an endpoint that is not legal for every part, so it is never a hit that restores wrong state.
 *
 * <p>Stateless; the store query blocks the calling thread up to its deadline.
 */
public final class HybridHits {
    private HybridHits() {}

    /** How many pages from {@code from} on (of {@code [from, to)}) a part holds. */
    @FunctionalInterface
    public interface Presence {
        int heldFrom(int from, int to);
    }

    /**
     * A trailing part: its window in pages and where its pages are.
     *
     * @param windowPages pages the part must hold before an endpoint (at least 1)
     * @param presence    what it holds
     */
    public record Trailing(int windowPages, Presence presence) {
        public Trailing {
            Checks.checkPositive(windowPages, "windowPages");
            Checks.checkNotNull(presence, "presence");
        }
    }

    /**
     * The greatest endpoint {@code e <= kvPages} every part can restore. A trailing part's missing page {@code m}
     * rules out every endpoint in {@code (m, m + W]}, so the search jumps to {@code m}: one query per missing page
     * met, not one per page.
     *
     * @param kvPages        how many leading pages the KV holds
     * @param allPagesBounds per all-pages part, how many leading pages it holds
     * @param trailing       the trailing parts
     */
    public static int restorablePages(int kvPages, int[] allPagesBounds, List<Trailing> trailing) {
        Checks.checkNotNegative(kvPages, "kvPages");
        Checks.checkNotNull(allPagesBounds, "allPagesBounds");
        Checks.checkNotNull(trailing, "trailing");
        int e = kvPages;
        for (int bound : allPagesBounds) {
            e = Math.min(e, bound);
        }
        search:
        while (e > 0) {
            for (Trailing t : trailing) {
                int from = Math.max(0, e - t.windowPages());
                int held = t.presence().heldFrom(from, e);
                if (held < e - from) {
                    e = from + held; // the first missing page: the greatest endpoint whose window leaves it out
                    continue search;
                }
            }
            return e;
        }
        return 0;
    }

    /**
     * What a part needs of a prefix, for {@link #restorablePages(PageStore, Namespace, List, List, Deadline)}.
     *
     * @param part        the part
     * @param windowPages for a trailing part, its window in pages (ignored for an all-pages part)
     * @param namespace   where the part is, if not {@code kv.forPart(part)}: an MLA model shares its KV across TP
     *                    ranks (rank 0 of 1) but keeps its recurrent state per rank, so that part's namespace starts
     *                    from the rank's own ({@code kv.withTensorParallel(rank, size).forPart(part)})
     */
    public record PartQuery(PagePart part, int windowPages, Optional<Namespace> namespace) {
        /** A part in {@code kv.forPart(part)}. */
        public PartQuery(PagePart part, int windowPages) {
            this(part, windowPages, Optional.empty());
        }

        public PartQuery {
            Checks.checkNotNull(part, "part");
            Checks.checkNotNull(namespace, "namespace");
            Checks.requireArgument(part != PagePart.KV, "the KV is always asked; name the other parts");
            Checks.requireArgument(
                    part.restore() == PagePart.Restore.ALL_PAGES || windowPages > 0,
                    "a trailing part needs a window of at least one page, was %d",
                    windowPages);
        }

        /** The parts a model of {@code geometry} keeps beside its KV, in pages of {@code pageTokens} tokens. */
        public static List<PartQuery> of(HybridGeometry geometry, int pageTokens) {
            List<PartQuery> parts = new ArrayList<>();
            if (geometry.window().isPresent()) {
                parts.add(new PartQuery(PagePart.SLIDING_WINDOW, geometry.windowPages(pageTokens)));
            }
            if (geometry.stateBytes().isPresent()) {
                parts.add(new PartQuery(PagePart.RECURRENT_STATE, 1));
            }
            return parts;
        }
    }

    /**
     * How many pages of {@code hashes} (a prefix's page hashes, in order) {@code store} can restore with every one
     * of {@code parts}, each in its namespace ({@link Namespace#forPart}) under the KV page's hash.
     *
     * @throws HiCacheException STORE_IO when the store fails or does not answer before the deadline
     */
    public static int restorablePages(
            PageStore store, Namespace kv, List<PageHash> hashes, List<PartQuery> parts, Deadline deadline) {
        Checks.checkNotNull(store, "store");
        Checks.checkNotNull(kv, "kv");
        Checks.checkNotNull(hashes, "hashes");
        Checks.checkNotNull(parts, "parts");
        Checks.checkNotNull(deadline, "deadline");
        int kvPages = await(store.leadingHits(keys(kv, hashes), deadline), deadline);
        List<Integer> bounds = new ArrayList<>();
        List<Trailing> trailing = new ArrayList<>();
        for (PartQuery q : parts) {
            Namespace ns = q.namespace().orElseGet(() -> kv.forPart(q.part()));
            List<PageHash> prefix = hashes.subList(0, kvPages);
            if (q.part().restore() == PagePart.Restore.ALL_PAGES) {
                bounds.add(kvPages == 0 ? 0 : await(store.leadingHits(keys(ns, prefix), deadline), deadline));
            } else {
                // Which pages the part holds, asked of every page at once: a state kept only at a node's end would
                // otherwise cost the search a query per page it walks back.
                boolean[] has = heldEach(store, ns, prefix, deadline);
                trailing.add(new Trailing(q.windowPages(), (from, to) -> {
                    int n = 0;
                    while (from + n < to && has[from + n]) {
                        n++;
                    }
                    return n;
                }));
            }
        }
        return restorablePages(
                kvPages, bounds.stream().mapToInt(Integer::intValue).toArray(), trailing);
    }

    private static List<StoreKey> keys(Namespace ns, List<PageHash> hashes) {
        return hashes.stream().map(ns::key).toList();
    }

    /** Per page, whether the store holds it: one single-page query each, all in flight together. */
    private static boolean[] heldEach(PageStore store, Namespace ns, List<PageHash> hashes, Deadline deadline) {
        List<CompletableFuture<Integer>> each = new ArrayList<>(hashes.size());
        for (PageHash h : hashes) {
            each.add(store.leadingHits(List.of(ns.key(h)), deadline));
        }
        boolean[] has = new boolean[hashes.size()];
        for (int i = 0; i < has.length; i++) {
            has[i] = await(each.get(i), deadline) == 1;
        }
        return has;
    }

    private static int await(CompletableFuture<Integer> call, Deadline deadline) {
        try {
            return call.get(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new HiCacheException(ErrorCode.STORE_IO, "the store did not answer before the deadline", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.STORE_IO, "interrupted while asking the store", e);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof HiCacheException h
                    ? h
                    : new HiCacheException(ErrorCode.STORE_IO, "the store failed: " + e.getCause(), e.getCause());
        }
    }
}
