package io.hicache.storage.file;

import io.hicache.architecture.fixture.ArchFixtureUnmapped;

/** Architecture test fixture: a use of a package the layout table does not list. */
public final class ArchFixtureUnmappedTarget {
    /** The unlisted type, named so the compiled class depends on it. */
    public static final Class<?> UNLISTED = ArchFixtureUnmapped.class;

    private ArchFixtureUnmappedTarget() {}
}
