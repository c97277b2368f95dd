package io.hicache.transfer.tcp;

/**
 * The TCP transport's frame types, on the shared {@link io.hicache.transfer.frame.Frames} layout, whose HELLO names
 * the connecting engine. WRITE (with its payload) is answered with WRITE_ACK once applied, READ with READ_DATA (with
 * the bytes), either with the shared ERROR and a reason. Stateless.
 */
final class TcpFrames {
    /** "HCXF"; control connections carry another magic. */
    static final int MAGIC = 0x48435846;

    static final byte WRITE = 4;
    static final byte WRITE_ACK = 5;
    static final byte READ = 6;
    static final byte READ_DATA = 7;

    private TcpFrames() {}
}
