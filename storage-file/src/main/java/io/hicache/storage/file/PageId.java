package io.hicache.storage.file;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import java.util.HexFormat;

/**
 * A stored page's identity as the local stores keep it: the namespace's id (its fields cannot be recovered from a
 * folder name or a database key, and are not needed: the id decides) and the page hash. Immutable.
 *
 * @param namespaceId {@link Namespace#id()}: 32 lowercase hex characters
 * @param hash        the page hash
 */
public record PageId(String namespaceId, PageHash hash) {
    /** Length of {@link #toBytes()}: the namespace id's 16 bytes, then the hash's 32. */
    public static final int BYTES = Namespace.ID_BYTES + PageHash.BYTES;

    private static final HexFormat HEX = HexFormat.of();

    public PageId {
        Checks.requireArgument(isNamespaceId(namespaceId), "not a namespace id: '%s'", namespaceId);
        Checks.checkNotNull(hash, "hash");
    }

    /** The identity of {@code key}. */
    public static PageId of(StoreKey key) {
        return new PageId(key.namespace().id(), key.hash());
    }

    /** True for 32 lowercase hex characters, the form of {@link Namespace#id()}. */
    static boolean isNamespaceId(String text) {
        return text != null && text.length() == 2 * Namespace.ID_BYTES && isLowerHex(text);
    }

    static boolean isLowerHex(CharSequence text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (!(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f')) {
                return false;
            }
        }
        return true;
    }

    /** The namespace id's raw bytes then the hash's: sorts pages by namespace, so a namespace is one key range. */
    public byte[] toBytes() {
        byte[] out = new byte[BYTES];
        System.arraycopy(HEX.parseHex(namespaceId), 0, out, 0, Namespace.ID_BYTES);
        hash.writeTo(out, Namespace.ID_BYTES);
        return out;
    }

    /** The inverse of {@link #toBytes()}. */
    public static PageId fromBytes(byte[] bytes) {
        Checks.requireArgument(bytes.length == BYTES, "a page id is %d bytes, got %d", BYTES, bytes.length);
        return new PageId(HEX.formatHex(bytes, 0, Namespace.ID_BYTES), PageHash.fromBytes(bytes, Namespace.ID_BYTES));
    }

    /** The namespace id's raw bytes: the first key of the namespace's range. */
    public static byte[] namespacePrefix(String namespaceId) {
        Checks.requireArgument(isNamespaceId(namespaceId), "not a namespace id: '%s'", namespaceId);
        return HEX.parseHex(namespaceId);
    }

    @Override
    public String toString() {
        return namespaceId + "/" + hash.toHex();
    }
}
