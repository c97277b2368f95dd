package io.hicache.storage.s3;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy of the tests' own on 127.0.0.1, in front of a server: it forwards bytes both ways, after a delay per
 * burst (a request or a response), or not at all (a server that hangs: connections accepted, requests read, nothing answered). Thread-safe;
 * closing it closes every connection. It can also put one stray byte before the next answer
 * ({@link #garbleNextAnswer()}), as s3rver does when it sends a byte past a response's Content-Length.
 */
final class DelayingProxy implements AutoCloseable {
    /** What the proxy does with the bytes it gets. */
    enum Mode {
        PASS,
        DELAY,
        HANG
    }

    private final ServerSocket listener;
    private final int targetPort;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private volatile Mode mode = Mode.PASS;
    private volatile long delayMillis;
    private final AtomicBoolean garbleNext = new AtomicBoolean();
    private final AtomicInteger garbled = new AtomicInteger();
    /** Bytes that follow the previous ones within this gap belong to the same burst. */
    private static final long BURST_GAP_NANOS = 20_000_000L;

    DelayingProxy(int targetPort) throws IOException {
        this.targetPort = targetPort;
        this.listener = new ServerSocket(0, 128, InetAddress.getLoopbackAddress());
        Thread.ofVirtual().name("delaying-proxy-accept").start(this::acceptLoop);
    }

    URI endpoint() {
        return URI.create("http://127.0.0.1:" + listener.getLocalPort());
    }

    void pass() {
        mode = Mode.PASS;
    }

    void delay(long millis) {
        delayMillis = millis;
        mode = Mode.DELAY;
    }

    void hang() {
        mode = Mode.HANG;
    }

    /** Puts one byte that is not HTTP before the next bytes a server sends (the start of its next answer). */
    void garbleNextAnswer() {
        garbleNext.set(true);
    }

    /** Answers garbled so far. */
    int garbled() {
        return garbled.get();
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                Socket server = new Socket();
                server.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), targetPort), 2000);
                sockets.add(client);
                sockets.add(server);
                Thread.ofVirtual().start(() -> pump(client, server, false));
                Thread.ofVirtual().start(() -> pump(server, client, true));
            } catch (IOException e) {
                // closed, or the server is down: the client sees its connection closed
            }
        }
    }

    private void pump(Socket from, Socket to, boolean answers) {
        byte[] chunk = new byte[64 * 1024];
        long lastForward = 0;
        try (InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream()) {
            int n;
            while ((n = in.read(chunk)) >= 0) {
                while (mode == Mode.HANG && !from.isClosed()) {
                    Thread.sleep(20);
                }
                // A delay per burst (a request or a response), not per read: how many reads a response takes depends
                // on the machine's load, and a delay per read made a 256 KiB page miss the client's attempt timeout on
                // a busy machine (CI saw it once), which is not what "a slow server" means.
                if (mode == Mode.DELAY && System.nanoTime() - lastForward > BURST_GAP_NANOS) {
                    Thread.sleep(delayMillis);
                }
                if (answers && garbleNext.compareAndSet(true, false)) {
                    out.write('x');
                    garbled.incrementAndGet();
                }
                out.write(chunk, 0, n);
                out.flush();
                lastForward = System.nanoTime();
            }
        } catch (IOException | InterruptedException e) {
            // a side closed
        } finally {
            closeQuietly(from);
            closeQuietly(to);
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // already closed
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        sockets.forEach(DelayingProxy::closeQuietly);
    }
}
