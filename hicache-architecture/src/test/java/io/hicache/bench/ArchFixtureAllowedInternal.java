package io.hicache.bench;

import io.hicache.core.tree.ArchFixtureTreeTarget;

/** Architecture test fixture: the bench using the core's tree, which the layout allows by name. */
public final class ArchFixtureAllowedInternal {
    /** The tree type, named so the compiled class depends on it. */
    public static final Class<?> TREE = ArchFixtureTreeTarget.class;

    private ArchFixtureAllowedInternal() {}
}
