package io.hicache.storage.file;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * What a file store finds under its root when it opens, from file names and attributes alone (no page is read):
 * each page file's size and modification time, in modification order, which stands in for the order of use. It
 * deletes the temporary files of writes a crash interrupted, and leaves other files alone. Not thread-safe; used
 * once, by the opening thread.
 */
final class RootScan {
    /** A page file found. */
    record Found(PageId id, long bytes, long modifiedMillis) {}

    /** What the scan found and did. */
    record Report(int pages, long bytes, int tempFilesRemoved, int otherFiles, long millis) {
        @Override
        public String toString() {
            return pages + " pages (" + bytes + " bytes), " + tempFilesRemoved + " unfinished writes removed, "
                    + otherFiles + " other files left alone, in " + millis + " ms";
        }
    }

    private final List<Found> found = new ArrayList<>();
    private final Report report;

    RootScan(PagePaths paths) throws IOException {
        long start = System.nanoTime();
        int[] temp = {0};
        int[] other = {0};
        Files.walkFileTree(paths.root(), Set.of(), 3, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                if (!attrs.isRegularFile()) {
                    return FileVisitResult.CONTINUE;
                }
                Optional<PageId> id = paths.parse(file);
                if (id.isPresent()) {
                    found.add(new Found(
                            id.get(), attrs.size(), attrs.lastModifiedTime().toMillis()));
                } else if (PagePaths.isTemp(file)
                        && paths.root().relativize(file).getNameCount() == 3) {
                    Files.deleteIfExists(file);
                    temp[0]++;
                } else if (!paths.root().equals(file.getParent())
                        && !file.getFileName().toString().equals(PagePaths.NAMESPACE_NOTE)) {
                    other[0]++;
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                // A file deleted while we walk is not a problem; anything else is.
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }
        });
        found.sort(Comparator.comparingLong(Found::modifiedMillis));
        long bytes = found.stream().mapToLong(Found::bytes).sum();
        report = new Report(found.size(), bytes, temp[0], other[0], (System.nanoTime() - start) / 1_000_000);
    }

    /** Page files, least recently modified first. */
    List<Found> found() {
        return found;
    }

    Report report() {
        return report;
    }
}
