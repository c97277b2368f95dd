package io.hicache.storage.crypt;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/** Random AES-256 keys for tests, as base64, and key files made of them. Not thread-safe. */
final class TestKeys {
    private static final SecureRandom RANDOM = new SecureRandom();

    private TestKeys() {}

    /** A fresh key, base64 of 32 random bytes. */
    static String newKey() {
        byte[] key = new byte[32];
        RANDOM.nextBytes(key);
        return Base64.getEncoder().encodeToString(key);
    }

    /** Fresh keys under {@code ids}, in order. */
    static Map<String, String> newKeys(String... ids) {
        Map<String, String> keys = new LinkedHashMap<>();
        for (String id : ids) {
            keys.put(id, newKey());
        }
        return keys;
    }

    /** The key file's text for {@code keys} (id to base64), then {@code extraLines}. */
    static String text(Map<String, String> keys, String... extraLines) {
        StringBuilder b = new StringBuilder("# test keys\n");
        keys.forEach((id, key) -> b.append(id).append(' ').append(key).append('\n'));
        for (String line : extraLines) {
            b.append(line).append('\n');
        }
        return b.toString();
    }

    /** Writes {@code keys} (and {@code extraLines}) to {@code file}, readable by its owner only. */
    static Path write(Path file, Map<String, String> keys, String... extraLines) {
        try {
            Files.writeString(file, text(keys, extraLines));
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
