package io.hicache.storage.crypt;

import io.hicache.core.util.Checks;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;

/**
 * One AES-256 key of a {@link KeyRing}, with its id and its key check: the first 8 bytes of SHA-256 over a fixed label
 * and the key, written into every page sealed under it. The check says nothing useful about the key (a 256-bit key
 * cannot be found from a digest of it) but lets a reader tell "this page was sealed under another key named like
 * mine" from "this page was damaged". Immutable and thread-safe; the key bytes live in the JCA key object on the Java
 * heap, as JCA keeps them.
 */
final class PageKey {
    /** AES-256. */
    static final int KEY_BYTES = 32;

    private static final byte[] CHECK_LABEL = "hicache-crypt-key-check-v1".getBytes(StandardCharsets.US_ASCII);

    private final String id;
    private final SecretKey key;
    private final byte[] check;

    /** The key {@code material} (32 bytes, copied) under {@code id}. */
    PageKey(String id, byte[] material) {
        Checks.requireArgument(
                SealedPageDescriptor.KEY_ID.matcher(id).matches(),
                "a key id is 1 to 16 of letters, digits, '.', '_' and '-': '%s' is not",
                id);
        Checks.requireArgument(
                material.length == KEY_BYTES,
                "key '%s' has %d bytes: AES-256 keys have %d",
                id,
                material.length,
                KEY_BYTES);
        this.id = id;
        this.key = new SecretKeySpec(material, "AES");
        this.check = checkOf(material);
    }

    String id() {
        return id;
    }

    SecretKey key() {
        return key;
    }

    /** The 8-byte key check (a copy). */
    byte[] check() {
        return check.clone();
    }

    private static byte[] checkOf(byte[] material) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(CHECK_LABEL);
            sha.update(material);
            return Arrays.copyOf(sha.digest(), SealedPageDescriptor.KEY_CHECK_BYTES);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    /** The id only: never the key. */
    @Override
    public String toString() {
        return "key '" + id + "'";
    }
}
