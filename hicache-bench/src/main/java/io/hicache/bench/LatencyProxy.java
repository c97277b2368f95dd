package io.hicache.bench;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * A TCP proxy of the bench's own on 127.0.0.1 that makes a loopback HTTP server look like one across a network: it
 * holds back the first byte of each response for {@link Settings#firstByte()} and caps each connection's throughput,
 * each direction on its own, at {@link Settings#bytesPerSecond()} (a token bucket; see {@link TokenBucket}).
 * Roughly one S3 connection inside a region with the defaults (20 ms, 100 MB/s).
 *
 * <p>HTTP-aware only as far as it must be: a response is whatever the server sends after the client has sent
 * something, and an interim {@code 100 Continue} passes without the delay, so a PUT that waits for one pays the
 * first-byte delay once, as a GET does. One request per connection at a time, as HTTP/1.1 clients send them.
 *
 * <p>Two virtual threads per connection, blocking channels and direct buffers (the bytes stay in native memory).
 * Thread-safe; {@link #close()} stops it and cuts every connection.
 */
final class LatencyProxy implements AutoCloseable {
    /**
     * The most bytes read and forwarded at a time. Large, because the proxy's CPU (a system call and a timed park per
     * chunk) competes with the client and server it sits between; 256 KiB is 2.6 ms at 100 MB/s.
     */
    static final int CHUNK_BYTES = 256 * 1024;
    /** How far ahead of its due time a chunk may go: below this a timed park costs more than it is worth. */
    private static final long SLACK_NANOS = 200_000;

    private static final byte[] CONTINUE = "HTTP/1.1 100".getBytes(StandardCharsets.US_ASCII);

    /**
     * What the proxy adds.
     *
     * @param firstByte      held back before the first byte of each response
     * @param bytesPerSecond the most each connection moves per second in each direction; 0 for no cap
     */
    record Settings(Duration firstByte, long bytesPerSecond) {
        /** System property: the first-byte delay in milliseconds. */
        static final String FIRST_BYTE_MS_PROPERTY = "hicache.bench.s3.first-byte-ms";
        /** System property: each connection's cap in MB/s (10^6 bytes), 0 for none. */
        static final String MB_PER_SECOND_PROPERTY = "hicache.bench.s3.connection-mb-per-s";

        static final long FIRST_BYTE_MS_DEFAULT = 20;
        static final long MB_PER_SECOND_DEFAULT = 100;

        Settings {
            if (firstByte.isNegative() || bytesPerSecond < 0) {
                throw new IllegalArgumentException(
                        "negative proxy settings: " + firstByte + ", " + bytesPerSecond + " B/s");
            }
        }

        /** The settings the system properties give, else the defaults. */
        static Settings fromSystemProperties() {
            return new Settings(
                    Duration.ofMillis(Long.getLong(FIRST_BYTE_MS_PROPERTY, FIRST_BYTE_MS_DEFAULT)),
                    Long.getLong(MB_PER_SECOND_PROPERTY, MB_PER_SECOND_DEFAULT) * 1_000_000L);
        }

        @Override
        public String toString() {
            return firstByte.toMillis() + " ms first byte, "
                    + (bytesPerSecond == 0 ? "no cap" : bytesPerSecond / 1_000_000 + " MB/s per connection");
        }
    }

    private final Settings settings;
    private final InetSocketAddress target;
    private final ServerSocketChannel listener;
    private final Set<SocketChannel> open = ConcurrentHashMap.newKeySet();

    /** Starts a proxy on a free port of 127.0.0.1 in front of {@code targetPort} on 127.0.0.1. */
    LatencyProxy(int targetPort, Settings settings) throws IOException {
        this.settings = settings;
        this.target = new InetSocketAddress(InetAddress.getLoopbackAddress(), targetPort);
        this.listener =
                ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 256);
        Thread.ofVirtual().name("latency-proxy-accept").start(this::acceptLoop);
    }

    URI endpoint() throws IOException {
        return URI.create("http://127.0.0.1:" + ((InetSocketAddress) listener.getLocalAddress()).getPort());
    }

    private void acceptLoop() {
        while (listener.isOpen()) {
            SocketChannel client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return; // closed
            }
            try {
                SocketChannel server = SocketChannel.open(target);
                client.socket().setTcpNoDelay(true);
                server.socket().setTcpNoDelay(true);
                open.add(client);
                open.add(server);
                AtomicBoolean requestSent = new AtomicBoolean();
                Thread.ofVirtual().start(() -> pump(client, server, requestSent, true));
                Thread.ofVirtual().start(() -> pump(server, client, requestSent, false));
            } catch (IOException e) {
                close(client); // the server is down: the client sees its connection closed
            }
        }
    }

    /**
     * Forwards {@code from} to {@code to} at the capped rate. Requests (client to server) mark {@code requestSent};
     * the first chunk of a response after that waits out the first-byte delay.
     */
    private void pump(SocketChannel from, SocketChannel to, AtomicBoolean requestSent, boolean isRequest) {
        ByteBuffer chunk = ByteBuffer.allocateDirect(CHUNK_BYTES);
        TokenBucket bucket = new TokenBucket(settings.bytesPerSecond());
        try {
            while (from.read(chunk) >= 0) {
                chunk.flip();
                if (isRequest) {
                    requestSent.set(true);
                } else if (!isContinue(chunk) && requestSent.getAndSet(false)) {
                    sleepNanos(settings.firstByte().toNanos());
                }
                bucket.take(chunk.remaining());
                while (chunk.hasRemaining()) {
                    to.write(chunk);
                }
                chunk.clear();
            }
        } catch (IOException e) {
            // a side closed
        } finally {
            close(from);
            close(to);
        }
    }

    private static boolean isContinue(ByteBuffer chunk) {
        if (chunk.remaining() < CONTINUE.length) {
            return false;
        }
        for (int i = 0; i < CONTINUE.length; i++) {
            if (chunk.get(chunk.position() + i) != CONTINUE[i]) {
                return false;
            }
        }
        return true;
    }

    /**
     * A token bucket in its GCRA form, paid before sending: a chunk waits until {@code bytes / rate} after the later
     * of now and the previous chunk's due time, so a body's last byte leaves when a link of that rate would deliver it
     * (1 MiB at 100 MB/s: 10.5 ms); a chunk may leave up to {@link #SLACK_NANOS} early. Used by one thread.
     */
    private static final class TokenBucket {
        private final double nanosPerByte;
        private long due = Long.MIN_VALUE;

        TokenBucket(long bytesPerSecond) {
            this.nanosPerByte = bytesPerSecond == 0 ? 0 : 1e9 / bytesPerSecond;
        }

        void take(int bytes) {
            if (nanosPerByte == 0) {
                return;
            }
            long now = System.nanoTime();
            due = (due == Long.MIN_VALUE || due - now < 0 ? now : due) + (long) (bytes * nanosPerByte);
            if (due - now > SLACK_NANOS) {
                sleepNanos(due - now);
            }
        }
    }

    private static void sleepNanos(long nanos) {
        long until = System.nanoTime() + nanos;
        for (long left = nanos; left > 0; left = until - System.nanoTime()) {
            LockSupport.parkNanos(left);
        }
    }

    private void close(SocketChannel channel) {
        open.remove(channel);
        try {
            channel.close();
        } catch (IOException e) {
            // already closed
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        open.forEach(this::close);
    }

    @Override
    public String toString() {
        return "LatencyProxy[" + settings + " in front of " + target + "]";
    }
}
