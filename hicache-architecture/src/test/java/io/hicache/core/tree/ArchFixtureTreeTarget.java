package io.hicache.core.tree;

/** Architecture test fixture: a type in the core's internal tree package. */
public final class ArchFixtureTreeTarget {
    private ArchFixtureTreeTarget() {}
}
