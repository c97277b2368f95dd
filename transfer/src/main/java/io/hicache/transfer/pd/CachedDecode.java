package io.hicache.transfer.pd;

import io.hicache.core.Deadline;
import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A decode rank on the cache's tiers (issue 20, part 2): each request's prompt is matched in the rank's
 * {@link HiCache} first, so that what the decode already holds (the earlier turns of the conversation it decoded) is
 * not sent again; the rest arrives into device pages the cache allocates, and once the handoff succeeded the prompt's
 * whole pages are inserted into the tree, so the next turn hits them. The request is handed back open: the engine
 * decodes into pages it allocates from it, commits the finished sequence ({@code finished} true backs the pages up to
 * the host and the page store, SGLang's decode offload) and closes it. The {@link DecodeRank} must run over the
 * cache's own device pool. Thread-safe as the cache and the rank are; {@link #close()} closes the requests whose pages
 * a failed handoff left quarantined, not the cache or the rank (the caller's).
 */
public final class CachedDecode implements AutoCloseable {
    /**
     * A received prompt: the open request (null when the handoff failed: it was closed), the device pages of every
     * prompt position, the tokens the decode already held and those that arrived, and the handoff's final state.
     */
    public record Received(
            @Nullable CacheRequest request,
            int @Nullable [] pages,
            int cachedTokens,
            int receivedTokens,
            KvPoll state,
            @Nullable String failure) {}

    private final HiCache cache;
    private final DecodeRank rank;
    private final long abortWaitMillis;
    private final boolean offload;
    /** Requests whose pages a failed handoff may still write: never freed while this decode runs. */
    private final List<CacheRequest> quarantined = new ArrayList<>();

    private CachedDecode(HiCache cache, DecodeRank rank, long abortWaitMillis, boolean offload) {
        this.cache = cache;
        this.rank = rank;
        this.abortWaitMillis = abortWaitMillis;
        this.offload = offload;
    }

    /**
     * A decode on {@code cache} through {@code rank}, started over the cache's device pool (as for
     * {@link CachedPrefill#over}); a failed handoff waits up to {@code abortWaitMillis} for the prefill to confirm that
     * no write can still land before its pages are freed; {@code offload} is
     * {@code disaggregation-decode-enable-offload-kvcache} (see {@link #finish}).
     */
    public static CachedDecode over(HiCache cache, DecodeRank rank, long abortWaitMillis, boolean offload) {
        Checks.checkNotNull(cache, "cache");
        Checks.checkNotNull(rank, "rank");
        CachedPrefill.checkSamePool(cache, rank.spec(), "decode");
        return new CachedDecode(cache, rank, abortWaitMillis, offload);
    }

    /** As above, configured by {@code settings}: its abort acknowledgement timeout (and a second), its offload. */
    public static CachedDecode over(HiCache cache, DecodeRank rank, PdSettings settings) {
        return over(cache, rank, settings.pd().abortAckTimeoutMillis() + 1_000, settings.decodeOffload());
    }

    /**
     * Ends a request {@link #receive} handed back, once decoding finished: commits {@code sequence}'s whole pages
     * ({@code pages}: one per position, the prompt's and those the engine allocated from the request) and closes it.
     * The pages stay in the decode's tree for the conversation's next turn; with offload on they are also backed up to
     * the host and uploaded to the page store, as a finished request's are (SGLang's decode offload).
     */
    public void finish(CacheRequest request, int[] sequence, int[] pages) {
        int pageSize = cache.config().pageSizeTokens();
        int whole = sequence.length / pageSize;
        try (request) {
            request.commit(Arrays.copyOf(sequence, whole * pageSize), Arrays.copyOf(pages, whole), offload);
        }
    }

    /**
     * Receives {@code prompt}'s KV for {@code room} from the prefill that {@code bootstrapUrl} leads to, its aux data
     * into {@code auxSlot}; waits until the handoff is final or {@code deadline} (then aborts it).
     */
    public Received receive(
            long room, String requestId, int[] prompt, String bootstrapUrl, int auxSlot, Deadline deadline)
            throws InterruptedException {
        int pageSize = cache.config().pageSizeTokens();
        int positions = (prompt.length + pageSize - 1) / pageSize;
        CacheRequest request = cache.request(requestId, prompt);
        int[] handedOut = null;
        try (KvReceiver receiver = rank.receiver(room, bootstrapUrl)) {
            while (!request.tryEndPrefetch()) {
                if (!CachedPrefill.pause(deadline)) {
                    return failed(request, receiver, null, "the prefetch of " + requestId + " did not end in time");
                }
            }
            if (!request.loadBack(Integer.MAX_VALUE).await(deadline.remaining())) {
                return failed(request, receiver, null, "the load-back of " + requestId + " did not finish in time");
            }
            int[] cached = request.prefixPages();
            int[] fresh = request.allocate(positions - cached.length);
            int[] pages = Arrays.copyOf(cached, positions);
            System.arraycopy(fresh, 0, pages, cached.length, fresh.length);
            receiver.init(pages, auxSlot, cached.length);
            handedOut = pages;
            while (!receiver.poll().isFinal()) {
                if (!CachedPrefill.pause(deadline)) {
                    return failed(request, receiver, pages, "the handoff of room " + room + " did not end in time");
                }
            }
            if (receiver.poll() != KvPoll.SUCCESS) {
                // final and not SUCCESS: FAILED, whose reason is set first
                return failed(
                        request,
                        receiver,
                        pages,
                        Checks.checkNotNull(receiver.failureReason(), "a failed handoff's reason"));
            }
            int whole = prompt.length / pageSize;
            request.commit(Arrays.copyOf(prompt, whole * pageSize), Arrays.copyOf(pages, whole), false);
            int held = cached.length * pageSize;
            return new Received(request, pages, held, prompt.length - held, KvPoll.SUCCESS, null);
        } catch (RuntimeException | InterruptedException e) {
            if (handedOut == null) {
                request.close();
            } else { // the prefill may still write them
                synchronized (quarantined) {
                    quarantined.add(request);
                }
            }
            throw e;
        }
    }

    /**
     * Ends a failed handoff: aborts it (when pages were handed out), and frees the request's pages once no write can
     * land, or quarantines them when the prefill did not confirm that in time.
     */
    private Received failed(CacheRequest request, KvReceiver receiver, int @Nullable [] pages, String why)
            throws InterruptedException {
        boolean safe = true;
        if (pages != null) {
            try {
                safe = receiver.abort().get(abortWaitMillis, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException e) {
                safe = false;
            }
        }
        if (safe) {
            request.close();
        } else {
            synchronized (quarantined) {
                quarantined.add(request);
            }
        }
        return new Received(null, pages, 0, 0, KvPoll.FAILED, why + (safe ? "" : "; its pages stay quarantined"));
    }

    /** Requests whose pages stay quarantined after a failed handoff. */
    public int quarantinedRequests() {
        synchronized (quarantined) {
            return quarantined.size();
        }
    }

    /** Frees what failed handoffs quarantined: call once no prefill can write any more (shutting down). */
    @Override
    public void close() {
        synchronized (quarantined) {
            quarantined.forEach(CacheRequest::close);
            quarantined.clear();
        }
    }
}
