package io.hicache.transfer;

import io.hicache.transfer.spi.ArchFixtureSpiSide;

/** Architecture test fixture: the other half of a package cycle (the engine importing the SPI). */
public final class ArchFixtureEngineSide {
    /** The SPI-side type, named so the compiled class depends on it. */
    public static final Class<?> OTHER = ArchFixtureSpiSide.class;

    private ArchFixtureEngineSide() {}
}
