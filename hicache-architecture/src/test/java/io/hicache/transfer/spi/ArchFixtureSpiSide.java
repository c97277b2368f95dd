package io.hicache.transfer.spi;

import io.hicache.transfer.ArchFixtureEngineSide;

/** Architecture test fixture: one half of a package cycle (the SPI importing the engine). */
public final class ArchFixtureSpiSide {
    /** The engine-side type, named so the compiled class depends on it. */
    public static final Class<?> OTHER = ArchFixtureEngineSide.class;

    private ArchFixtureSpiSide() {}
}
