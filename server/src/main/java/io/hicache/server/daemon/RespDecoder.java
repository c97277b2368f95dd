package io.hicache.server.daemon;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.DecoderException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Cuts a Redis client's bytes into commands (docs/resp.md): RESP arrays of bulk strings ({@code *N\r\n} then N times
 * {@code $len\r\n<bytes>\r\n}), which every client library, {@code redis-cli} and {@code redis-benchmark} send, and
 * inline commands (one line of words, as typed into telnet). A command is handed on once all its bytes are here, its
 * arguments as slices of the received buffers (no copy: a SET's value is copied once, into the slab); received
 * buffers are kept as a composite, not merged. Values are bounded by {@code maxBulkBytes} and a command's arguments
 * by {@link #MAX_ARGS}, checked on the declared lengths before the bytes are buffered: past them the connection gets a
 * protocol error and is closed, as Redis does.
 *
 * <p>One instance per connection, on its event loop.
 */
final class RespDecoder extends ByteToMessageDecoder {
    /** Arguments of one command at most (an MSET of half a million pairs). */
    static final int MAX_ARGS = 1 << 20;
    /** Longest inline command line, and longest header line. */
    private static final int MAX_LINE = 64 * 1024;

    /** A command: its arguments, slices the handler releases. */
    record Command(List<ByteBuf> args) {
        /** The command's name, upper case. */
        String name() {
            return args.getFirst().toString(StandardCharsets.UTF_8).toUpperCase(java.util.Locale.ROOT);
        }

        void release() {
            for (ByteBuf a : args) {
                a.release();
            }
        }
    }

    /** Thrown for bytes that are not RESP; the handler answers {@code -ERR Protocol error: ...} and closes. */
    static final class ProtocolError extends DecoderException {
        private static final long serialVersionUID = 1L;

        ProtocolError(String message) {
            super(message);
        }
    }

    private final int maxBulkBytes;

    RespDecoder(int maxBulkBytes) {
        this.maxBulkBytes = maxBulkBytes;
        setCumulator(COMPOSITE_CUMULATOR);
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
        int start = in.readerIndex();
        Command c = in.getByte(start) == '*' ? array(in) : inline(in);
        if (c == null) {
            in.readerIndex(start); // not all here yet
        } else if (!c.args().isEmpty()) {
            out.add(c);
        }
    }

    /** An array command, or null (nothing consumed) when part of it has not arrived. */
    private @Nullable Command array(ByteBuf in) {
        in.skipBytes(1);
        long n = number(in);
        if (n == Long.MIN_VALUE) {
            return null;
        }
        if (n > MAX_ARGS) {
            throw new ProtocolError("invalid multibulk length");
        }
        // Check the whole command is here before slicing anything.
        int[] offsets = new int[(int) Math.max(0, n)];
        int[] lengths = new int[offsets.length];
        for (int i = 0; i < offsets.length; i++) {
            if (!in.isReadable()) {
                return null;
            }
            if (in.readByte() != '$') {
                throw new ProtocolError("expected '$', got '" + (char) in.getByte(in.readerIndex() - 1) + "'");
            }
            long len = number(in);
            if (len == Long.MIN_VALUE) {
                return null;
            }
            if (len < 0 || len > maxBulkBytes) {
                throw new ProtocolError("invalid bulk length");
            }
            if (in.readableBytes() < len + 2) {
                return null;
            }
            offsets[i] = in.readerIndex();
            lengths[i] = (int) len;
            in.skipBytes((int) len);
            if (in.readByte() != '\r' || in.readByte() != '\n') {
                throw new ProtocolError("a bulk string not followed by CRLF");
            }
        }
        List<ByteBuf> args = new ArrayList<>(offsets.length);
        for (int i = 0; i < offsets.length; i++) {
            args.add(in.retainedSlice(offsets[i], lengths[i]));
        }
        return new Command(args);
    }

    /** An inline command (a line of words), or null when its end has not arrived. */
    private @Nullable Command inline(ByteBuf in) {
        int eol = in.indexOf(in.readerIndex(), in.writerIndex(), (byte) '\n');
        if (eol < 0) {
            if (in.readableBytes() > MAX_LINE) {
                throw new ProtocolError("too big inline request");
            }
            return null;
        }
        String line = in.toString(in.readerIndex(), eol - in.readerIndex(), StandardCharsets.UTF_8)
                .strip();
        in.readerIndex(eol + 1);
        List<ByteBuf> args = new ArrayList<>();
        for (String word : line.split("\\s+")) {
            if (!word.isEmpty()) {
                args.add(io.netty.buffer.Unpooled.copiedBuffer(word, StandardCharsets.UTF_8));
            }
        }
        return new Command(args);
    }

    /** The decimal number up to CRLF, or {@link Long#MIN_VALUE} when the line has not arrived. */
    private static long number(ByteBuf in) {
        int eol = in.indexOf(in.readerIndex(), Math.min(in.writerIndex(), in.readerIndex() + 24), (byte) '\n');
        if (eol < 0) {
            if (in.readableBytes() >= 24) {
                throw new ProtocolError("a length line over 22 characters");
            }
            return Long.MIN_VALUE;
        }
        if (eol - in.readerIndex() < 2 || in.getByte(eol - 1) != '\r') {
            throw new ProtocolError("a length line not ended by CRLF");
        }
        String text = in.toString(in.readerIndex(), eol - 1 - in.readerIndex(), StandardCharsets.US_ASCII);
        in.readerIndex(eol + 1);
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new ProtocolError("invalid length '" + text + "'");
        }
    }
}
