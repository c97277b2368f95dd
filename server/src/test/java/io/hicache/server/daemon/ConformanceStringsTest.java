package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/** docs/protocol.md §1 "Strings, namespaces, hashes", on the wire with {@link DocWireClient}. */
@Timeout(30)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceStringsTest {
    TestDaemon d;

    @BeforeAll
    void start() throws IOException {
        d = TestDaemon.start(Map.of("server.max-page-bytes", "64KiB", "server.max-frame-bytes", "192KiB"));
    }

    @AfterAll
    void stop() throws IOException {
        d.close();
    }

    static final byte[][] INVALID = {
        {(byte) 0xFF},
        {(byte) 0xC3, 0x28},
        {(byte) 0xC0, (byte) 0x80},
        {(byte) 0xED, (byte) 0xA0, (byte) 0x80},
        {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80},
        {(byte) 0xE2, (byte) 0x82},
        {(byte) 0x80}
    };

    // §1 "Strings must be valid UTF-8: invalid bytes are refused (ERROR MALFORMED, "not valid UTF-8"), never repaired"
    @Test
    void invalidUtf8IsRefusedInEveryString() throws IOException {
        try (DocWireClient c = open(d.port())) {
            for (byte[] bad : INVALID) {
                byte[] withBad = new Buf().bytes(utf8("m")).bytes(bad).done();
                Ns base = Ns.fresh();
                for (Ns ns : List.of(base.modelBytes(withBad), base.extraBytes(withBad), base.dtypeBytes(bad))) {
                    String m = c.callError(LEADING_HITS, 0, hashesPayload(ns, List.of(randomHash())), E_MALFORMED);
                    assertTrue(m.contains("UTF-8"), "the message says not valid UTF-8: " + m);
                }
            }
            assertEquals(0, c.health(), "MALFORMED leaves the connection open");
        }
    }

    // §1 "never repaired, so two namespaces that differ in any byte stay apart"
    @Test
    void namespacesDifferingOnlyInInvalidBytesStayApart() throws IOException {
        String model = "m-" + Long.toHexString(System.nanoTime());
        Ns replaced = Ns.of(model + "\uFFFD"); // what a repairing decoder would make of the invalid byte
        Page p = Page.random(50);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(replaced, p));
            for (byte[] bad : INVALID) {
                Ns invalid = replaced.modelBytes(
                        new Buf().bytes(utf8(model)).bytes(bad).done());
                c.callError(LEADING_HITS, 0, hashesPayload(invalid, List.of(p.hash())), E_MALFORMED);
                c.callError(PUT, 0, putPayload(invalid, List.of(new Page(p.hash(), new byte[50]))), E_MALFORMED);
            }
            assertArrayEquals(p.body(), c.get(replaced, p).get(0).body());
        }
    }

    // §1 "string = length:u16 bytes[length] strict UTF-8, at most 2048 bytes (a longer length: MALFORMED)"
    @Test
    void aStringOver2048BytesIsMalformed() throws IOException {
        try (DocWireClient c = open(d.port())) {
            for (int len : new int[] {2049, 0xFFFF}) {
                byte[] ascii = new byte[len];
                Arrays.fill(ascii, (byte) 'a');
                Ns ns = Ns.fresh().extraBytes(ascii);
                c.callError(LEADING_HITS, 0, hashesPayload(ns, List.of(randomHash())), E_MALFORMED);
            }
            assertEquals(0, c.health());
        }
    }

    // §1 "model is 1 to 512 characters (Java chars, UTF-16 units) and extra 0 to 512; longer or empty models are
    // refused as MALFORMED ("bad namespace")"
    @Test
    void modelAndExtraLengthsAreCountedInJavaChars() throws IOException {
        try (DocWireClient c = open(d.port())) {
            String tag = Long.toHexString(System.nanoTime());
            List<Ns> fine = List.of(
                    Ns.of("€".repeat(512 - tag.length()) + tag), // 512 chars, 1,500+ bytes
                    Ns.of("😀".repeat(255) + tag.substring(0, 2)), // 512 UTF-16 units
                    Ns.of("x"),
                    Ns.fresh().extra("e".repeat(512)),
                    Ns.fresh().extra(""));
            for (Ns ns : fine) {
                Page p = Page.random(20);
                assertArrayEquals(new int[] {OK}, c.put(ns, p), "accepted: " + new String(ns.model()).length());
                assertEquals(1, c.leadingHits(ns, List.of(p)));
            }
            List<Ns> refused = List.of(
                    Ns.of(""),
                    Ns.of("a".repeat(513)),
                    Ns.of("😀".repeat(257)),
                    Ns.of("€".repeat(513)),
                    Ns.fresh().extra("e".repeat(513)),
                    Ns.fresh().extra("😀".repeat(257)));
            for (Ns ns : refused) {
                String m = c.callError(PUT, 0, putPayload(ns, List.of(Page.random(20))), E_MALFORMED);
                assertTrue(m.contains("bad namespace"), "message: " + m);
            }
        }
    }

    // §1 "dtype aliases name one dtype: bf16 and bfloat16 are the same namespace"; the alias list of dtype
    @Test
    void dtypeAliasesShareANamespace() throws IOException {
        String[][] groups = {
            {"bfloat16", "bf16"},
            {"float16", "fp16", "half"},
            {"float32", "fp32"},
            {"fp8_e4m3", "float8_e4m3fn"},
            {"fp8_e5m2", "float8_e5m2"},
            {"fp4_e2m1"}
        };
        try (DocWireClient c = open(d.port())) {
            for (String[] group : groups) {
                for (String putAs : group) {
                    Ns ns = Ns.fresh().dtype(putAs);
                    Page p = Page.random(30);
                    assertArrayEquals(new int[] {OK}, c.put(ns, p), putAs);
                    for (String other : group) {
                        assertEquals(1, c.leadingHits(ns.dtype(other), List.of(p)), putAs + " seen as " + other);
                    }
                    for (String[] otherGroup : groups) {
                        if (otherGroup != group) {
                            assertEquals(
                                    0,
                                    c.leadingHits(ns.dtype(otherGroup[0]), List.of(p)),
                                    putAs + " seen as " + otherGroup[0]);
                        }
                    }
                }
            }
        }
    }

    // §1 "dtype is one of ..." (anything else is not a namespace), "tp_rank < tp_size"
    @Test
    void anUnknownDtypeOrARankNotBelowTheSizeIsMalformed() throws IOException {
        Map<String, Ns> cases = new LinkedHashMap<>();
        cases.put("dtype int8", Ns.fresh().dtype("int8"));
        cases.put("dtype empty", Ns.fresh().dtype(""));
        cases.put("tp 1 of 1", Ns.fresh().tp(1, 1));
        cases.put("tp 0 of 0", Ns.fresh().tp(0, 0));
        cases.put("tp 5 of 4", Ns.fresh().tp(5, 4));
        List<String> accepted = new ArrayList<>();
        try (DocWireClient c = open(d.port())) {
            for (Map.Entry<String, Ns> e : cases.entrySet()) {
                Frame f = c.call(PUT, 0, putPayload(e.getValue(), List.of(Page.random(20))));
                if (!f.isError() || f.errorCode() != E_MALFORMED) {
                    accepted.add(e.getKey() + " -> " + f);
                }
            }
            assertEquals(0, c.health());
        }
        assertEquals(List.of(), accepted, "namespaces that are not refused as MALFORMED");
    }

    // §1 "dtype is one of bfloat16 (bf16), float16 (fp16, half), ..."; "dtype names are matched ignoring ASCII case
    // and surrounding spaces"; "an unknown dtype ... MALFORMED"
    @Test
    void dtypeSpellingsOfOneDtypeShareANamespaceAndUnknownOnesAreRefused() throws IOException {
        Ns ns = Ns.fresh().dtype("bfloat16");
        Page p = Page.random(20);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, p));
            for (String spelling : List.of("BF16", "BFloat16", " bf16 ")) {
                assertEquals(1, c.leadingHits(ns.dtype(spelling), List.of(p)), "dtype '" + spelling + "'");
            }
            assertEquals(0, c.leadingHits(ns.dtype("FP16"), List.of(p)), "another dtype, another namespace");
            for (String unknown : List.of("bf17", "", "bfloat 16")) {
                Frame f = c.call(PUT, 0, putPayload(Ns.fresh().dtype(unknown), List.of(Page.random(20))));
                assertTrue(f.isError() && f.errorCode() == E_MALFORMED, "dtype '" + unknown + "' -> " + f);
            }
        }
    }

    // §1 "Pages of different namespaces never see each other. Strings are compared as bytes after decoding"
    @Test
    void differentNamespacesNeverSeeEachOther() throws IOException {
        Ns ns = Ns.fresh().model("caf\u00e9-" + System.nanoTime()).tp(0, 2);
        Page p = Page.random(40);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, p));
            String model = new String(ns.model(), StandardCharsets.UTF_8);
            List<Ns> others = List.of(
                    ns.model(model.toUpperCase()),
                    ns.model(model.replace("\u00e9", "e\u0301")),
                    ns.dtype("float16"),
                    ns.order(1),
                    ns.tp(1, 2),
                    ns.tp(0, 4),
                    ns.extra("lora-a"));
            for (Ns other : others) {
                assertEquals(0, c.leadingHits(other, List.of(p)));
                assertEquals(MISS, c.get(other, p).get(0).status());
            }
            assertEquals(1, c.leadingHits(ns, List.of(p)));
        }
    }
}
