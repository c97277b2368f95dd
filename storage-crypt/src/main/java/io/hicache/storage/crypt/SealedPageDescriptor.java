package io.hicache.storage.crypt;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The layout of a sealed page: what the inner store holds for each page of the encrypted store. A fixed-size header,
 * the ciphertext (exactly as long as the page), then the GCM tag, so that the sealed length follows from the page's
 * length alone and a get can ask the inner store for it before reading anything.
 *
 * <pre>
 *   0        4     5      6        8                          24               32                     44
 *   +--------+-----+------+--------+--------------------------+----------------+----------------------+
 *   | "HCEP" | ver | id   | zero   | key id: ASCII, zero-     | key check:     | nonce: 12 random     |
 *   |        | = 1 | len  | (2 B)  | padded (16 B)            | 8 B of SHA-256 | bytes                |
 *   +--------+-----+------+--------+--------------------------+----------------+----------------------+
 *   44: ciphertext, n bytes (n = the page's length)
 *   44 + n: GCM tag, 16 bytes                                   sealed length = n + 60
 * </pre>
 *
 * <p>The additional authenticated data is the 44 header bytes, then the store key's namespace id (16 bytes) and page
 * hash (32 bytes): a page whose bytes are copied under another key, or whose header is edited, fails authentication.
 * The key check (a digest of the key, {@link PageKey}) tells a page sealed under another key of the same id (a
 * mistyped or replaced key) from a page whose bytes were damaged, before any decryption. Stateless.
 */
final class SealedPageDescriptor {
    static final byte[] MAGIC = {'H', 'C', 'E', 'P'};
    static final int VERSION = 1;

    static final int VERSION_OFFSET = 4;
    static final int KEY_ID_LENGTH_OFFSET = 5;
    static final int RESERVED_OFFSET = 6;
    static final int KEY_ID_OFFSET = 8;
    static final int KEY_ID_BYTES = 16;
    static final int KEY_CHECK_OFFSET = KEY_ID_OFFSET + KEY_ID_BYTES;
    static final int KEY_CHECK_BYTES = 8;
    static final int NONCE_OFFSET = KEY_CHECK_OFFSET + KEY_CHECK_BYTES;
    static final int NONCE_BYTES = 12;
    /** Where the ciphertext starts. */
    static final int HEADER_BYTES = NONCE_OFFSET + NONCE_BYTES;

    static final int TAG_BYTES = 16;
    static final int TAG_BITS = TAG_BYTES * 8;
    /** How many bytes longer a sealed page is than the page. */
    static final int OVERHEAD_BYTES = HEADER_BYTES + TAG_BYTES;

    /** The additional authenticated data: the header, the namespace id, the page hash. */
    static final int AAD_BYTES = HEADER_BYTES + Namespace.ID_BYTES + PageHash.BYTES;

    /** What a key id may be: 1 to 16 of letters, digits, {@code .}, {@code _} and {@code -}. */
    static final Pattern KEY_ID = Pattern.compile("[A-Za-z0-9._-]{1," + KEY_ID_BYTES + "}");

    private SealedPageDescriptor() {}

    /** The sealed length of a page of {@code pageBytes}. */
    static long sealedBytes(long pageBytes) {
        return pageBytes + OVERHEAD_BYTES;
    }

    /** A header for a page sealed under {@code key} with {@code nonce}. */
    static byte[] header(PageKey key, byte[] nonce) {
        byte[] h = new byte[HEADER_BYTES];
        System.arraycopy(MAGIC, 0, h, 0, MAGIC.length);
        h[VERSION_OFFSET] = VERSION;
        byte[] id = key.id().getBytes(StandardCharsets.US_ASCII);
        h[KEY_ID_LENGTH_OFFSET] = (byte) id.length;
        System.arraycopy(id, 0, h, KEY_ID_OFFSET, id.length);
        System.arraycopy(key.check(), 0, h, KEY_CHECK_OFFSET, KEY_CHECK_BYTES);
        System.arraycopy(nonce, 0, h, NONCE_OFFSET, NONCE_BYTES);
        return h;
    }

    /**
     * The key id a header names, or empty when the bytes are not a header of this version (wrong magic or version,
     * a key id that is not one, non-zero padding): a damaged page, or not a sealed page at all.
     */
    static Optional<String> keyId(byte[] header) {
        for (int i = 0; i < MAGIC.length; i++) {
            if (header[i] != MAGIC[i]) {
                return Optional.empty();
            }
        }
        int length = header[KEY_ID_LENGTH_OFFSET];
        if (header[VERSION_OFFSET] != VERSION
                || header[RESERVED_OFFSET] != 0
                || header[RESERVED_OFFSET + 1] != 0
                || length < 1
                || length > KEY_ID_BYTES) {
            return Optional.empty();
        }
        for (int i = KEY_ID_OFFSET + length; i < KEY_ID_OFFSET + KEY_ID_BYTES; i++) {
            if (header[i] != 0) {
                return Optional.empty();
            }
        }
        String id = new String(header, KEY_ID_OFFSET, length, StandardCharsets.US_ASCII);
        return KEY_ID.matcher(id).matches() ? Optional.of(id) : Optional.empty();
    }

    /** Whether the header's key check is {@code key}'s. */
    static boolean checkMatches(byte[] header, PageKey key) {
        byte[] check = key.check();
        int diff = 0;
        for (int i = 0; i < KEY_CHECK_BYTES; i++) {
            diff |= header[KEY_CHECK_OFFSET + i] ^ check[i];
        }
        return diff == 0;
    }

    /** The additional authenticated data of a page under {@code key} with {@code header}. */
    static byte[] aad(byte[] header, StoreKey key) {
        byte[] aad = new byte[AAD_BYTES];
        System.arraycopy(header, 0, aad, 0, HEADER_BYTES);
        key.namespace().writeIdTo(aad, HEADER_BYTES);
        key.hash().writeTo(aad, HEADER_BYTES + Namespace.ID_BYTES);
        return aad;
    }
}
