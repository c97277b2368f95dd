package io.hicache.transfer.control;

/**
 * The control protocol's frame types, on the shared {@link io.hicache.transfer.frame.Frames} layout, whose HELLO
 * names the connecting engine and whose ERROR answers a request that failed. DESCRIBE is answered with DESCRIPTOR
 * (the encoded segment descriptor); PING with PONG; a MESSAGE has no answer. Stateless.
 */
final class ControlFrames {
    /** "HCXC": a data connection (TCP transport) has another magic, so a peer on the wrong port fails at once. */
    static final int MAGIC = 0x48435843;

    static final byte DESCRIBE = 2;
    static final byte DESCRIPTOR = 3;
    static final byte MESSAGE = 9;
    static final byte PING = 10;
    static final byte PONG = 11;

    private ControlFrames() {}
}
