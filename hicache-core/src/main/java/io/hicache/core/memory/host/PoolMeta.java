package io.hicache.core.memory.host;

import io.hicache.core.page.PageFormat;
import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Properties;
import org.jspecify.annotations.Nullable;

/**
 * The host pool's meta file: what format and capacity its slab and index were made for, and whether the last
 * owner closed them cleanly (if not, the index is recovered before use). Written whole and renamed into place,
 * so it is never half written. Immutable.
 *
 * @param fingerprint   the format and capacity, as text
 * @param closedCleanly whether the last owner closed the pool
 */
record PoolMeta(String fingerprint, boolean closedCleanly) {
    /** 2: the slot journal's records became {@link io.hicache.core.key.PageRecordDescriptor page records}. */
    private static final String VERSION = "2";

    /** The fingerprint of a pool of {@code capacity} pages of {@code format}. */
    static String fingerprint(PageFormat format, int capacity) {
        return format.geometry() + ", " + format.pageSizeTokens() + " tokens/page, " + format.layout() + ", " + capacity
                + " pages";
    }

    /** The meta file's content, or null when it is missing or unreadable (the pool then starts empty). */
    static @Nullable PoolMeta read(Path file) {
        if (!Files.exists(file)) {
            return null;
        }
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(r);
        } catch (IOException | IllegalArgumentException e) {
            return null;
        }
        if (!VERSION.equals(p.getProperty("version")) || p.getProperty("fingerprint") == null) {
            return null;
        }
        return new PoolMeta(p.getProperty("fingerprint"), Boolean.parseBoolean(p.getProperty("closed-cleanly")));
    }

    /** Replaces the meta file. */
    static void write(Path file, String fingerprint, boolean closedCleanly) throws IOException {
        Properties p = new Properties();
        p.setProperty("version", VERSION);
        p.setProperty("fingerprint", fingerprint);
        p.setProperty("closed-cleanly", Boolean.toString(closedCleanly));
        Path temp = file.resolveSibling(file.getFileName() + ".tmp");
        try (Writer w = Files.newBufferedWriter(temp, StandardCharsets.UTF_8)) {
            p.store(w, "HiCache host pool");
        }
        Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
