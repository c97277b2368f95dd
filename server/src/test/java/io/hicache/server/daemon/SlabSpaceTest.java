package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.MappedFiles;
import java.nio.file.Files;
import java.nio.file.Path;
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
}
