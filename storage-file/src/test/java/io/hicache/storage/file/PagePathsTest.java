package io.hicache.storage.file;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class PagePathsTest {
    private static final Path ROOT = Path.of("/srv/hicache/store");
    private static final PageHash HASH = PageHash.fromHex("ab" + "0123456789abcdef".repeat(3) + "0123456789abcd");

    @Test
    void hostileModelIdsAndExtraKeysNeverReachAPath() {
        PagePaths paths = new PagePaths(ROOT);
        List<String> hostile = List.of(
                "../../etc/passwd",
                "/etc/passwd",
                "a/b/c",
                "..",
                ".",
                "nul\0byte",
                "x".repeat(512),
                "C:\\Windows",
                "%2e%2e%2f",
                "\n",
                "model/../../../../tmp");
        for (String text : hostile) {
            for (Namespace ns : List.of(namespace(text, ""), namespace("m", text))) {
                Path file = paths.pageFile(PageId.of(new StoreKey(ns, HASH)));
                assertTrue(file.startsWith(ROOT), file.toString());
                Path relative = ROOT.relativize(file);
                assertEquals(3, relative.getNameCount(), file.toString());
                assertEquals(32, relative.getName(0).toString().length());
                assertEquals("ab0", relative.getName(1).toString());
                assertEquals(HASH.toHex() + ".page", relative.getName(2).toString());
                assertTrue(relative.toString().matches("[0-9a-f/.pg]+"), relative.toString());
            }
        }
    }

    @Test
    void overLongOrEmptyNamespaceTextIsRejectedWithTheReason() {
        var tooLong = assertThrows(IllegalArgumentException.class, () -> namespace("x".repeat(513), ""));
        assertTrue(tooLong.getMessage().contains("513") && tooLong.getMessage().contains("512"), tooLong.getMessage());
        var empty = assertThrows(IllegalArgumentException.class, () -> namespace("", ""));
        assertTrue(empty.getMessage().contains("empty"), empty.getMessage());
        var badId = assertThrows(
                IllegalArgumentException.class, () -> new PageId("../../etc/passwd0000000000000000", HASH));
        assertTrue(badId.getMessage().contains("not a namespace id"), badId.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new PagePaths(ROOT).namespaceDir(".."));
    }

    @Test
    void onlyThePagesOwnNamesParseBack() {
        PagePaths paths = new PagePaths(ROOT);
        PageId id = PageId.of(new StoreKey(namespace("m", ""), HASH));
        assertEquals(id, paths.parse(paths.pageFile(id)).orElseThrow());
        String ns = id.namespaceId();
        for (String other : List.of(
                ns + "/ab0/" + HASH.toHex() + ".tmp",
                ns + "/ab1/" + HASH.toHex() + ".page",
                ns + "/ab0/" + HASH.toHex().toUpperCase() + ".page",
                ns + "/ab0/" + HASH.toHex() + ".page.bak",
                ns + "/ab0/deadbeef.page",
                "namespace.txt",
                ns + "/namespace.txt",
                "x/ab0/" + HASH.toHex() + ".page",
                ns + "/ab0/x/" + HASH.toHex() + ".page")) {
            assertFalse(paths.parse(ROOT.resolve(other)).isPresent(), other);
        }
        assertFalse(paths.parse(ROOT.resolve("../elsewhere/" + ns + "/ab0/" + HASH.toHex() + ".page"))
                .isPresent());
    }

    @Test
    void temporaryNamesAreUniqueAndBesideThePage() {
        PagePaths paths = new PagePaths(ROOT);
        PageId id = PageId.of(new StoreKey(namespace("m", ""), HASH));
        Path a = paths.tempFile(id);
        Path b = paths.tempFile(id);
        assertFalse(a.equals(b));
        assertEquals(paths.pageFile(id).getParent(), a.getParent());
        assertTrue(PagePaths.isTemp(a));
        assertFalse(PagePaths.isTemp(paths.pageFile(id)));
    }

    @Test
    void pageIdsRoundTripThroughBytesInNamespaceOrder() {
        PageId id = PageId.of(new StoreKey(namespace("m", ""), HASH));
        byte[] bytes = id.toBytes();
        assertEquals(PageId.BYTES, bytes.length);
        assertEquals(id, PageId.fromBytes(bytes));
        byte[] prefix = PageId.namespacePrefix(id.namespaceId());
        for (int i = 0; i < prefix.length; i++) {
            assertEquals(prefix[i], bytes[i]);
        }
    }

    private static Namespace namespace(String modelId, String extra) {
        return Namespace.of(modelId, KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1)
                .withExtraKey(extra);
    }
}
