package io.hicache.core.cache;

import java.util.Locale;
import java.util.Optional;

/**
 * What a request's prefetch from the page store did, so far. Immutable.
 *
 * @param state       where it stands
 * @param skipped     why it was not started, when {@code state} is {@link State#SKIPPED}
 * @param fetched     pages it brought into the tree (when it has ended)
 * @param asked       pages it set out to fetch (when it started)
 */
public record PrefetchOutcome(State state, Optional<PrefetchSkip> skipped, int fetched, int asked) {
    /** Where a request's prefetch stands. */
    public enum State {
        /** None was needed: no page store, or too few tokens past the match. */
        NONE,
        /** Not started: see {@link #skipped()}. */
        SKIPPED,
        /** Running (the request may have joined another request's). */
        RUNNING,
        /** Ended because the store had fewer pages than the threshold. */
        REVOKED,
        /** Ended by the {@code timeout} policy before its fetch finished, with what had landed. */
        TIMED_OUT,
        /** Ended with its fetch finished (or stopped at a page that did not arrive), with what had landed. */
        ENDED
    }

    static final PrefetchOutcome NONE = new PrefetchOutcome(State.NONE, Optional.empty(), 0, 0);

    static PrefetchOutcome skipped(PrefetchSkip why) {
        return new PrefetchOutcome(State.SKIPPED, Optional.of(why), 0, 0);
    }

    @Override
    public String toString() {
        return switch (state) {
            case NONE, RUNNING, REVOKED -> state.name().toLowerCase(Locale.ROOT);
            case SKIPPED -> "skipped: " + skipped.map(PrefetchSkip::label).orElse("?");
            case TIMED_OUT -> "timed out, fetched " + fetched + " of " + asked + " pages";
            case ENDED -> "fetched " + fetched + " of " + asked + " pages";
        };
    }
}
