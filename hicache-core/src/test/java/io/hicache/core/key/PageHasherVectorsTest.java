package io.hicache.core.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Checks {@link PageHasher} against vectors written by an independent Python implementation
 * ({@code src/test/python/page_hash_vectors.py}, using hashlib).
 */
class PageHasherVectorsTest {
    record Vector(String name, int pageSize, PageHash prior, int[] tokens, List<String> expected) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Vector> vectors() throws IOException {
        List<Vector> vectors = new ArrayList<>();
        try (InputStream in = Objects.requireNonNull(
                        PageHasherVectorsTest.class.getResourceAsStream("page-hash-vectors.tsv"), "vector fixture");
                BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith("#") || line.isBlank()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                int[] tokens = f[3].isEmpty()
                        ? new int[0]
                        // unsigned 32-bit ids travel as their int bit pattern
                        : Arrays.stream(f[3].split(","))
                                .mapToInt(t -> (int) Long.parseLong(t))
                                .toArray();
                List<String> expected = f[4].isEmpty() ? List.of() : List.of(f[4].split(","));
                vectors.add(new Vector(
                        f[0],
                        Integer.parseInt(f[1]),
                        f[2].equals("-") ? null : PageHash.fromHex(f[2]),
                        tokens,
                        expected));
            }
        }
        return vectors.stream();
    }

    @Test
    void fixtureHasEnoughVectorsOfEachKind() throws IOException {
        List<Vector> all = vectors().toList();
        assertTrue(all.size() >= 50, "at least 50 vectors, have " + all.size());
        assertTrue(all.stream().anyMatch(v -> v.prior() == null && !v.expected().isEmpty()), "first pages");
        assertTrue(all.stream().anyMatch(v -> Arrays.stream(v.tokens()).anyMatch(t -> t < 0)), "ids >= 2^31");
        assertTrue(all.stream().anyMatch(v -> v.tokens().length >= 8192), "long sequences");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void matchesIndependentImplementation(Vector v) {
        PageHasher hasher = new PageHasher(v.pageSize());
        PageHashes hashes = v.prior() == null
                ? hasher.hashPages(v.tokens())
                : hasher.hashPages(v.tokens(), 0, v.tokens().length, v.prior());
        assertEquals(v.expected(), hashes.asList().stream().map(PageHash::toHex).toList());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void hashingInTwoPartsChainsLikeHashingAtOnce(Vector v) {
        int pages = v.expected().size();
        if (pages < 2) {
            return;
        }
        PageHasher hasher = new PageHasher(v.pageSize());
        int split = (pages / 2) * v.pageSize();
        int end = pages * v.pageSize();
        PageHashes head = v.prior() == null
                ? hasher.hashPages(v.tokens(), 0, split)
                : hasher.hashPages(v.tokens(), 0, split, v.prior());
        PageHashes tail = hasher.hashPages(v.tokens(), split, end, head.last());
        assertEquals(
                v.expected(),
                head.concat(tail).asList().stream().map(PageHash::toHex).toList());
    }
}
