package io.hicache.core.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import java.math.BigInteger;
import org.junit.jupiter.api.Test;

/** Block ids against SGLang's {@code hash_str_to_int64}, computed here from the hex key as SGLang does, by text. */
class BlockIdsTest {
    /** SGLang: {@code uint64_val = int(hash_str[:16], 16); return uint64_val if < 2**63 else uint64_val - 2**64}. */
    private static long sglang(String hex) {
        BigInteger u = new BigInteger(hex.substring(0, 16), 16);
        return u.compareTo(BigInteger.ONE.shiftLeft(63)) < 0
                ? u.longValueExact()
                : u.subtract(BigInteger.ONE.shiftLeft(64)).longValueExact();
    }

    @Test
    void aBlockIdIsTheKeysFirstSixteenHexDigitsAsASignedInt64() {
        PageHash low = PageHash.fromHex("0123456789abcdef" + "f".repeat(48));
        PageHash high = PageHash.fromHex("fedcba9876543210" + "0".repeat(48));
        assertEquals(0x0123456789abcdefL, BlockIds.of(low));
        assertEquals(sglang(high.toHex()), BlockIds.of(high));
        assertEquals(-81985529216486896L, BlockIds.of(high), "0xfedcba9876543210 - 2^64");
    }

    @Test
    void everyPageOfARunGetsItsOwnIdInOrder() {
        int[] tokens = new int[64];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = 1000 + i;
        }
        PageHashes hashes = new PageHasher(16).hashPages(tokens);
        long[] ids = BlockIds.of(hashes);
        long[] expected = new long[hashes.size()];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = sglang(hashes.get(i).toHex());
        }
        assertArrayEquals(expected, ids);
    }
}
