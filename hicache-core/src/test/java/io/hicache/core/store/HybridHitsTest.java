package io.hicache.core.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PagePart;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The restorable-prefix rule of hybrid models alone (SGLang issue #39147's cases), the parts' namespaces, and the
 * geometry's window; the rule through every store is the store kit's case.
 */
class HybridHitsTest {
    /** A part holding {@code pages}. */
    private static HybridHits.Presence held(Set<Integer> pages) {
        return (from, to) -> {
            int n = 0;
            while (from + n < to && pages.contains(from + n)) {
                n++;
            }
            return n;
        };
    }

    private static HybridHits.Trailing trailing(int window, Integer... pages) {
        return new HybridHits.Trailing(window, held(Set.of(pages)));
    }

    @Test
    void theGreatestCommonEndpointNotTheMinimum() {
        int[] none = {};
        assertEquals(0, HybridHits.restorablePages(3, none, List.of(trailing(1, 2), trailing(1, 1))));
        assertEquals(1, HybridHits.restorablePages(3, none, List.of(trailing(1, 0, 2), trailing(1, 0, 1))));
        assertEquals(3, HybridHits.restorablePages(3, none, List.of(trailing(1, 2))));
    }

    @Test
    void windowsAndAllPagesParts() {
        assertEquals(5, HybridHits.restorablePages(6, new int[0], List.of(trailing(2, 0, 1, 3, 4))));
        assertEquals(2, HybridHits.restorablePages(6, new int[0], List.of(trailing(3, 0, 1, 3, 4))));
        assertEquals(3, HybridHits.restorablePages(6, new int[] {3}, List.of(trailing(2, 0, 1, 2, 3, 4, 5))));
        assertEquals(4, HybridHits.restorablePages(4, new int[] {9}, List.of()));
        assertEquals(0, HybridHits.restorablePages(0, new int[0], List.of(trailing(1, 0))));
    }

    @Test
    void eachPartHasANamespaceOfItsOwnNamedAsSglangsBackendNamesIt() {
        Namespace ns = Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        assertEquals(ns, ns.forPart(PagePart.KV));
        assertEquals("part=mamba", ns.forPart(PagePart.RECURRENT_STATE).extraKey());
        // clients/python/hicache/sglang/hybrid.py part_extra("lora-a", "swa"): the same string, so the same id
        assertEquals(
                "lora-a/part=swa",
                ns.withExtraKey("lora-a").forPart(PagePart.SLIDING_WINDOW).extraKey());
        assertEquals(PagePart.SPARSE_INDEXER, PagePart.fromWireName("indexer"));
        assertThrows(IllegalArgumentException.class, () -> PagePart.fromWireName("ssm"));
    }

    @Test
    void aGeometrysPartsAndWindow() {
        KvGeometry full = KvGeometry.mha(8, 4, 64, KvDtype.BFLOAT16);
        HybridGeometry g =
                HybridGeometry.fullAttention(full).withWindow(KvGeometry.mha(24, 4, 64, KvDtype.BFLOAT16), 4096);
        assertEquals(64, g.windowPages(64));
        assertEquals(66, g.windowPages(63), "4096 tokens in pages of 63: 65 whole pages and one token more");
        assertEquals(List.of(new HybridHits.PartQuery(PagePart.SLIDING_WINDOW, 64)), HybridHits.PartQuery.of(g, 64));
        HybridGeometry mamba = HybridGeometry.fullAttention(full).withState(2 << 20);
        assertEquals(0, mamba.windowPages(64));
        assertEquals(
                List.of(new HybridHits.PartQuery(PagePart.RECURRENT_STATE, 1)), HybridHits.PartQuery.of(mamba, 64));
        assertEquals(8L * 2 * 4 * 64 * 2 * 64, g.fullPageBytes(64));
        assertThrows(IllegalArgumentException.class, () -> new HybridHits.PartQuery(PagePart.KV, 1));
        assertThrows(IllegalArgumentException.class, () -> new HybridHits.PartQuery(PagePart.SLIDING_WINDOW, 0));
    }
}
