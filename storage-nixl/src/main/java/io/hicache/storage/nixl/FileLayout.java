package io.hicache.storage.nixl;

import io.hicache.core.util.Checks;
import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * Pages as files for the POSIX plugin, as SGLang's HiCacheNixl lays them out: each page goes to one of several base
 * folders chosen by a stable hash of its key (so folders on different disks share the load), then
 * {@code <base>/<namespace id>/<first 3 hex digits>/<page hash>.page}. Thread-safe.
 */
final class FileLayout implements StorageLayout {
    static final String SUFFIX = ".page";
    /** A temporary file older than this belongs to a write that died: no put takes ten minutes. */
    private static final long ABANDONED_TEMP_MILLIS = 10 * 60 * 1000;

    private final List<Path> bases;
    private final Set<FileMode> readModes;
    private final Set<FileMode> writeModes;
    private final Set<Path> madeDirs = ConcurrentHashMap.newKeySet();

    /** The layout over {@code config}'s folders; with direct I/O, checks through {@code agent} that they take it. */
    static FileLayout open(NixlStoreConfig config, NixlAgent agent) throws IOException {
        FileLayout layout = new FileLayout(config.dirs(), config.directIo());
        if (config.directIo()) {
            DirectProbe.check(agent, config.dirs().getFirst());
        }
        return layout;
    }

    FileLayout(List<Path> bases, boolean directIo) throws IOException {
        this.bases = List.copyOf(bases);
        for (Path b : this.bases) {
            Files.createDirectories(b);
        }
        this.readModes = directIo ? EnumSet.of(FileMode.READ, FileMode.DIRECT) : EnumSet.of(FileMode.READ);
        this.writeModes = directIo
                ? EnumSet.of(FileMode.CREATE, FileMode.WRITE, FileMode.ATOMIC, FileMode.DIRECT)
                : EnumSet.of(FileMode.CREATE, FileMode.WRITE, FileMode.ATOMIC);
    }

    @Override
    public String location() {
        return bases.size() == 1 ? bases.getFirst().toString() : bases.toString();
    }

    @Override
    public String where(String name) {
        return file(name).toString();
    }

    /** 90% of the first folder's file system, counting what is stored as free: SGLang's default. */
    @Override
    public long defaultCapacityBytes(long storedBytes) throws IOException {
        return (long) (0.9 * (Files.getFileStore(bases.getFirst()).getUsableSpace() + storedBytes));
    }

    /** The file of page {@code name}. */
    Path file(String name) {
        int slash = name.indexOf('/');
        String hash = name.substring(slash + 1);
        // The page hash is uniform: its first 8 hex digits pick the base folder.
        int base = Math.floorMod(Long.parseLong(hash.substring(0, 8), 16), bases.size());
        return bases.get(base)
                .resolve(name.substring(0, slash))
                .resolve(hash.substring(0, 3))
                .resolve(hash + SUFFIX);
    }

    @Override
    public MemoryRegion readRegion(String name, long storedBytes) {
        return new MemoryRegion.File(file(name), readModes, storedBytes);
    }

    @Override
    public MemoryRegion writeRegion(String name, long storedBytes) throws IOException {
        Path file = file(name);
        Path dir = Checks.checkNotNull(file.getParent(), "a page file's folder");
        if (!madeDirs.contains(dir) || !Files.isDirectory(dir)) {
            Files.createDirectories(dir);
            madeDirs.add(dir);
        }
        return new MemoryRegion.File(file, writeModes, storedBytes);
    }

    @Override
    public boolean delete(String name) throws IOException {
        return Files.deleteIfExists(file(name));
    }

    @Override
    public void clear(@Nullable String namespaceId) throws IOException {
        madeDirs.clear();
        for (Path base : bases) {
            if (namespaceId != null) {
                deleteTree(base.resolve(namespaceId));
            } else {
                try (Stream<Path> children = Files.list(base)) {
                    for (Path child : children.toList()) {
                        deleteTree(child);
                    }
                }
            }
        }
    }

    private static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                try {
                    Files.deleteIfExists(p);
                } catch (DirectoryNotEmptyException e) {
                    // another writer added a file meanwhile: it is newer than the clear
                }
            }
        } catch (UncheckedIOException e) {
            if (!(e.getCause() instanceof NoSuchFileException)) {
                throw e.getCause();
            }
        }
    }

    @Override
    public List<Found> scan() throws IOException {
        List<Found> found = new ArrayList<>();
        for (Path base : bases) {
            try (Stream<Path> walk = Files.walk(base, 3)) {
                for (Path p : walk.toList()) {
                    String file = p.getFileName().toString();
                    if (file.startsWith(".") && file.endsWith(".tmp")) {
                        removeIfAbandoned(p);
                        continue;
                    }
                    if (!file.endsWith(SUFFIX)) {
                        continue;
                    }
                    // <base>/<namespace id>/<3 hex digits>/<hash>.page: the namespace is the file's folder's folder
                    Path folder = Checks.checkNotNull(p.getParent(), "a page file's folder");
                    Path namespace = Checks.checkNotNull(folder.getParent(), "a page folder's namespace folder");
                    String name = namespace.getFileName() + "/" + file.substring(0, file.length() - SUFFIX.length());
                    try {
                        BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
                        found.add(new Found(name, a.size(), a.lastModifiedTime().toMillis()));
                    } catch (NoSuchFileException e) {
                        // deleted while we looked
                    }
                }
            }
        }
        return found;
    }

    /**
     * Removes a temporary file of a write that cannot still be running (a process died mid-put). Other stores may
     * share the folders, so a recent one is left alone.
     */
    private static void removeIfAbandoned(Path temp) throws IOException {
        try {
            long age =
                    System.currentTimeMillis() - Files.getLastModifiedTime(temp).toMillis();
            if (age > ABANDONED_TEMP_MILLIS) {
                Files.deleteIfExists(temp);
            }
        } catch (NoSuchFileException e) {
            // its write finished meanwhile
        }
    }

    @Override
    public void close() {
        // nothing held
    }
}
