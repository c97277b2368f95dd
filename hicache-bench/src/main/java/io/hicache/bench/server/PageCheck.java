package io.hicache.bench.server;

import io.hicache.core.Deadline;
import io.hicache.core.key.PageHash;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.netty.buffer.ByteBuf;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Proves that a server stores what the load generator sends: one page is set through the generator and read back
 * by an independent client (the remote page store for the daemon, a plain socket for Redis and memcached), then
 * compared byte for byte. The generator itself skips the bodies of answers, so without this a server could answer gets with anything.
 * Stateless.
 */
final class PageCheck {
    private PageCheck() {}

    static void verify(String server, int port, LoadGenerator load, LoadProtocol protocol, ByteBuf body, int crc)
            throws Exception {
        LoadProtocol.PageKey key = LoadProtocol.PageKey.of(-1, 0);
        load.run(1, (alloc, id, index) -> protocol.set(alloc, id, key, body.retainedDuplicate(), crc));
        byte[] expected = new byte[body.readableBytes()];
        body.getBytes(body.readerIndex(), expected);
        byte[] got = switch (protocol) {
            case HcwpProtocol hcwp -> viaRemoteStore(port, key, expected.length);
            case MemcacheProtocol memcache -> viaSocket(port, concat("get ", key.hexAscii(), "\r\n"), "VALUE ", 2);
            default ->
                viaSocket(
                        port,
                        concat("*2\r\n$3\r\nGET\r\n$" + key.hexAscii().length + "\r\n", key.hexAscii(), "\r\n"),
                        "$",
                        0);
        };
        if (!Arrays.equals(expected, got)) {
            throw new IllegalStateException(server + " returned other bytes than the load generator set");
        }
        load.run(1, (alloc, id, index) -> new ByteBuf[] {protocol.flushAll(alloc, id)});
    }

    private static byte[] viaRemoteStore(int port, LoadProtocol.PageKey key, int pageBytes) throws Exception {
        try (RemotePageStore store = RemotePageStore.open(RemoteStoreConfig.local(port, ""));
                Arena arena = Arena.ofShared()) {
            MemorySegment target = arena.allocate(pageBytes);
            BatchResult r = store.get(
                            PageBatch.of(
                                    List.of(HcwpProtocol.NAMESPACE.key(PageHash.fromBytes(key.hash(), 0))),
                                    List.of(target)),
                            Deadline.after(Duration.ofSeconds(30)))
                    .get(30, TimeUnit.SECONDS);
            if (r.status(0) != PageStatus.OK) {
                throw new IllegalStateException("the daemon answered the check's get with " + r.status(0));
            }
            return target.toArray(ValueLayout.JAVA_BYTE);
        }
    }

    private static byte[] concat(String head, byte[] key, String tail) {
        byte[] h = head.getBytes(StandardCharsets.US_ASCII);
        byte[] t = tail.getBytes(StandardCharsets.US_ASCII);
        byte[] all = Arrays.copyOf(h, h.length + key.length + t.length);
        System.arraycopy(key, 0, all, h.length, key.length);
        System.arraycopy(t, 0, all, h.length + key.length, t.length);
        return all;
    }

    /**
     * Sends {@code request} on a plain socket and reads one value: a line starting with {@code prefix} whose
     * space-separated field {@code lengthField} (after the prefix) is the value's length, then the value.
     */
    private static byte[] viaSocket(int port, byte[] request, String prefix, int lengthField) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
            s.setSoTimeout(30_000);
            OutputStream out = s.getOutputStream();
            out.write(request);
            DataInputStream in = new DataInputStream(s.getInputStream());
            StringBuilder line = new StringBuilder();
            for (int c = in.read(); c != '\n'; c = in.read()) {
                if (c < 0) {
                    throw new IOException("the server closed the connection");
                }
                line.append((char) c);
            }
            String answer = line.toString().strip();
            if (!answer.startsWith(prefix) || answer.startsWith(prefix + "-")) {
                throw new IllegalStateException("the server answered the check's get with " + answer);
            }
            byte[] page =
                    new byte[Integer.parseInt(answer.substring(prefix.length()).split(" ")[lengthField])];
            in.readFully(page);
            return page;
        }
    }
}
