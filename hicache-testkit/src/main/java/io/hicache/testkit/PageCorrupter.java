package io.hicache.testkit;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStore;

/**
 * Damages one stored page behind the store's back (flips bytes on disk, in an object, in memory) without
 * updating its checksum, so the kit can check that the store reads it as a miss. A store's test supplies one
 * when its pages can be reached from outside; the corruption case is skipped for stores without one.
 * Called from the test thread only.
 */
@FunctionalInterface
public interface PageCorrupter {
    /** Corrupts the stored page {@code key} of {@code store}; the page must exist. */
    void corrupt(PageStore store, StoreKey key) throws Exception;
}
