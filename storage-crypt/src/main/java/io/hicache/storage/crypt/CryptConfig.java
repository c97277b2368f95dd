package io.hicache.storage.crypt;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.UnaryOperator;

/**
 * The encrypted store's configuration, read and checked once: which store holds the sealed pages, the keys, and the
 * threads that encrypt and decrypt.
 *
 * @param innerStore    the name of the store that holds the sealed pages ({@code encrypted.inner})
 * @param keys          the keys, read from the key file or the environment variable
 * @param keySource     where the keys came from, for logs ({@code key file /etc/hicache/keys}); never the keys
 * @param cryptoThreads threads that encrypt and decrypt pages
 * @param stagingPoolBytes the most bytes of staging memory kept between calls for the next ones
 */
public record CryptConfig(String innerStore, KeyRing keys, String keySource, int cryptoThreads, long stagingPoolBytes) {
    public static final Setting<String> INNER = Setting.string(
            "encrypted.inner",
            "file",
            "the store that holds the encrypted pages (file, rocksdb, s3, nixl, remote, memory, cluster); its own "
                    + "settings (file.root, ...) configure it");
    public static final Setting<Path> KEY_FILE = Setting.parsed(
            "encrypted.key-file",
            "file",
            null,
            "a file of keys, one 'KEY_ID BASE64_KEY' per line (AES-256: base64 of 32 bytes), and optionally "
                    + "'tenant:NAME KEY_ID' lines; docs/security.md. Set this or encrypted.key-env",
            text -> {
                Checks.requireArgument(!text.isBlank(), "must not be empty");
                return Path.of(text.strip());
            },
            Path::toString);
    public static final Setting<String> KEY_ENV = Setting.string(
            "encrypted.key-env",
            null,
            "the name of an environment variable holding the keys, in the key file's syntax with entries separated "
                    + "by ';'. Set this or encrypted.key-file");
    public static final Setting<String> ACTIVE_KEY = Setting.string(
            "encrypted.active-key",
            null,
            "the id of the key new pages are encrypted with; the others only decrypt older pages (rotation). May be "
                    + "left unset when there is one key");
    public static final Setting<Integer> THREADS = Setting.integer(
            "encrypted.threads",
            0,
            0,
            256,
            "threads that encrypt and decrypt pages (a batch's pages are split among them); 0 means min(4, cores)");

    /**
     * 256 MiB: a call stages its whole batch, sealed, and memory kept from one call to the next saves the kernel
     * zeroing fresh pages (128 MiB took 67 ms to fill fresh against 21 ms reused, on the development machine); two
     * batches of 128 pages of 1 MiB fit.
     */
    public static final Setting<Long> STAGING_POOL_BYTES = Setting.bytes(
            "encrypted.staging-pool-bytes",
            "256MiB",
            "off-heap memory where calls stage their encrypted pages, kept between calls up to this many bytes "
                    + "(calls in flight may take more, freed as they finish)");

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS =
            List.of(INNER, KEY_FILE, KEY_ENV, ACTIVE_KEY, THREADS, STAGING_POOL_BYTES);

    /** The default of {@link #STAGING_POOL_BYTES}. */
    public static final long DEFAULT_STAGING_POOL_BYTES = 256L << 20;

    private static final System.Logger LOG = System.getLogger(CryptConfig.class.getName());

    public CryptConfig {
        Checks.checkNotNull(innerStore, "innerStore");
        Checks.requireArgument(!innerStore.isBlank(), "encrypted.inner must name a store");
        Checks.requireArgument(
                !innerStore.equals(EncryptedPageStoreProvider.NAME),
                "encrypted.inner must name another store than '%s' itself",
                EncryptedPageStoreProvider.NAME);
        Checks.checkNotNull(keys, "keys");
        Checks.checkNotNull(keySource, "keySource");
        Checks.checkPositive(cryptoThreads, "cryptoThreads");
        Checks.checkNotNegative(stagingPoolBytes, "stagingPoolBytes");
    }

    /**
     * Reads the configuration, the key file or environment variable included.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting, or the key file's line
     */
    public static CryptConfig from(Settings settings) {
        return from(settings, System::getenv);
    }

    /** As {@link #from(Settings)}, with {@code environment} standing for the process's environment (for tests). */
    static CryptConfig from(Settings settings, UnaryOperator<String> environment) {
        return settings.read(s -> {
            Optional<Path> file = KEY_FILE.find(s);
            Optional<String> variable = KEY_ENV.find(s).map(String::strip).filter(v -> !v.isEmpty());
            Checks.requireArgument(
                    file.isPresent() != variable.isPresent(),
                    file.isPresent()
                            ? "set encrypted.key-file or encrypted.key-env, not both"
                            : "the encrypted store needs keys: set encrypted.key-file (a file of keys) or "
                                    + "encrypted.key-env (an environment variable holding them); docs/security.md");
            String text;
            String source;
            if (file.isPresent()) {
                source = "key file " + file.get();
                text = readKeyFile(file.get());
            } else {
                source = "environment variable " + variable.get();
                String value = environment.apply(variable.get());
                Checks.requireArgument(
                        value != null && !value.isBlank(),
                        "encrypted.key-env names %s, which is not set or empty",
                        variable.get());
                text = value;
            }
            KeyRing keys = KeyRing.parse(text, source, ACTIVE_KEY.find(s).orElse(null));
            int threads = s.get(THREADS);
            return new CryptConfig(
                    s.get(INNER).strip(),
                    keys,
                    source,
                    threads > 0 ? threads : defaultThreads(),
                    s.get(STAGING_POOL_BYTES));
        });
    }

    /** {@code keys} over the store named {@code innerStore}, every other setting at its default: for tests and embedding. */
    public static CryptConfig of(String innerStore, KeyRing keys) {
        return new CryptConfig(innerStore, keys, "code", defaultThreads(), DEFAULT_STAGING_POOL_BYTES);
    }

    /** This configuration with {@code threads} crypto threads. */
    public CryptConfig withCryptoThreads(int threads) {
        return new CryptConfig(innerStore, keys, keySource, threads, stagingPoolBytes);
    }

    /** This configuration keeping at most {@code bytes} of staging memory between calls. */
    public CryptConfig withStagingPoolBytes(long bytes) {
        return new CryptConfig(innerStore, keys, keySource, cryptoThreads, bytes);
    }

    /** min(4, cores): what {@code encrypted.threads = 0} means. */
    private static int defaultThreads() {
        return Math.min(4, Runtime.getRuntime().availableProcessors());
    }

    private static String readKeyFile(Path file) {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException(
                    "encrypted.key-file " + file + " cannot be read: "
                            + e.getClass().getSimpleName() + " " + e.getMessage(),
                    e);
        }
        warnIfOthersCanRead(file);
        return text;
    }

    private static void warnIfOthersCanRead(Path file) {
        try {
            Set<PosixFilePermission> permissions = Files.getPosixFilePermissions(file);
            if (permissions.contains(PosixFilePermission.GROUP_READ)
                    || permissions.contains(PosixFilePermission.OTHERS_READ)) {
                LOG.log(
                        Level.WARNING,
                        "encrypted.key-file " + file + " can be read by its group or by others: " + "'chmod 600 " + file
                                + "' keeps its keys to its owner");
            }
        } catch (IOException | UnsupportedOperationException e) {
            // Not a POSIX file system: nothing to say about permissions.
        }
    }
}
