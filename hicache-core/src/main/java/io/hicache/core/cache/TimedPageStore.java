package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.RateLimitedLog;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The cache's page store with each call's latency, from the call to its future's completion (answered or failed),
 * observed in a histogram per operation, and whether the store answers each kind of call ({@link #admit}).
 *
 * <p>A kind of call (hit queries, gets, puts) is answered while its calls complete before their deadlines. One that
 * completes only once its deadline has passed (its pages TIMED_OUT), or has not completed {@link #GRACE} after it, says
 * the store has stopped answering that kind: the cache then starts no prefetch (queries and gets) or upload (queries and
 * puts) that needs it, so the host tier goes on alone and L3 just misses. Now and then one piece of work is let
 * through as a trial (after a storage timeout, then twice as long each time it fails, up to {@link #MAX_TRIAL_FACTOR}
 * timeouts); a timely answer to any call of the kind ends the silence. So a hung store costs the requests that were
 * already waiting on it their own deadline, a trial's request its own, and no other request anything.
 *
 * <p>Thread-safe as the store it wraps; closing it closes that store.
 */
final class TimedPageStore extends ForwardingPageStore {
    private static final System.Logger LOG = System.getLogger(TimedPageStore.class.getName());
    /** How long after its deadline a call may still complete before its kind counts as not answered. */
    static final Duration GRACE = Duration.ofSeconds(1);
    /** The longest time between trials, in storage timeouts. */
    static final int MAX_TRIAL_FACTOR = 16;

    /** The kinds of call whose answers are watched. */
    enum Kind {
        QUERY,
        GET,
        PUT
    }

    /** Whether work that needs some kinds of call may start: yes, no, or yes as a trial of a silent kind. */
    enum Admission {
        YES,
        NO,
        TRIAL
    }

    private final DistributionDataPoint leadingHits;
    private final DistributionDataPoint get;
    private final DistributionDataPoint put;
    private final DistributionDataPoint delete;
    private final CacheMetrics metrics;
    private final long timeoutNanos;
    /** Calls not completed yet. */
    private final Set<Call> outstanding = ConcurrentHashMap.newKeySet();

    private final Health[] health = {new Health(Kind.QUERY), new Health(Kind.GET), new Health(Kind.PUT)};
    private final RateLimitedLog silentLog =
            new RateLimitedLog(LOG, System.Logger.Level.WARNING, Duration.ofSeconds(60));

    /** One call: its kind (null: not watched), when its deadline expires, whether it was counted as overdue. */
    private static final class Call {
        final @Nullable Kind kind;
        final long expiresAtNanos;
        volatile boolean overdue;

        Call(@Nullable Kind kind, Deadline deadline) {
            long left = deadline.remainingNanos(); // read once: it may be cancelled meanwhile
            // A call made past its deadline (cancelled already) is answered at once with nothing done: not a sign.
            this.kind = left > 0 ? kind : null;
            this.expiresAtNanos = System.nanoTime() + left;
        }
    }

    /** Whether one kind of call is answered; guarded by its monitor. */
    private final class Health {
        final Kind kind;
        boolean silent;
        long nextTrialNanos;
        int trialFactor = 1;

        Health(Kind kind) {
            this.kind = kind;
        }

        synchronized void answered() {
            if (silent) {
                silent = false;
                trialFactor = 1;
                LOG.log(
                        System.Logger.Level.INFO,
                        "the page store '" + delegate.name() + "' answers its "
                                + kind.name().toLowerCase(Locale.ROOT) + " calls again");
            }
        }

        synchronized void silent(String why) {
            if (!silent) {
                silent = true;
                nextTrialNanos = System.nanoTime() + timeoutNanos;
                metrics.fail("store: " + kind.name().toLowerCase(Locale.ROOT) + " calls not answered");
                silentLog.log(
                        "the page store '" + delegate.name() + "' at " + delegate.location() + " does not answer its "
                                + kind.name().toLowerCase(Locale.ROOT) + " calls (" + why + "): the work that needs "
                                + "them pauses, with a trial now and then, until they are answered again");
            }
        }

        /** Whether a trial may go now; if so, the next one is due twice as late. Call holding the monitor. */
        boolean trialDue(long now) {
            return now - nextTrialNanos >= 0;
        }

        void trialTaken(long now) {
            nextTrialNanos = now + timeoutNanos * trialFactor;
            trialFactor = Math.min(MAX_TRIAL_FACTOR, trialFactor * 2);
        }
    }

    /** Times {@code store}; {@code timeout} is the cache's storage timeout, the first wait before a trial. */
    TimedPageStore(PageStore store, CacheMetricsExport export, CacheMetrics metrics, Duration timeout) {
        super(store);
        this.leadingHits = export.storeSeconds("leading_hits");
        this.get = export.storeSeconds("get");
        this.put = export.storeSeconds("put");
        this.delete = export.storeSeconds("delete");
        this.metrics = metrics;
        this.timeoutNanos = timeout.toNanos();
    }

    private <T> CompletableFuture<T> timed(
            DistributionDataPoint latency,
            @Nullable Kind kind,
            Deadline deadline,
            Supplier<CompletableFuture<T>> call) {
        long start = System.nanoTime();
        Call c = new Call(kind, deadline);
        outstanding.add(c);
        CompletableFuture<T> answer;
        try {
            answer = call.get();
        } catch (RuntimeException e) { // bad arguments: refused before any I/O, which says nothing of the store
            outstanding.remove(c);
            throw e;
        }
        answer.whenComplete((v, e) -> {
            long now = System.nanoTime();
            outstanding.remove(c);
            latency.observe((now - start) / 1e9);
            if (c.kind == null) {
                return;
            }
            if (now - c.expiresAtNanos < 0) { // in time; a cancelled call answered late did not honour the cancel
                health[c.kind.ordinal()].answered();
            } else {
                health[c.kind.ordinal()].silent("a call completed only once its deadline had passed");
            }
        });
        return answer;
    }

    /** Whether calls of {@code kind} are answered now (calls past their deadline and grace say they are not). */
    boolean answering(Kind kind) {
        checkOverdue();
        Health h = health[kind.ordinal()];
        synchronized (h) {
            return !h.silent;
        }
    }

    /**
     * Whether work needing calls of {@code kinds} may start: {@link Admission#YES} while every kind is answered,
     * {@link Admission#TRIAL} when a trial of each silent kind is due (taken by this caller), else
     * {@link Admission#NO}. Cheap: a look at the calls in flight.
     */
    Admission admit(Kind... kinds) {
        checkOverdue();
        long now = System.nanoTime();
        boolean anySilent = false;
        for (Kind k : kinds) {
            Health h = health[k.ordinal()];
            synchronized (h) {
                if (h.silent) {
                    anySilent = true;
                    if (!h.trialDue(now)) {
                        return Admission.NO;
                    }
                }
            }
        }
        if (!anySilent) {
            return Admission.YES;
        }
        for (Kind k : kinds) {
            Health h = health[k.ordinal()];
            synchronized (h) {
                if (h.silent) {
                    h.trialTaken(now);
                }
            }
        }
        return Admission.TRIAL;
    }

    private void checkOverdue() {
        long now = System.nanoTime();
        long late = GRACE.toNanos();
        for (Call c : outstanding) {
            if (c.kind != null && !c.overdue && now - c.expiresAtNanos >= late) {
                c.overdue = true; // each hung call silences its kind once
                health[c.kind.ordinal()].silent(
                        "a call has not completed " + GRACE.toMillis() + " ms after its deadline");
            }
        }
    }

    /** The store it times, as it was given. */
    PageStore inner() {
        return delegate;
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return timed(leadingHits, Kind.QUERY, deadline, () -> delegate.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return timed(get, Kind.GET, deadline, () -> delegate.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return timed(put, Kind.PUT, deadline, () -> delegate.put(sources, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return timed(delete, null, deadline, () -> delegate.delete(keys, deadline));
    }
}
