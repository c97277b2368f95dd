package io.hicache.core.events;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHashes;

/**
 * Block ids as SGLang computes them for events ({@code hash_str_to_int64}): the page's SHA-256 key, whose hex form
 * is SGLang's {@code get_hash_str}, cut to its first 16 hex characters (8 bytes), read as an unsigned 64-bit
 * big-endian number and taken as a signed int64: the page hash's first 8 bytes as a Java {@code long}. Stateless.
 */
public final class BlockIds {
    private BlockIds() {}

    /** The block id of one page. */
    public static long of(PageHash hash) {
        return hash.prefix64();
    }

    /** The block ids of {@code hashes}, in order. */
    public static long[] of(PageHashes hashes) {
        long[] ids = new long[hashes.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = hashes.get(i).prefix64();
        }
        return ids;
    }
}
