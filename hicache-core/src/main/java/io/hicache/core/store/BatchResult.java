package io.hicache.core.store;

import io.hicache.core.util.Checks;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * Per-page outcomes of a batched store call, in the order of the batch's keys, each with an optional detail
 * that explains a failure. Immutable.
 */
public final class BatchResult {
    private final PageStatus[] statuses;
    private final String[] details;

    private BatchResult(PageStatus[] statuses, String[] details) {
        this.statuses = statuses;
        this.details = details;
    }

    /** A result with the given statuses and no details. */
    public static BatchResult of(PageStatus... statuses) {
        for (int i = 0; i < statuses.length; i++) {
            Checks.checkNotNull(statuses[i], "statuses[" + i + "]");
        }
        return new BatchResult(statuses.clone(), new String[statuses.length]);
    }

    /** A result of {@code size} pages that all have {@code status} and {@code detail} (may be null). */
    public static BatchResult all(int size, PageStatus status, String detail) {
        PageStatus[] statuses = new PageStatus[size];
        Arrays.fill(statuses, Checks.checkNotNull(status, "status"));
        String[] details = new String[size];
        Arrays.fill(details, detail);
        return new BatchResult(statuses, details);
    }

    /** Starts a result of {@code size} pages. */
    public static Builder builder(int size) {
        return new Builder(size);
    }

    public int size() {
        return statuses.length;
    }

    public PageStatus status(int index) {
        return statuses[Objects.checkIndex(index, statuses.length)];
    }

    /** Why page {@code index} got its status, where the store said. */
    public Optional<String> detail(int index) {
        return Optional.ofNullable(details[Objects.checkIndex(index, details.length)]);
    }

    /** Pages with status {@code status}. */
    public int count(PageStatus status) {
        int n = 0;
        for (PageStatus s : statuses) {
            if (s == status) {
                n++;
            }
        }
        return n;
    }

    /** Pages whose status {@linkplain PageStatus#isSuccess() is a success}. */
    public int successCount() {
        int n = 0;
        for (PageStatus s : statuses) {
            if (s.isSuccess()) {
                n++;
            }
        }
        return n;
    }

    /** Successes before the first page that did not succeed: how much of a prefix is usable. */
    public int leadingSuccesses() {
        int n = 0;
        while (n < statuses.length && statuses[n].isSuccess()) {
            n++;
        }
        return n;
    }

    public boolean allSucceeded() {
        return successCount() == statuses.length;
    }

    @Override
    public String toString() {
        Map<PageStatus, Integer> counts = new EnumMap<>(PageStatus.class);
        for (PageStatus s : statuses) {
            counts.merge(s, 1, Integer::sum);
        }
        StringBuilder b =
                new StringBuilder("BatchResult[").append(statuses.length).append(" pages");
        counts.forEach((s, n) -> b.append(", ").append(s).append(" x").append(n));
        for (int i = 0; i < details.length; i++) {
            if (details[i] != null) {
                b.append(", first detail: #").append(i).append(' ').append(details[i]);
                break;
            }
        }
        return b.append(']').toString();
    }

    /**
     * Fills in a result. Each index may be set from a different thread (one writer per index); {@link #build()}
     * must happen after all of them, for example after joining the futures that set them. Pages never set
     * come out as {@link PageStatus#FAILED}, so a store bug shows as a failure, never as a success.
     */
    public static final class Builder {
        private final PageStatus[] statuses;
        private final String[] details;

        private Builder(int size) {
            Checks.checkNotNegative(size, "size");
            this.statuses = new PageStatus[size];
            this.details = new String[size];
        }

        public Builder set(int index, PageStatus status) {
            return set(index, status, null);
        }

        public Builder set(int index, PageStatus status, @Nullable String detail) {
            statuses[Objects.checkIndex(index, statuses.length)] = Checks.checkNotNull(status, "status");
            details[index] = detail;
            return this;
        }

        /** Sets page {@code index} to {@code outcome}'s status and detail. */
        public Builder set(int index, PageOutcome outcome) {
            return set(index, outcome.status(), outcome.detail());
        }

        public int size() {
            return statuses.length;
        }

        public BatchResult build() {
            PageStatus[] s = statuses.clone();
            String[] d = details.clone();
            for (int i = 0; i < s.length; i++) {
                if (s[i] == null) {
                    s[i] = PageStatus.FAILED;
                    d[i] = "the store reported no outcome for this page";
                }
            }
            return new BatchResult(s, d);
        }
    }
}
