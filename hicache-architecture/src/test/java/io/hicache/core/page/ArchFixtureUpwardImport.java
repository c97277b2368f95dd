package io.hicache.core.page;

import io.hicache.core.cache.HiCache;

/** Architecture test fixture: the page model reaching up to the cache, which the layer rule must refuse. */
public final class ArchFixtureUpwardImport {
    /** The cache type, named so the compiled class depends on it. */
    public static final Class<?> UP = HiCache.class;

    private ArchFixtureUpwardImport() {}
}
