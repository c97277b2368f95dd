package io.hicache.core.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * The key-identity contract of docs/keys.md, as properties: every field of a namespace is in every key, no key depends
 * on a process's hash seed, ids match an independent implementation (and the Python client, which checks the same
 * vectors), and a namespace of an older key format names other pages than the current one.
 */
class KeyContractTest {
    private static final int HASHES = 64;

    /** One change per field of the contract, each to a value the random bases never hold. */
    private static Map<String, UnaryOperator<Namespace>> changes() {
        Map<String, UnaryOperator<Namespace>> c = new LinkedHashMap<>();
        c.put("model", n -> n.withModelId(n.modelId() + "-other"));
        c.put(
                "weights revision",
                n -> n.toBuilder().weightsRevision(n.weightsRevision() + "x").build());
        c.put("kv dtype", n -> n.withKvDtype(n.kvDtype() == KvDtype.FP8_E5M2 ? KvDtype.FP4_E2M1 : KvDtype.FP8_E5M2));
        c.put(
                "quantization",
                n -> n.toBuilder().quantization(n.quantization() + "q").build());
        c.put(
                "byte order",
                n -> n.withPageByteOrder(
                        n.pageByteOrder() == PageByteOrder.LAYER_MAJOR
                                ? PageByteOrder.TOKEN_MAJOR
                                : PageByteOrder.LAYER_MAJOR));
        c.put("page size", n -> n.withPageTokens(n.pageTokens() + 1));
        c.put("tp rank", n -> n.withTensorParallel((n.tpRank() + 1) % n.tpSize(), n.tpSize()));
        c.put("tp size", n -> n.withTensorParallel(n.tpRank(), n.tpSize() * 2));
        c.put("shared by ranks", n -> n.tpSize() == 1 ? n.withTensorParallel(0, 2) : n.sharedByRanks());
        c.put("tenant", n -> n.toBuilder().tenant(n.tenant() + "t").build());
        c.put("extra key", n -> n.withExtraKey(n.extraKey() + "e"));
        c.put("pool part", n -> n.forPart(PagePart.RECURRENT_STATE));
        return c;
    }

    private static Namespace randomNamespace(Random r) {
        int size = 2 << r.nextInt(3);
        return Namespace.builder("model-" + r.nextInt(1000))
                .weightsRevision(r.nextBoolean() ? "" : Long.toHexString(r.nextLong()))
                .kvDtype(r.nextBoolean() ? KvDtype.BFLOAT16 : KvDtype.FP8_E4M3)
                .quantization(r.nextBoolean() ? "" : "kivi")
                .pageByteOrder(r.nextBoolean() ? PageByteOrder.LAYER_MAJOR : PageByteOrder.TOKEN_MAJOR)
                .pageTokens(r.nextBoolean() ? 0 : 16 << r.nextInt(3))
                .tensorParallel(r.nextInt(size), size)
                .tenant(r.nextBoolean() ? "" : "tenant-" + r.nextInt(9))
                .extraKey(r.nextBoolean() ? "" : "lora-" + r.nextInt(9))
                .build();
    }

    private static List<PageHash> randomHashes(Random r) {
        List<PageHash> hashes = new ArrayList<>();
        byte[] b = new byte[PageHash.BYTES];
        for (int i = 0; i < HASHES; i++) {
            r.nextBytes(b);
            hashes.add(PageHash.fromBytes(b, 0));
        }
        return hashes;
    }

    @Test
    void changingAnyOneFieldFlipsEveryKey() {
        Random r = new Random(40);
        for (int trial = 0; trial < 200; trial++) {
            Namespace base = randomNamespace(r);
            List<PageHash> hashes = randomHashes(r);
            for (Map.Entry<String, UnaryOperator<Namespace>> change : changes().entrySet()) {
                Namespace changed = change.getValue().apply(base);
                assertNotEquals(base.id(), changed.id(), change.getKey() + " of " + base);
                for (PageHash h : hashes) {
                    StoreKey a = base.key(h);
                    StoreKey b = changed.key(h);
                    assertNotEquals(a, b, change.getKey());
                    assertFalse(
                            Arrays.equals(PageRecordDescriptor.keyBytes(a), PageRecordDescriptor.keyBytes(b)),
                            change.getKey() + ": the key a page header holds must differ too");
                    assertNotEquals(a.toString(), b.toString(), change.getKey() + ": the key's file/object name");
                }
            }
            // ... and the same fields give the same keys, rebuilt from scratch.
            assertEquals(base, base.toBuilder().build());
            assertEquals(base.key(hashes.getFirst()), base.toBuilder().build().key(hashes.getFirst()));
        }
    }

    @Test
    void pageHashesAreWholeSha256DigestsAndKeysKeepThemWhole() {
        assertEquals(32, PageHash.BYTES, "a page hash is a whole SHA-256 digest");
        PageHasher hasher = new PageHasher(4);
        PageHashes a = hasher.hashPages(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
        PageHashes b = hasher.hashPages(new int[] {1, 2, 3, 4, 5, 6, 7, 9});
        assertEquals(a.get(0), b.get(0));
        assertNotEquals(a.get(1), b.get(1));
        byte[] key =
                PageRecordDescriptor.keyBytes(Namespace.builder("m").build().key(a.get(1)));
        assertEquals(Namespace.ID_BYTES + PageHash.BYTES, key.length);
        assertTrue(Arrays.equals(a.get(1).toBytes(), Arrays.copyOfRange(key, Namespace.ID_BYTES, key.length)));
    }

    @Test
    void idsMatchAnIndependentImplementation() throws IOException {
        int checked = 0;
        for (String[] v : vectors()) {
            Namespace ns = fromVector(v);
            assertEquals(v[11], ns.id(), String.join(" ", v));
            checked++;
        }
        assertTrue(checked >= 30, "vectors read: " + checked);
    }

    @Test
    void anOlderFormatNamesOtherPagesAndCannotCarryNewerFields() {
        Namespace current = Namespace.builder("meta-llama/Llama-3.1-8B").build();
        Namespace formatOne = current.toBuilder().formatVersion(1).build();
        assertEquals(2, Namespace.FORMAT_VERSION);
        assertEquals(Namespace.FORMAT_VERSION, current.formatVersion());
        assertNotEquals(current.id(), formatOne.id());
        assertNotEquals(current, formatOne);
        PageHash h = PageHash.fromBytes(new byte[32], 0);
        assertNotEquals(current.key(h), formatOne.key(h));
        assertThrows(
                IllegalArgumentException.class,
                () -> formatOne.toBuilder().weightsRevision("r").build());
        assertThrows(IllegalArgumentException.class, () -> formatOne.withPageTokens(16));
        var unknown = assertThrows(
                IllegalArgumentException.class,
                () -> current.toBuilder().formatVersion(3).build());
        assertTrue(unknown.getMessage().contains("key format version 3"), unknown.getMessage());
    }

    @Test
    void twoJvmsWithDifferentHashSeedsComputeTheSameKeys() throws Exception {
        String here = String.join("\n", PrintKeys.lines());
        // Identity hash codes and the salt of immutable collections differ between processes; -XX:hashCode changes
        // how identity hashes are made. None of it may reach a key.
        String first = runChild("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2");
        String second = runChild("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=5");
        assertEquals(here, first);
        assertEquals(here, second);
    }

    private static String runChild(String... jvmFlags) throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java));
        cmd.addAll(List.of(jvmFlags));
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), PrintKeys.class.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child JVM ended");
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    /** Prints namespace ids and page keys of fixed inputs, one per line: run in child JVMs. */
    static final class PrintKeys {
        static List<String> lines() {
            List<String> lines = new ArrayList<>();
            Random r = new Random(7);
            Map<String, Namespace> seen = new HashMap<>(); // iteration order would differ between JVMs: not used
            for (int i = 0; i < 32; i++) {
                Namespace ns = randomNamespace(r);
                seen.put(ns.id(), ns);
                int[] tokens = r.ints(64, 0, 128_000).toArray();
                PageHashes hashes = ns.extraKey().isEmpty()
                        ? new PageHasher(16).hashPages(tokens)
                        : new PageHasher(16)
                                .hashPages(tokens, 0, tokens.length, PageHasher.extraKeyRoot(ns.extraKey()));
                for (int p = 0; p < hashes.size(); p++) {
                    lines.add(ns.key(hashes.get(p)).toString());
                }
            }
            lines.add("namespaces " + seen.size());
            return lines;
        }

        public static void main(String[] args) {
            System.out.println(String.join("\n", lines()));
        }
    }

    static List<String[]> vectors() throws IOException {
        List<String[]> out = new ArrayList<>();
        try (InputStream in = Objects.requireNonNull(
                        KeyContractTest.class.getResourceAsStream("namespace-id-vectors.tsv"), "vector fixture");
                BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (!line.startsWith("#") && !line.isBlank()) {
                    out.add(line.split("\t", -1));
                }
            }
        }
        return out;
    }

    private static Namespace fromVector(String[] v) {
        return Namespace.builder(text(v[1]))
                .formatVersion(Integer.parseInt(v[0]))
                .weightsRevision(text(v[2]))
                .kvDtype(KvDtype.parse(v[3]))
                .quantization(text(v[4]))
                .pageByteOrder(v[5].equals("token_major") ? PageByteOrder.TOKEN_MAJOR : PageByteOrder.LAYER_MAJOR)
                .pageTokens(Integer.parseInt(v[6]))
                .tensorParallel(Integer.parseInt(v[7]), Integer.parseInt(v[8]))
                .tenant(text(v[9]))
                .extraKey(text(v[10]))
                .build();
    }

    private static String text(String cell) {
        return cell.equals("-") ? "" : cell;
    }
}
