package io.hicache.core.cache;

import java.util.Locale;

/** When a prefetch from the page store stops and its request goes on ({@code hicache-storage-prefetch-policy}). */
public enum PrefetchPolicy {
    /** At the request's first check: it uses whatever has arrived. SGLang's default. */
    BEST_EFFORT,
    /** Only when every page the store had has arrived. */
    WAIT_COMPLETE,
    /** When complete, or after {@code prefetch-timeout-base} plus {@code prefetch-timeout-per-ki-token} per 1024 tokens. */
    TIMEOUT;

    public String configName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
