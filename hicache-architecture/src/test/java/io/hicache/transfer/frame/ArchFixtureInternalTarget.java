package io.hicache.transfer.frame;

/** Architecture test fixture: a type in an internal package of transfer. */
public final class ArchFixtureInternalTarget {
    private ArchFixtureInternalTarget() {}
}
