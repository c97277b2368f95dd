package io.hicache.bench;

import io.hicache.transfer.frame.ArchFixtureInternalTarget;

/** Architecture test fixture: a module using another module's internal package, which the API rule must refuse. */
public final class ArchFixtureUseOfInternal {
    /** The internal type, named so the compiled class depends on it. */
    public static final Class<?> INTERNAL = ArchFixtureInternalTarget.class;

    private ArchFixtureUseOfInternal() {}
}
