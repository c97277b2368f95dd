package io.hicache.storage.nixl.posix;

/** Architecture test fixture: a type in an internal package of storage-nixl. */
public final class ArchFixtureInternalTarget {
    private ArchFixtureInternalTarget() {
    }
}
