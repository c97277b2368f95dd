package io.hicache.storage.s3;

/** Architecture test fixture: a type of storage-s3. */
public final class ArchFixtureS3Type {
    private ArchFixtureS3Type() {}
}
