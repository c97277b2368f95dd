package io.hicache.core.page;

import io.hicache.core.tree.ArchFixtureTreeTarget;

/** Architecture test fixture: a public API class whose public methods show an internal and a package-private type. */
public final class ArchFixtureLeakyApi {
    private ArchFixtureLeakyApi() {}

    /** Shows a type of the internal tree package. */
    public static ArchFixtureTreeTarget internal() {
        return null;
    }

    /** Shows a package-private type. */
    public static void hidden(Hidden value) {}

    /** Not public. */
    static final class Hidden {}
}
