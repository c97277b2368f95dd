package io.hicache.core.cache;

/**
 * How much of a prompt each tier holds, as a router asks of an engine ({@link HiCache#prefixHits}): per tier, the
 * longest leading run of the prompt's whole pages it holds, counted from the first page of the prompt (not from where
 * the tier above it stops). Tiers are counted apart, so a page may be counted on several: a router weighs them as
 * it likes (a device hit is free, a host hit a copy, a store hit a fetch and a copy).
 *
 * <p>Immutable.
 *
 * @param pageSizeTokens tokens per page
 * @param devicePages    leading pages on the device (L1)
 * @param hostPages      leading pages with a finished copy in the host pool (L2)
 * @param storePages     leading pages the page store (L3) reported having; 0 unless {@link #store()} is
 *                       {@link StoreAnswer#COUNTED}, or what it counted before a later batch went unanswered
 * @param store          how the store part was found
 */
public record PrefixHits(int pageSizeTokens, int devicePages, int hostPages, int storePages, StoreAnswer store) {
    /** How the store part of a {@link PrefixHits} came about. */
    public enum StoreAnswer {
        /** The store answered every batch asked: {@link #storePages()} is its count. */
        COUNTED,
        /** The store was not asked ({@link HiCache#prefixHitsInMemory}). */
        NOT_ASKED,
        /** No page store is attached. */
        NO_STORE,
        /**
         * The store failed, or did not answer by the deadline, or is known not to answer now (the cache then does not
         * ask it): {@link #storePages()} is what it counted before, a lower bound.
         */
        NO_ANSWER
    }

    /** Leading tokens on the device. */
    public int deviceTokens() {
        return devicePages * pageSizeTokens;
    }

    /** Leading tokens with a finished copy in the host pool. */
    public int hostTokens() {
        return hostPages * pageSizeTokens;
    }

    /** Leading tokens the page store reported having. */
    public int storeTokens() {
        return storePages * pageSizeTokens;
    }
}
