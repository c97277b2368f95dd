package io.hicache.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.page.HostLayout;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SettingsTest {
    static final Setting<Long> SIZE = Setting.bytes("file.max-size", "1GiB", "capacity");
    static final Setting<Double> RATIO = Setting.decimal("hicache-ratio", 2.0, 1.0, 100.0, "host/device ratio");
    static final Setting<Duration> TIMEOUT = Setting.duration("s3.request-timeout", "5s", "per request");
    static final Setting<HostLayout> LAYOUT = Setting.choice(
            "hicache-mem-layout", HostLayout.class, HostLayout::configName, HostLayout.LAYER_FIRST, "host layout");
    static final Setting<String> BUCKET = Setting.string("s3.bucket", null, "bucket name");

    @TempDir
    Path dir;

    @Test
    void flagsBeatEnvironmentBeatFileBeatDefaults() throws IOException {
        Path file = dir.resolve("hicache.properties");
        Files.writeString(file, "# comment\nfile.max-size = 8GiB\nhicache-ratio=3\ns3.bucket=from-file\n");
        Settings s = Settings.builder()
                .flag("hicache-ratio", "5")
                .environment(Map.of("HICACHE_RATIO", "4", "HICACHE_S3_BUCKET", "from-env", "PATH", "/bin"))
                .file(file)
                .build();
        assertEquals(5.0, s.get(RATIO));
        assertEquals("from-env", s.get(BUCKET));
        assertEquals(8L << 30, s.get(SIZE));
        assertEquals(Duration.ofSeconds(5), s.get(TIMEOUT));
        assertEquals(HostLayout.LAYER_FIRST, s.get(LAYOUT));
        assertEquals(
                Settings.Source.ENVIRONMENT, s.lookup("s3.bucket").orElseThrow().source());
    }

    @Test
    void environmentNamesDropTheRepeatedPrefix() {
        assertEquals("HICACHE_RATIO", Settings.environmentName("hicache-ratio"));
        assertEquals("HICACHE_FILE_MAX_SIZE", Settings.environmentName("file.max-size"));
        assertEquals("HICACHE_PAGE_SIZE", Settings.environmentName("page-size"));
    }

    @Test
    void badValuesNameKeyTextAndSource() {
        Settings s = Settings.builder()
                .environment(Map.of("HICACHE_FILE_MAX_SIZE", "lots"))
                .build();
        HiCacheException e = assertThrows(HiCacheException.class, () -> s.get(SIZE));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(
                e.getMessage().contains("'file.max-size' = 'lots' (from environment HICACHE_FILE_MAX_SIZE)"),
                e.getMessage());
        HiCacheException range = assertThrows(
                HiCacheException.class,
                () -> Settings.empty().with("hicache-ratio", "0.5").get(RATIO));
        assertTrue(range.getMessage().contains("must be in [1.0, 100.0]"), range.getMessage());
        HiCacheException choice = assertThrows(
                HiCacheException.class,
                () -> Settings.empty().with("hicache-mem-layout", "sideways").get(LAYOUT));
        assertTrue(choice.getMessage().contains("layer_first, page_first, page_first_direct"), choice.getMessage());
    }

    @Test
    void requiredSettingsSayHowToSetThem() {
        HiCacheException e =
                assertThrows(HiCacheException.class, () -> Settings.empty().get(BUCKET));
        assertTrue(
                e.getMessage().contains("--s3.bucket") && e.getMessage().contains("HICACHE_S3_BUCKET"), e.getMessage());
        assertEquals(Optional.empty(), BUCKET.find(Settings.empty()));
    }

    @Test
    void misspeltKeysAreRejectedWithASuggestion() throws IOException {
        Path file = dir.resolve("typo.properties");
        Files.writeString(file, "file.max-sise=1GiB\n");
        Settings s =
                Settings.builder().file(file).flag("totally-unrelated", "1").build();
        HiCacheException e = assertThrows(
                HiCacheException.class, () -> s.requireKnown(List.of(SIZE, RATIO, TIMEOUT, LAYOUT, BUCKET)));
        assertTrue(
                e.getMessage()
                        .contains("unknown setting 'file.max-sise' (from file " + file
                                + "), did you mean 'file.max-size'?"),
                e.getMessage());
        assertTrue(
                e.getMessage().contains("unknown setting 'totally-unrelated' (from flag --totally-unrelated)"),
                e.getMessage());
        Settings.empty().with("file.max-size", "1g").requireKnown(List.of(SIZE));
    }

    @Test
    void unreadableFileFailsClearly() {
        HiCacheException e =
                assertThrows(HiCacheException.class, () -> Settings.builder().file(dir.resolve("missing.properties")));
        assertTrue(e.getMessage().contains("missing.properties"), e.getMessage());
    }

    @Test
    void keysMustBeWellFormed() {
        assertThrows(IllegalArgumentException.class, () -> Setting.string("Bad_Key", "x", "d"));
        assertThrows(IllegalArgumentException.class, () -> Setting.string("trailing.", "x", "d"));
    }
}
