package io.hicache.core.rank;

/** The collectives a {@link RankGroup} runs: what each element of the result is made of. Stateless. */
public enum Reduction {
    MIN,
    MAX;

    /** Folds {@code values} into {@code into}, element by element. Both have the same length. */
    public void fold(int[] into, int[] values) {
        for (int i = 0; i < into.length; i++) {
            into[i] = this == MIN ? Math.min(into[i], values[i]) : Math.max(into[i], values[i]);
        }
    }
}
