package io.hicache.storage.crypt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The key file's syntax, the settings, and what a mistake in either says (never a key). */
class CryptConfigTest {
    @TempDir
    Path dir;

    private static final Map<String, String> KEYS = TestKeys.newKeys("k1", "k2", "acme");

    @Test
    void aKeyFileWithRotationAndTenants() {
        KeyRing ring = KeyRing.parse(
                "# keys\n\nk1 " + KEYS.get("k1") + "   # the old one\r\nk2 " + KEYS.get("k2") + "\n" + "acme "
                        + KEYS.get("acme") + "\ntenant:acme acme\ntenant:big corp k1\n",
                "key file x",
                "k2");
        assertEquals("k2", ring.activeKeyId());
        assertEquals(List.of("k1", "k2", "acme"), List.copyOf(ring.keyIds()));
        assertEquals(Map.of("acme", "acme", "big corp", "k1"), ring.tenantKeyIds());
        assertEquals("acme", ring.forWrite("acme").id());
        assertEquals("k1", ring.forWrite("big corp").id());
        assertEquals("k2", ring.forWrite("").id());
        assertEquals("k2", ring.forWrite("other").id());
        assertTrue(ring.find("k1").isPresent());
        assertTrue(ring.find("k3").isEmpty());
        assertFalse(ring.toString().contains(KEYS.get("k1")), "a ring prints ids, not keys");
    }

    @Test
    void theKeyFileOfSecurityMdReadsAsItSays() throws Exception {
        String doc = java.nio.file.Files.readString(Path.of("..", "docs", "security.md"));
        int start = doc.indexOf("```text\n") + "```text\n".length();
        String example = doc.substring(start, doc.indexOf("```", start));
        KeyRing ring = KeyRing.parse(example, "docs/security.md", "k2026b");
        assertEquals(List.of("k2026b", "k2026a", "k-acme"), List.copyOf(ring.keyIds()));
        assertEquals(Map.of("acme", "k-acme"), ring.tenantKeyIds());
    }

    @Test
    void oneKeyNeedsNoActiveKeyAndEntriesMaySitOnOneLine() {
        assertEquals("k1", KeyRing.parse("k1 " + KEYS.get("k1"), "x", null).activeKeyId());
        KeyRing two = KeyRing.parse("k1 " + KEYS.get("k1") + "; k2 " + KEYS.get("k2") + ";", "x", "k1");
        assertEquals(List.of("k1", "k2"), List.copyOf(two.keyIds()));
    }

    @Test
    void mistakesNameTheLineAndNeverTheKey() {
        String k1 = KEYS.get("k1");
        String shortKey = Base64.getEncoder().encodeToString(new byte[31]);
        Map<String, String> cases = Map.of(
                "k1 " + k1 + "\nk1 " + KEYS.get("k2"),
                "line 2 of origin: key id 'k1' appears twice",
                "k1 " + k1 + "\nk2 " + shortKey,
                "line 2 of origin: key 'k2' is 31 bytes",
                "k1 " + k1 + "\nk2 not*base64!",
                "line 2 of origin: key 'k2' is not standard base64",
                "k1 " + k1 + "\n" + k1,
                "line 2 of origin: expected 'KEY_ID BASE64_KEY'",
                "way/too-long-key-id-here " + k1,
                "line 1 of origin: 'way/too-long-key-id-here' is not a key id",
                "k1 " + k1 + "\ntenant:acme nope",
                "line 2 of origin: tenant 'acme' is mapped to key 'nope'",
                "# nothing\n",
                "origin holds no key",
                "k1 " + k1 + "\nk2 " + KEYS.get("k2"),
                "origin holds 2 keys (k1, k2): name the one to write with");
        cases.forEach((text, message) -> {
            IllegalArgumentException e =
                    assertThrows(IllegalArgumentException.class, () -> KeyRing.parse(text, "origin", null));
            assertTrue(String.valueOf(e.getMessage()).contains(message), e.getMessage());
            for (String key : KEYS.values()) {
                assertFalse(String.valueOf(e.getMessage()).contains(key), "a message shows a key: " + e.getMessage());
            }
        });
        IllegalArgumentException unknownActive =
                assertThrows(IllegalArgumentException.class, () -> KeyRing.parse("k1 " + k1, "origin", "k9"));
        assertTrue(String.valueOf(unknownActive.getMessage()).contains("the active key 'k9' is not in origin"));
    }

    @Test
    void keysFromAFileOrAnEnvironmentVariableNeverBoth() {
        Path file = TestKeys.write(dir.resolve("keys"), Map.of("k1", KEYS.get("k1")));
        CryptConfig fromFile = CryptConfig.from(Settings.builder()
                .flag("encrypted.key-file", file.toString())
                .flag("encrypted.threads", "3")
                .build());
        assertEquals("file", fromFile.innerStore(), "the file store by default");
        assertEquals("k1", fromFile.keys().activeKeyId());
        assertEquals(3, fromFile.cryptoThreads());
        assertEquals("key file " + file, fromFile.keySource());

        String env = "k1 " + KEYS.get("k1") + ";k2 " + KEYS.get("k2");
        CryptConfig fromEnv = CryptConfig.from(
                Settings.builder()
                        .flag("encrypted.key-env", "MY_KEYS")
                        .flag("encrypted.active-key", "k2")
                        .flag("encrypted.inner", "memory")
                        .build(),
                name -> name.equals("MY_KEYS") ? env : null);
        assertEquals("k2", fromEnv.keys().activeKeyId());
        assertEquals("memory", fromEnv.innerStore());
        assertTrue(fromEnv.cryptoThreads() >= 1 && fromEnv.cryptoThreads() <= 4, "0 means min(4, cores)");

        assertInvalid(Settings.empty(), "needs keys: set encrypted.key-file");
        assertInvalid(
                Settings.builder()
                        .flag("encrypted.key-file", file.toString())
                        .flag("encrypted.key-env", "MY_KEYS")
                        .build(),
                "not both");
        assertInvalid(
                Settings.builder().flag("encrypted.key-env", "UNSET_HERE").build(), "UNSET_HERE, which is not set");
        assertInvalid(
                Settings.builder()
                        .flag("encrypted.key-file", dir.resolve("missing").toString())
                        .build(),
                "cannot be read");
        assertInvalid(
                Settings.builder()
                        .flag("encrypted.key-file", file.toString())
                        .flag("encrypted.inner", "encrypted")
                        .build(),
                "another store than 'encrypted'");
    }

    private static void assertInvalid(Settings settings, String message) {
        HiCacheException e = assertThrows(HiCacheException.class, () -> CryptConfig.from(settings, name -> null));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(String.valueOf(e.getMessage()).contains(message), e.getMessage());
    }

    @Test
    void theProviderIsFoundByNameAndTakesTheInnerStoresSettings() {
        PageStoreProvider provider = PageStores.provider("encrypted");
        Path keyFile = TestKeys.write(dir.resolve("keys"), Map.of("k1", KEYS.get("k1")));
        List<String> keys = provider.settings().stream().map(Setting::key).toList();
        for (String key : List.of(
                "encrypted.inner",
                "encrypted.key-file",
                "encrypted.key-env",
                "encrypted.active-key",
                "encrypted.threads",
                "file.root",
                "rocksdb.root",
                "s3.bucket",
                "memory.capacity")) {
            assertTrue(keys.contains(key), key + " missing from " + keys);
        }
        assertEquals(keys.size(), keys.stream().distinct().count(), "each setting once");
        // So that a command line that checks flags against the store's settings accepts the inner store's.
        Settings.builder()
                .flag("encrypted.inner", "file")
                .flag("file.root", "/x")
                .build()
                .requireKnown(provider.settings());
        HiCacheException unknownInner = assertThrows(
                HiCacheException.class,
                () -> PageStores.open(new StoreConfig(
                        "encrypted",
                        Settings.builder()
                                .flag("encrypted.key-file", keyFile.toString())
                                .flag("encrypted.inner", "tape")
                                .build())));
        assertEquals(ErrorCode.STORE_UNKNOWN, unknownInner.code(), unknownInner::toString);
    }
}
