package io.hicache.storage.file;

import io.hicache.core.key.PageHash;
import io.hicache.core.store.PageStore;

/** Architecture test fixture: a store module using the core's API, which every rule must accept. */
public final class ArchFixtureLegalImports {
    /** Core API types, named so the compiled class depends on them. */
    public static final Class<?>[] API = {PageHash.class, PageStore.class};

    private ArchFixtureLegalImports() {}
}
