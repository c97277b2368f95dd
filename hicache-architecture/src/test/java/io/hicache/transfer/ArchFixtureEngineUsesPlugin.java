package io.hicache.transfer;

import io.hicache.transfer.tcp.ArchFixtureTcpTarget;

/** Architecture test fixture: the engine reaching into the TCP transport, which the plug-in rule must refuse. */
public final class ArchFixtureEngineUsesPlugin {
    /** The transport type, named so the compiled class depends on it. */
    public static final Class<?> TRANSPORT = ArchFixtureTcpTarget.class;

    private ArchFixtureEngineUsesPlugin() {}
}
