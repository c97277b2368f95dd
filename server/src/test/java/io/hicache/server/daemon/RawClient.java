package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.Wire;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A blocking client that speaks the protocol byte by byte, for tests that send what the Java client never would:
 * malformed frames, wrong versions, pipelines of raw requests. Reads give up after 10 s (or {@link #readTimeout}),
 * so a daemon that neither answers nor closes fails the test instead of hanging it. Not thread-safe.
 */
final class RawClient implements AutoCloseable {
    /** A frame received: its op, request id and payload. */
    record Frame(int op, long requestId, ByteBuffer payload) {
        boolean isError() {
            return op == (Wire.ERROR & 0xFF);
        }

        int errorCode() {
            return Short.toUnsignedInt(payload.getShort(0));
        }
    }

    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    RawClient(int port) throws IOException {
        socket = new Socket();
        socket.connect(new InetSocketAddress("127.0.0.1", port), 5000);
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(10_000);
        in = new DataInputStream(socket.getInputStream());
        out = socket.getOutputStream();
    }

    /** A frame with the given header fields and payload. */
    static byte[] frame(int op, long requestId, byte[] payload) {
        return ByteBuffer.allocate(4 + Wire.HEADER_BYTES + payload.length)
                .putInt(Wire.HEADER_BYTES + payload.length)
                .put((byte) op)
                .put((byte) 0)
                .putShort((short) 0)
                .putLong(requestId)
                .putInt(0)
                .put(payload)
                .array();
    }

    static byte[] helloPayload(int magic, int version, String token) {
        byte[] t = token.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(8 + t.length)
                .putInt(magic)
                .putShort((short) version)
                .putShort((short) t.length)
                .put(t)
                .array();
    }

    void send(byte[] bytes) throws IOException {
        out.write(bytes);
    }

    /** From now on a read gives up (SocketTimeoutException) after {@code millis}. */
    void readTimeout(int millis) throws IOException {
        socket.setSoTimeout(millis);
    }

    /** Sends nothing more: the daemon sees the end of the stream. */
    void shutdownOutput() throws IOException {
        socket.shutdownOutput();
    }

    /** Shakes hands; throws unless the daemon accepts. */
    RawClient hello(String token) throws IOException {
        send(frame(Wire.HELLO, 1, helloPayload(Wire.MAGIC, Wire.VERSION, token)));
        Frame f = read();
        if (f == null || f.op != (Wire.HELLO | Wire.RESPONSE)) {
            throw new IOException("handshake refused: " + f);
        }
        return this;
    }

    /**
     * The next frame, or null if the daemon closed the connection first.
     *
     * @throws SocketTimeoutException if the daemon neither answered nor closed within 10 s
     */
    Frame read() throws IOException {
        try {
            int length = in.readInt();
            byte[] body = new byte[length];
            in.readFully(body);
            ByteBuffer b = ByteBuffer.wrap(body);
            int op = Byte.toUnsignedInt(b.get());
            b.position(4);
            long id = b.getLong();
            b.getInt();
            return new Frame(op, id, b.slice());
        } catch (EOFException e) {
            return null;
        } catch (SocketException e) {
            return null; // reset by the daemon
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
