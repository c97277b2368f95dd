package io.hicache.testkit;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** Page keys with random hashes, the same for the same seed: for tests and benchmarks. Stateless. */
public final class RandomKeys {
    private RandomKeys() {}

    /** {@code count} keys in {@code ns}, their hashes drawn from {@code seed}. */
    public static List<StoreKey> of(Namespace ns, int count, long seed) {
        Random r = new Random(seed);
        List<StoreKey> keys = new ArrayList<>(count);
        byte[] b = new byte[PageHash.BYTES];
        for (int i = 0; i < count; i++) {
            r.nextBytes(b);
            keys.add(ns.key(PageHash.fromBytes(b, 0)));
        }
        return keys;
    }
}
