package io.hicache.storage.file;

import io.hicache.storage.s3.ArchFixtureS3Type;

/** Architecture test fixture: the file store using storage-s3, an edge the layout does not declare. */
public final class ArchFixtureUseOfUndeclaredModule {
    /** The s3 type, named so the compiled class depends on it. */
    public static final Class<?> SIDEWAYS = ArchFixtureS3Type.class;

    private ArchFixtureUseOfUndeclaredModule() {}
}
