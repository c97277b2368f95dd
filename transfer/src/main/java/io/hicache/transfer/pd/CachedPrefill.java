package io.hicache.transfer.pd;

import io.hicache.core.Deadline;
import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.util.Checks;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * A prefill rank on the cache's tiers (issue 20, part 1): each request matches its prompt in the rank's
 * {@link HiCache} (device, host, and a prefetch from the page store under the cache's policy), the engine computes
 * only the rest into pages the cache allocates, the pages are committed (cached and backed up as for any request),
 * and the whole prompt's pages, the cached prefix included, go to the decode. The {@link PrefillRank} must run over
 * the cache's own device pool ({@link #over}). Thread-safe as the cache and the rank are; {@link #close()} closes
 * neither (the caller owns both).
 */
public final class CachedPrefill implements AutoCloseable {
    /** What the engine does for the pages the cache does not hold: compute their KV into the device pages given. */
    @FunctionalInterface
    public interface Compute {
        /**
         * Writes the KV of the prompt's page positions {@code fromPosition ..} into {@code pages} (one device page per
         * position, the last one maybe partial).
         */
        void compute(int[] prompt, int fromPosition, int[] pages);
    }

    /** How one prefill went: prompt tokens served from the cache, tokens computed, and the handoff's final state. */
    public record Outcome(
            int cachedTokens,
            int computedTokens,
            KvPoll state,
            @Nullable String failure) {}

    private final HiCache cache;
    private final PrefillRank rank;

    private CachedPrefill(HiCache cache, PrefillRank rank) {
        this.cache = cache;
        this.rank = rank;
    }

    /**
     * A prefill on {@code cache} through {@code rank}, which must have been started over the cache's device pool (its
     * {@link RankSpec} with the cache's geometry, page size and device pages, its KV region registered over
     * {@link HiCache#hostVisibleDeviceMemory()}).
     */
    public static CachedPrefill over(HiCache cache, PrefillRank rank) {
        Checks.checkNotNull(cache, "cache");
        Checks.checkNotNull(rank, "rank");
        checkSamePool(cache, rank.spec(), "prefill");
        return new CachedPrefill(cache, rank);
    }

    /**
     * Prefills {@code prompt} for the decode's {@code room}: cache lookup (waiting for the prefetch as the cache's
     * policy says), {@code compute} for the rest, commit, then the handoff of every prompt page with {@code aux}; waits
     * until the handoff is final or {@code deadline}. The request's pages stay pinned until the handoff is final: past
     * the deadline a handoff still running keeps them until it ends (a virtual thread closes the request then).
     */
    public Outcome prefill(long room, String requestId, int[] prompt, Compute compute, byte[] aux, Deadline deadline)
            throws InterruptedException {
        int pageSize = cache.config().pageSizeTokens();
        int positions = (prompt.length + pageSize - 1) / pageSize;
        CacheRequest request = cache.request(requestId, prompt);
        KvSender sender = rank.sender(room);
        boolean handedOff = false;
        try {
            while (!request.tryEndPrefetch()) {
                if (!pause(deadline)) {
                    return failed("the prefetch of " + requestId + " did not end in time");
                }
            }
            if (!request.loadBack(Integer.MAX_VALUE).await(deadline.remaining())) {
                return failed("the load-back of " + requestId + " did not finish in time");
            }
            int[] cached = request.prefixPages();
            int[] fresh = request.allocate(positions - cached.length);
            int[] pages = Arrays.copyOf(cached, positions);
            System.arraycopy(fresh, 0, pages, cached.length, fresh.length);
            compute.compute(prompt, cached.length, fresh);
            int whole = prompt.length / pageSize;
            request.commit(Arrays.copyOf(prompt, whole * pageSize), Arrays.copyOf(pages, whole), true);
            while (sender.poll() == KvPoll.BOOTSTRAPPING) {
                if (!pause(deadline)) {
                    return failed("no destination for room " + room + " in time");
                }
            }
            if (sender.poll() != KvPoll.FAILED) {
                sender.send(pages, true, aux);
                handedOff = true;
            }
            while (!sender.poll().isFinal()) {
                if (!pause(deadline)) {
                    return failed("the handoff of room " + room + " did not end in time");
                }
            }
            return new Outcome(
                    cached.length * pageSize,
                    prompt.length - cached.length * pageSize,
                    sender.poll(),
                    sender.failureReason());
        } finally {
            if (handedOff && !sender.poll().isFinal()) {
                // the transport may still read these pages: unpin them only once it cannot
                Thread.ofVirtual().name("hicache-prefill-unpin-" + room).start(() -> closeWhenFinal(sender, request));
            } else {
                sender.close();
                request.close();
            }
        }
    }

    private static void closeWhenFinal(KvSender sender, CacheRequest request) {
        try {
            while (!sender.poll().isFinal()) {
                Thread.sleep(5);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return; // interrupted: the pages stay pinned rather than be reused under a transfer
        }
        sender.close();
        request.close();
    }

    /** Refuses a rank whose pool is not the cache's device pool. */
    static void checkSamePool(HiCache cache, RankSpec spec, String role) {
        Checks.requireArgument(
                spec.pageSizeTokens() == cache.config().pageSizeTokens()
                        && spec.kvPages() == cache.device().buffers().pages()
                        && spec.format().geometry().equals(cache.format().geometry()),
                "the %s rank's pool (%s pages of %s tokens, %s) is not the cache's (%s pages of %s tokens, %s)",
                role,
                spec.kvPages(),
                spec.pageSizeTokens(),
                spec.format().geometry(),
                cache.device().buffers().pages(),
                cache.config().pageSizeTokens(),
                cache.format().geometry());
    }

    private static Outcome failed(String why) {
        return new Outcome(0, 0, KvPoll.FAILED, why);
    }

    /** Waits a millisecond; false, without waiting, once {@code deadline} is over. */
    static boolean pause(Deadline deadline) throws InterruptedException {
        if (deadline.isOver()) {
            return false;
        }
        Thread.sleep(1);
        return true;
    }

    @Override
    public void close() {
        // the cache and the rank are the caller's
    }
}
