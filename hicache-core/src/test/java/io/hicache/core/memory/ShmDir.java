package io.hicache.core.memory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** A fresh folder on /dev/shm (the host slab's home) for one test, deleted with everything in it on close. */
public final class ShmDir implements AutoCloseable {
    private final Path path;

    private ShmDir(Path path) {
        this.path = path;
    }

    /** A new folder on /dev/shm, or in the temp folder where there is no /dev/shm. */
    public static ShmDir create(String prefix) {
        Path shm = Path.of("/dev/shm");
        Path base =
                Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
        try {
            return new ShmDir(Files.createTempDirectory(base, prefix));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public Path path() {
        return path;
    }

    @Override
    public void close() {
        try (Stream<Path> all = Files.walk(path)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
