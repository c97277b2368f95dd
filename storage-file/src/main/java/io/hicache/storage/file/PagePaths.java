package io.hicache.storage.file;

import io.hicache.core.key.PageHash;
import io.hicache.core.util.Checks;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Where the file store keeps each page: {@code ROOT/<namespace id>/<first 3 hex of the hash>/<hash>.page}. Every
 * part of a name is lowercase hex of a fixed length, taken from the key's digests and never from the text a user
 * chose (a model id or extra key can hold {@code /}, {@code ..}, NUL or 500 characters, and none of it reaches a
 * path), so a key cannot name a place outside the root; {@link #pageFile} checks it all the same. 4,096 sub-folders
 * per namespace keep folders small: a million pages is about 250 files per folder.
 *
 * <p>A write goes to {@code <hash>.<writer>.tmp} in the same folder and is renamed into place, so a reader finds a
 * whole page or none; temporary files left by a crash are removed when the store opens. Stateless apart from the
 * counter that makes temporary names unique; thread-safe.
 */
final class PagePaths {
    static final String PAGE_SUFFIX = ".page";
    static final String TEMP_SUFFIX = ".tmp";
    /** Written into a namespace's folder when it is made: which model, dtype, ranks the hex name stands for. */
    static final String NAMESPACE_NOTE = "namespace.txt";

    private static final int SHARD_CHARS = 3;

    private final Path root;
    private final AtomicLong writers = new AtomicLong();

    PagePaths(Path root) {
        this.root = root.toAbsolutePath().normalize();
    }

    Path root() {
        return root;
    }

    Path namespaceDir(String namespaceId) {
        Checks.requireArgument(PageId.isNamespaceId(namespaceId), "not a namespace id: '%s'", namespaceId);
        return inside(root.resolve(namespaceId));
    }

    Path shardDir(PageId id) {
        return inside(namespaceDir(id.namespaceId()).resolve(id.hash().toHex().substring(0, SHARD_CHARS)));
    }

    Path pageFile(PageId id) {
        return inside(shardDir(id).resolve(id.hash().toHex() + PAGE_SUFFIX));
    }

    /** A fresh temporary name next to the page's file. */
    Path tempFile(PageId id) {
        return inside(shardDir(id)
                .resolve(id.hash().toHex() + "." + ProcessHandle.current().pid() + "-" + writers.incrementAndGet()
                        + TEMP_SUFFIX));
    }

    /**
     * The page a file under the root holds, if {@code file} is where {@link #pageFile} puts one; empty for anything
     * else (temporary files, notes, files someone else put there).
     */
    Optional<PageId> parse(Path file) {
        Path relative = root.relativize(file.toAbsolutePath().normalize());
        if (relative.getNameCount() != 3) {
            return Optional.empty();
        }
        String ns = relative.getName(0).toString();
        String shard = relative.getName(1).toString();
        String name = relative.getName(2).toString();
        if (!PageId.isNamespaceId(ns) || !name.endsWith(PAGE_SUFFIX)) {
            return Optional.empty();
        }
        String hex = name.substring(0, name.length() - PAGE_SUFFIX.length());
        if (hex.length() != PageHash.HEX_LENGTH
                || !PageId.isLowerHex(hex)
                || !hex.startsWith(shard)
                || shard.length() != SHARD_CHARS) {
            return Optional.empty();
        }
        return Optional.of(new PageId(ns, PageHash.fromHex(hex)));
    }

    static boolean isTemp(Path file) {
        return file.getFileName().toString().endsWith(TEMP_SUFFIX);
    }

    /** Defence in depth: the names above cannot leave the root, and this proves it for each one. */
    private Path inside(Path path) {
        Path normal = path.normalize();
        Checks.requireState(
                normal.startsWith(root) && !normal.equals(root), "%s is not inside the store root %s", path, root);
        return normal;
    }
}
