package io.hicache.transfer.cuda;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;

/**
 * The cuda-ipc side channel between an importer (a peer that maps this process's device regions) and the exporter,
 * over a Unix domain socket in the shared-memory folder. It exists because CUDA cannot revoke an IPC mapping: the
 * exporter must not free memory a peer still maps, so it asks ({@link #REVOKE}) and waits for {@link #CLOSED}, and a
 * peer maps a region only after the exporter said {@link #OPENED} (it knows who holds what). The connection also
 * tells the exporter a peer died: the kernel closes a dead process's socket.
 *
 * <p>A message is a kind byte, a region id, and for {@link #HELLO} the importer's engine name. Stateless; a
 * connection's writes are serialized by its owner.
 */
final class IpcWire {
    /** Importer to exporter, first: its engine name. */
    static final byte HELLO = 1;
    /** Importer asks to map region {@code id}. */
    static final byte OPEN = 2;
    /** Exporter: the region is registered, and the importer is recorded as holding it. */
    static final byte OPENED = 3;
    /** Exporter: no such region any more; do not map it. */
    static final byte GONE = 4;
    /** Exporter: unmap region {@code id} once the copies into it ended, then say {@link #CLOSED}. */
    static final byte REVOKE = 5;
    /** Importer: it no longer maps region {@code id} and has no copy in flight into it. */
    static final byte CLOSED = 6;

    private IpcWire() {}

    /** One message. */
    record Message(byte kind, int region, String name) {}

    /** Writes one message; the caller serializes writes on {@code channel}. */
    static void write(SocketChannel channel, byte kind, int region, String name) throws IOException {
        byte[] text = name.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(1 + 4 + 2 + text.length);
        b.put(kind).putInt(region).putShort((short) text.length).put(text).flip();
        while (b.hasRemaining()) {
            channel.write(b);
        }
    }

    /** Reads one message from a stream over the channel. */
    static Message read(DataInputStream in) throws IOException {
        byte kind = in.readByte();
        int region = in.readInt();
        int length = in.readUnsignedShort();
        byte[] text = new byte[length];
        in.readFully(text);
        if (kind < HELLO || kind > CLOSED) {
            throw new EOFException("not a cuda-ipc message: kind " + kind);
        }
        return new Message(kind, region, new String(text, StandardCharsets.UTF_8));
    }

    /** A blocking stream over {@code channel}'s reads. */
    static DataInputStream input(SocketChannel channel) {
        return new DataInputStream(Channels.newInputStream(channel));
    }
}
