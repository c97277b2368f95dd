package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.MappedFiles;
import io.hicache.testkit.ChildJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The slab's space is reserved when the daemon starts: a slab its folder's file system has no room for is refused at
 * once, with the size, the folder and its free bytes in the message, rather than mapped sparse and met later by
 * SIGBUS on a page write.
 */
class SlabSpaceTest {
    private static Path folder() throws Exception {
        return Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-test-slab-fit-");
    }

    @Test
    void aSlabLargerThanItsFolderHasRoomForIsRefusedAtStart() throws Exception {
        Path dir = folder();
        try {
            long free = MappedFiles.usableBytes(dir);
            assumeTrue(free > 0, "the free space of " + dir + " cannot be told");
            long asked = free + (1L << 30); // rounded down to whole 16 MiB blocks, still over what is free
            Settings settings = Settings.builder()
                    .flag("server.port", "0")
                    .flag("server.metrics-port", "-1")
                    .flag("server.store", "none")
                    .flag("server.host-dir", dir.toString())
                    .flag("server.host-size", asked + "B")
                    .build();
            HiCacheException e = assertThrows(
                    HiCacheException.class,
                    () -> HiCacheServer.start(ServerConfig.from(settings)).close());
            assertEquals(ErrorCode.HOST_POOL_TOO_LARGE, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains(" in " + dir + ", which has "), e.getMessage());
            assertTrue(e.getMessage().contains("free"), e.getMessage());
            assertTrue(e.getMessage().contains("server.host-size"), e.getMessage());
            try (Stream<Path> left = Files.list(dir)) {
                assertEquals(0, left.count(), "no slab file is left behind");
            }
        } finally {
            TestDaemon.delete(dir);
        }
    }

    @Test
    void aSlabThatFitsIsReservedAndItsFileGoesWithIt() throws Exception {
        Path dir = folder();
        try {
            Settings settings = Settings.builder()
                    .flag("server.port", "0")
                    .flag("server.metrics-port", "-1")
                    .flag("server.store", "none")
                    .flag("server.host-dir", dir.toString())
                    .flag("server.host-size", "64MiB")
                    .build();
            Path file;
            try (SlabSpace space = SlabSpace.create(ServerConfig.from(settings))) {
                file = space.file();
                assertEquals(64L << 20, space.slabBytes());
                assertEquals(64L << 20, Files.size(file));
                assertEquals(64L << 20, space.freeBytes());
            }
            assertTrue(Files.notExists(file), "closing the slab deletes its file");
        } finally {
            TestDaemon.delete(dir);
        }
    }

    /**
     * A daemon killed with SIGKILL leaves its slab (1 GiB by default, in tmpfs memory); the next daemon to start in that
     * folder removes it, and leaves alone the slab of a daemon that still runs.
     */
    @Test
    void aSlabLeftByAKilledDaemonIsRemovedByTheNextStart() throws Exception {
        Path dir = folder();
        try {
            Settings settings = settings(dir);
            ChildJvm child = ChildJvm.start(SlabHolder.class, List.of(dir.toString()));
            try {
                assertTrue(child.awaitLine("slab ", 60, TimeUnit.SECONDS), () -> "the child: " + child.lines());
                Path left = Path.of(child.lines().getLast().substring("slab ".length()));
                try (SlabSpace live = SlabSpace.create(ServerConfig.from(settings))) {
                    assertTrue(Files.exists(left), "a live daemon's slab stays");
                    child.kill();
                    assertTrue(Files.exists(left), "SIGKILL leaves the slab behind");
                    try (SlabSpace next = SlabSpace.create(ServerConfig.from(settings))) {
                        assertTrue(Files.notExists(left), "the next start removes what the killed daemon left");
                        assertTrue(Files.exists(live.file()), "and not the slab of a daemon that still runs");
                        assertTrue(Files.exists(next.file()));
                    }
                }
            } finally {
                child.kill(); // once more if an assertion ended the test first: it must not outlive the test
            }
        } finally {
            TestDaemon.delete(dir);
        }
    }

    private static Settings settings(Path dir) {
        return Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.host-dir", dir.toString())
                .flag("server.host-size", "16MiB")
                .build();
    }

    /** A process that makes a slab in the folder it is given, says where, and waits to be killed. */
    public static final class SlabHolder {
        private SlabHolder() {}

        public static void main(String[] args) throws Exception {
            SlabSpace space = SlabSpace.create(ServerConfig.from(settings(Path.of(args[0]))));
            System.out.println("slab " + space.file());
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
    }
}
