package io.hicache.core.page;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class PageFormatTest {
    @Test
    void llama3SizesMatchHandArithmetic() {
        // Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16: 2 * 32 * 8 * 128 * 2 bytes = 128 KiB per token.
        KvGeometry g = KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16);
        assertEquals(2048, g.rowBytes());
        assertEquals(128 * 1024, g.tokenBytes());
        PageFormat page = new PageFormat(g, 64, HostLayout.PAGE_FIRST);
        assertEquals(8L << 20, page.pageBytes());
        assertEquals(4L << 20, page.partBytes());
        assertEquals(256 * 1024, page.layerBytes());
        // On 2 ranks each holds 4 heads: half the bytes.
        assertEquals(64 * 1024, g.perRank(2).tokenBytes());
    }

    @Test
    void mlaSizesMatchHandArithmetic() {
        // DeepSeek-V3: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64, bf16, K only.
        KvGeometry g = KvGeometry.mla(61, 512, 64, KvDtype.BFLOAT16);
        assertEquals(AttentionKind.MLA, g.attention());
        assertEquals(61 * 576 * 2, g.tokenBytes());
        assertEquals(g, g.perRank(8), "MLA is replicated on every rank");
        assertEquals(61L * 576 * 2 * 64, new PageFormat(g, 64, HostLayout.LAYER_FIRST).partBytes());
    }

    @Test
    void invalidCombinationsNameTheirValues() {
        var mla = assertThrows(
                IllegalArgumentException.class, () -> new KvGeometry(AttentionKind.MLA, 61, 8, 576, KvDtype.BFLOAT16));
        assertTrue(mla.getMessage().contains("kvHeads must be 1, was 8"), mla.getMessage());
        var fp4 = assertThrows(IllegalArgumentException.class, () -> KvGeometry.mha(2, 1, 3, KvDtype.FP4_E2M1));
        assertTrue(fp4.getMessage().contains("12 bits"), fp4.getMessage());
        var tp = assertThrows(
                IllegalArgumentException.class,
                () -> KvGeometry.mha(32, 6, 128, KvDtype.BFLOAT16).perRank(4));
        assertTrue(tp.getMessage().contains("6 KV heads") && tp.getMessage().contains("size 4"), tp.getMessage());
        var layers = assertThrows(IllegalArgumentException.class, () -> KvGeometry.mha(0, 8, 128, KvDtype.BFLOAT16));
        assertTrue(
                layers.getMessage().contains("layers") && layers.getMessage().contains("was 0"), layers.getMessage());
        var big = assertThrows(
                IllegalArgumentException.class,
                () -> new PageFormat(KvGeometry.mha(80, 64, 128, KvDtype.FLOAT32), 4096, HostLayout.LAYER_FIRST));
        assertTrue(
                big.getMessage().contains("4096 tokens") && big.getMessage().contains("page-size"), big.getMessage());
        assertThrows(
                IllegalArgumentException.class,
                () -> new PageFormat(KvGeometry.mha(1, 1, 8, KvDtype.BFLOAT16), 0, HostLayout.PAGE_FIRST));
    }

    @Test
    void fewerHeadsThanRanksAreReplicated() {
        assertEquals(1, KvGeometry.mha(32, 2, 128, KvDtype.BFLOAT16).perRank(8).kvHeads());
        assertEquals(2, KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16).perRank(4).kvHeads());
    }

    @ParameterizedTest
    @EnumSource(HostLayout.class)
    void rowOffsetsTileThePageExactly(HostLayout layout) {
        PageFormat page = new PageFormat(KvGeometry.mha(3, 2, 4, KvDtype.FLOAT16), 5, layout);
        Set<Long> offsets = new TreeSet<>();
        for (int part = 0; part < 2; part++) {
            for (int layer = 0; layer < 3; layer++) {
                for (int token = 0; token < 5; token++) {
                    long off = page.rowOffset(part, layer, token);
                    assertEquals(0, off % page.rowBytes());
                    assertTrue(offsets.add(off), "offset used twice: " + off);
                }
            }
        }
        assertEquals(page.pageBytes() / page.rowBytes(), offsets.size());
        assertEquals(page.pageBytes() - page.rowBytes(), ((TreeSet<Long>) offsets).last());
        assertThrows(IndexOutOfBoundsException.class, () -> page.rowOffset(2, 0, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> page.rowOffset(0, 3, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> page.rowOffset(0, 0, 5));
    }

    @Test
    void rowOrderFollowsTheLayout() {
        KvGeometry g = KvGeometry.mha(3, 1, 4, KvDtype.FLOAT32);
        PageFormat layerMajor = new PageFormat(g, 5, HostLayout.LAYER_FIRST);
        PageFormat tokenMajor = new PageFormat(g, 5, HostLayout.PAGE_FIRST);
        // layer-major: the next token of the same layer is the next row; token-major: the next layer is.
        assertEquals(layerMajor.rowBytes(), layerMajor.rowOffset(0, 0, 1));
        assertEquals(tokenMajor.rowBytes(), tokenMajor.rowOffset(0, 1, 0));
        // V starts after all of K in both.
        assertEquals(layerMajor.partBytes(), layerMajor.rowOffset(1, 0, 0));
        assertEquals(tokenMajor.partBytes(), tokenMajor.rowOffset(1, 0, 0));
    }

    @Test
    void namesParseAsSGLangSpellsThem() {
        assertEquals(HostLayout.PAGE_FIRST_DIRECT, HostLayout.parse("page_first_direct"));
        assertEquals(KvDtype.BFLOAT16, KvDtype.parse("bf16"));
        assertEquals(KvDtype.FP8_E4M3, KvDtype.parse("FP8_E4M3"));
        var bad = assertThrows(IllegalArgumentException.class, () -> HostLayout.parse("page_last"));
        assertTrue(bad.getMessage().contains("layer_first, page_first, page_first_direct"), bad.getMessage());
        assertThrows(IllegalArgumentException.class, () -> KvDtype.parse("int3"));
    }
}
