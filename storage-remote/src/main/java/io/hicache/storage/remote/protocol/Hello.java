package io.hicache.storage.remote.protocol;

import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;

/**
 * HELLO (docs/protocol.md §2): {@code magic:u32 version:u16 token:string [checksum:u8]}, the checksum byte in version 2
 * and 3. The first frame of every connection. Immutable.
 *
 * @param version  the protocol version the client speaks (1 to {@link Wire#VERSION_3})
 * @param token    {@code server.auth-token} or {@code server.admin-token}, or empty
 * @param checksum the page checksum of the connection; version 1's is always CRC-32C
 */
public record Hello(int version, String token, WireChecksum checksum) implements Request {
    public Hello {
        Checks.requireArgument(Wire.spoken(version), "protocol version %d is not " + "defined", version);
        Checks.checkNotNull(token, "token");
        Checks.requireArgument(
                version >= Wire.VERSION_2 || checksum == WireChecksum.CRC32C,
                "version 1 carries " + "CRC-32C only, not %s",
                checksum);
    }

    /**
     * Reads a HELLO as the daemon does, which speaks versions 1 to 3, checking in the order §2 gives the errors.
     *
     * @throws ProtocolException {@link Wire#E_MALFORMED} for a bad magic, a payload cut short, a token that is not
     *     UTF-8, an undefined checksum or bytes after the end; {@link Wire#E_VERSION} for another version (naming the
     *     daemon's); {@link Wire#E_TOO_LARGE} for a token over {@link Codec#MAX_STRING_BYTES}
     */
    public static Hello read(ByteBuf in) {
        long magic = Codec.readUnsignedInt(in);
        int asked = Codec.readUnsignedShort(in);
        if (magic != Wire.MAGIC) {
            throw new ProtocolException("not a HiCache client (bad magic)");
        }
        if (!Wire.spoken(asked)) {
            throw new ProtocolException(
                    Wire.E_VERSION,
                    "protocol version " + asked + " is not spoken here (this " + "daemon: " + Wire.VERSION + " to "
                            + Wire.VERSION_3 + ")");
        }
        // A token is a string, at most 2,048 bytes; a longer one makes the HELLO too large, whichever version (a
        // version 1 HELLO with a 2,049-byte token still fits the daemon's pre-HELLO frame limit, which counts version
        // 2's checksum byte).
        if (in.readableBytes() >= 2 && in.getUnsignedShort(in.readerIndex()) > Codec.MAX_STRING_BYTES) {
            throw new ProtocolException(
                    Wire.E_TOO_LARGE,
                    "a token of " + in.getUnsignedShort(in.readerIndex()) + " bytes is over the limit of "
                            + Codec.MAX_STRING_BYTES);
        }
        String token = Codec.readString(in);
        WireChecksum sum =
                asked >= Wire.VERSION_2 ? WireChecksum.ofCode(Codec.readUnsignedByte(in)) : WireChecksum.CRC32C;
        if (in.isReadable()) {
            throw new ProtocolException(in.readableBytes() + " bytes after the end of the HELLO");
        }
        return new Hello(asked, token, sum);
    }

    @Override
    public int op() {
        return Wire.HELLO;
    }

    @Override
    public void writeTo(ByteBuf out) {
        out.writeInt(Wire.MAGIC);
        out.writeShort(version);
        Codec.writeString(out, token);
        if (version >= Wire.VERSION_2) {
            out.writeByte(checksum.code());
        }
    }
}
