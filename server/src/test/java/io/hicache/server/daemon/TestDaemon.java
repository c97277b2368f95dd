package io.hicache.server.daemon;

import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.key.StoreKey;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.PageCorrupter;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A daemon for a test: on 127.0.0.1 and ephemeral ports, its slab in a fresh folder under /dev/shm (or the temp
 * folder where there is none), its file store (if any) in a fresh temp folder; closing it stops the daemon and
 * deletes both folders. Not thread-safe; one test class owns it.
 */
final class TestDaemon implements AutoCloseable {
    final HiCacheServer server;
    final Path hostDir;
    final Path fileRoot;

    private TestDaemon(HiCacheServer server, Path hostDir, Path fileRoot) {
        this.server = server;
        this.hostDir = hostDir;
        this.fileRoot = fileRoot;
    }

    /**
     * Waits (up to 5 s) until the daemon has no connection open, and fails if one stays: a test with few connection
     * slots starts from none, as a connection closed by the test before may still be closing on the daemon's side.
     */
    void awaitNoConnections() throws InterruptedException {
        long settle = System.nanoTime() + 5_000_000_000L;
        while (server.metrics.connections.get() > 0 && System.nanoTime() < settle) {
            Thread.sleep(10);
        }
        if (server.metrics.connections.get() > 0) {
            throw new AssertionError(server.metrics.connections.get() + " connections of earlier cases still open");
        }
    }

    /** A daemon with {@code settings} over the test defaults (a 256 MiB slab, the file store). */
    static TestDaemon start(Map<String, String> settings) throws IOException {
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-test-slab-");
        Path fileRoot = Files.createTempDirectory("hicache-test-l3-");
        return start(settings, hostDir, fileRoot);
    }

    /**
     * A daemon whose slab is in {@code hostDir} and whose file store is under {@code fileRoot}. {@link #close()}
     * deletes both: to restart on the same folders, close {@link #server} instead.
     */
    static TestDaemon start(Map<String, String> settings, Path hostDir, Path fileRoot) {
        return start(settings, hostDir, fileRoot, null);
    }

    /** As above, publishing KV events to {@code kvEvents} (null: as {@code server.kv-events-config} says). */
    static TestDaemon start(Map<String, String> settings, Path hostDir, Path fileRoot, KvEventPublisher kvEvents) {
        Settings.Builder b = Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "0")
                .flag("server.host-dir", hostDir.toString())
                .flag("server.host-size", "256MiB")
                .flag("server.shutdown-timeout", "20s")
                .flag("file.root", fileRoot.resolve("store").toString());
        settings.forEach(b::flag);
        try {
            return new TestDaemon(HiCacheServer.start(ServerConfig.from(b.build()), kvEvents), hostDir, fileRoot);
        } catch (RuntimeException e) {
            try {
                delete(hostDir); // a daemon that does not start leaves no folders behind
                delete(fileRoot);
            } catch (IOException | RuntimeException cleanup) {
                e.addSuppressed(cleanup);
            }
            throw e;
        }
    }

    int port() {
        return server.port();
    }

    RemotePageStore client() {
        return RemotePageStore.open(RemoteStoreConfig.local(port(), server.config.authToken()));
    }

    /**
     * Flips a byte in the middle of a stored page behind the daemon's back: in the slab if the page is there, else in
     * its file in the L3 file store.
     */
    PageCorrupter corrupter() {
        return (store, key) -> {
            if (!flipInSlab(key)) {
                flipInFile((FilePageStore) server.cache.l3.current().orElseThrow(), key);
            }
        };
    }

    /** Flips a byte in the middle of {@code key}'s page in the slab; false when the slab does not hold it. */
    boolean flipInSlab(StoreKey key) {
        SlabPage e = server.cache.pages.pin(key);
        if (e == null) {
            return false;
        }
        try {
            MemorySegment page = server.cache.space.bytes(e);
            long middle = page.byteSize() / 2;
            page.set(ValueLayout.JAVA_BYTE, middle, (byte) ~page.get(ValueLayout.JAVA_BYTE, middle));
        } finally {
            server.cache.pages.unpin(e);
        }
        return true;
    }

    /** Whether the slab holds {@code key}'s page. */
    boolean holds(StoreKey key) {
        SlabPage e = server.cache.pages.pin(key);
        if (e == null) {
            return false;
        }
        server.cache.pages.unpin(e);
        return true;
    }

    private static void flipInFile(FilePageStore store, StoreKey key) throws IOException {
        try (FileChannel ch = FileChannel.open(store.fileOf(key), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long middle = ch.size() / 2;
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, middle);
            b.put(0, (byte) ~b.get(0)).rewind();
            ch.write(b, middle);
        }
    }

    /** Stops the daemon (gracefully) and deletes its folders. */
    @Override
    public void close() throws IOException {
        server.close();
        delete(hostDir);
        delete(fileRoot);
    }

    static void delete(Path dir) throws IOException {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
