package io.hicache.transfer.tcp;

/** Architecture test fixture: a type in the TCP transport, a plug-in package. */
public final class ArchFixtureTcpTarget {
    private ArchFixtureTcpTarget() {}
}
