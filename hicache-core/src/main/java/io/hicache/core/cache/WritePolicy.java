package io.hicache.core.cache;

import java.util.Locale;

/** When a device page is backed up to the host ({@code hicache-write-policy}), as in SGLang. */
public enum WritePolicy {
    /** On its first hit: every inserted page is backed up at once. SGLang's default. */
    WRITE_THROUGH(1),
    /** On its second hit: only pages used again are backed up. */
    WRITE_THROUGH_SELECTIVE(2),
    /** When it is evicted from the device: nothing is copied until device memory runs short. */
    WRITE_BACK(0);

    private final int hitThreshold;

    WritePolicy(int hitThreshold) {
        this.hitThreshold = hitThreshold;
    }

    /** Hits at which a page is backed up; 0 for never on a hit. */
    public int hitThreshold() {
        return hitThreshold;
    }

    public String configName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
