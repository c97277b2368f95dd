package io.hicache.core.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class NamespaceTest {
    private final Namespace base =
            Namespace.of("meta-llama/Llama-3.1-8B", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 2);

    @Test
    void everyFieldChangesTheId() {
        List<Namespace> variants = List.of(
                base,
                base.withModelId("meta-llama/Llama-3.1-70B"),
                base.withKvDtype(KvDtype.FP8_E4M3),
                base.withPageByteOrder(PageByteOrder.TOKEN_MAJOR),
                base.withTensorParallel(1, 2),
                base.withTensorParallel(0, 4),
                base.withExtraKey("lora-7"));
        Set<String> ids = new HashSet<>();
        for (Namespace n : variants) {
            assertTrue(n.id().matches("[0-9a-f]{32}"), n.id());
            ids.add(n.id());
        }
        assertEquals(variants.size(), ids.size(), "ids collide: " + variants);
        assertEquals(base, base.withExtraKey("x").withExtraKey(""));
        assertEquals(
                base.id(),
                Namespace.of("meta-llama/Llama-3.1-8B", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 2)
                        .id());
    }

    @Test
    void fieldBoundariesCannotBeForged() {
        // "ab" + "c" and "a" + "bc" must not encode alike.
        Namespace a = base.withModelId("ab").withExtraKey("c");
        Namespace b = base.withModelId("a").withExtraKey("bc");
        assertNotEquals(a.id(), b.id());
    }

    @Test
    void layoutsWithTheSameByteOrderShareANamespace() {
        KvGeometry g = KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16);
        Namespace layerFirst = Namespace.of("m", new PageFormat(g, 64, HostLayout.LAYER_FIRST), 0, 1);
        Namespace direct = Namespace.of("m", new PageFormat(g, 64, HostLayout.PAGE_FIRST_DIRECT), 0, 1);
        Namespace pageFirst = Namespace.of("m", new PageFormat(g, 64, HostLayout.PAGE_FIRST), 0, 1);
        assertEquals(layerFirst, direct);
        assertNotEquals(layerFirst, pageFirst);
    }

    @Test
    void invalidFieldsAreRejectedWithTheValues() {
        var rank = assertThrows(IllegalArgumentException.class, () -> base.withTensorParallel(2, 2));
        assertTrue(rank.getMessage().contains("[0, 2), was 2"), rank.getMessage());
        assertThrows(IllegalArgumentException.class, () -> base.withTensorParallel(-1, 2));
        assertThrows(IllegalArgumentException.class, () -> base.withTensorParallel(0, 0));
        assertThrows(IllegalArgumentException.class, () -> base.withModelId(""));
        assertThrows(IllegalArgumentException.class, () -> base.withModelId("m".repeat(513)));
        assertThrows(IllegalArgumentException.class, () -> base.withExtraKey("x".repeat(513)));
        assertThrows(NullPointerException.class, () -> base.withExtraKey(null));
    }

    @Test
    void anyCharactersAreAllowedAndPrintedSafely() {
        Namespace odd = base.withModelId("../../etc/passwd\0\n").withExtraKey("a/b");
        assertTrue(odd.id().matches("[0-9a-f]{32}"));
        assertTrue(odd.toString().contains("\\u0000"), odd.toString());
        assertFalse(odd.toString().contains("\n"));
        StoreKey key = odd.key(PageHash.fromHex("ab".repeat(32)));
        assertEquals(odd.id() + "/" + "ab".repeat(32), key.toString());
        assertEquals(StoreKey.NAME_LENGTH, key.toString().length());
    }

    @Test
    void keysPairNamespaceAndHash() {
        PageHashes hashes = new PageHasher(1).hashPages(new int[] {1, 2, 3});
        List<StoreKey> keys = base.keys(hashes);
        assertEquals(3, keys.size());
        assertEquals(base.key(hashes.get(2)), keys.get(2));
        assertNotEquals(keys.get(0), base.withExtraKey("other").key(hashes.get(0)));
    }
}
