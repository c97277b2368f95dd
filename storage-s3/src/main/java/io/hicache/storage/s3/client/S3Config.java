package io.hicache.storage.s3.client;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code s3.*} settings, read and checked once: which bucket and object-name prefix, where the service is and how
 * to sign for it, how many requests at once and how long each may take. The {@code s3} page store and the NIXL
 * {@code OBJ} plugin both read them. Immutable; {@link #toString()} never prints the secret.
 *
 * @param bucket          the bucket; it must exist (checked at open)
 * @param prefix          prepended to every object name; empty or ending in {@code /}
 * @param endpoint        the service's address, or empty for AWS's own for the region
 * @param region          the signing region
 * @param pathStyle       bucket in the path ({@code http://host/bucket/key}) rather than the host name; what MinIO,
 *                        Ceph and S3Proxy usually want
 * @param accessKey       explicit credentials, or empty for the SDK's default chain (environment, profile, instance
 *                        role)
 * @param secretKey       the secret of {@code accessKey}
 * @param concurrency     requests in flight at once, across all calls
 * @param requestTimeout  the most one attempt of one request may take
 * @param maxAttempts     attempts per request (first try plus retries on throttling, server errors, timeouts)
 * @param connectTimeout  the most opening a connection may take
 */
public record S3Config(
        String bucket,
        String prefix,
        Optional<URI> endpoint,
        String region,
        boolean pathStyle,
        Optional<String> accessKey,
        Optional<String> secretKey,
        int concurrency,
        Duration requestTimeout,
        int maxAttempts,
        Duration connectTimeout) {
    public static final Setting<String> BUCKET = Setting.string("s3.bucket", null, "the bucket (must exist)");
    public static final Setting<String> PREFIX =
            Setting.string("s3.prefix", "hicache/", "prefix of every object name; empty or ending in /");
    public static final Setting<String> ENDPOINT =
            Setting.string("s3.endpoint", "", "the service's URL (MinIO, Ceph, S3Proxy); empty for AWS");
    public static final Setting<String> REGION = Setting.string("s3.region", "us-east-1", "the signing region");
    public static final Setting<Boolean> PATH_STYLE = Setting.bool(
            "s3.path-style",
            false,
            "put the bucket in the path rather than the host name (MinIO, Ceph and S3Proxy usually want this)");
    public static final Setting<String> ACCESS_KEY = Setting.string(
            "s3.access-key",
            "",
            "access key; empty uses the SDK's default credentials chain (environment, profile, instance role)");
    public static final Setting<String> SECRET_KEY = Setting.string("s3.secret-key", "", "secret of s3.access-key");
    /**
     * Requests (and connections) in flight by default: the store's preferred batch, so that a whole batch goes out in
     * one round trip. Against a server 200 ms from the first byte (the bench's latency proxy), 128 gets of 256 KiB
     * took 319 ms with 128 in flight against 507 ms with 64; with S3's usual 20 ms, 64 were already enough on a 2-core
     * machine, where the CPU shared by client and server bounds a batch first.
     */
    public static final int CONCURRENCY_DEFAULT = 128;

    public static final Setting<Integer> CONCURRENCY = Setting.integer(
            "s3.concurrency", CONCURRENCY_DEFAULT, 1, 4096, "requests in flight at once, across all calls");
    public static final Setting<Duration> REQUEST_TIMEOUT =
            Setting.duration("s3.request-timeout", "10s", "the most one attempt of one request may take");
    public static final Setting<Integer> MAX_ATTEMPTS = Setting.integer(
            "s3.max-attempts",
            3,
            1,
            20,
            "attempts per request: the first try plus retries on throttling, server errors and timeouts");
    public static final Setting<Duration> CONNECT_TIMEOUT =
            Setting.duration("s3.connect-timeout", "2s", "the most opening a connection may take");

    /** The environment variable NIXL's OBJ plugin and SGLang's HiCacheNixl read the bucket from when none is given. */
    public static final String BUCKET_ENV = "AWS_DEFAULT_BUCKET";

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS = List.of(
            BUCKET,
            PREFIX,
            ENDPOINT,
            REGION,
            PATH_STYLE,
            ACCESS_KEY,
            SECRET_KEY,
            CONCURRENCY,
            REQUEST_TIMEOUT,
            MAX_ATTEMPTS,
            CONNECT_TIMEOUT);

    public S3Config {
        Checks.checkNotNull(bucket, "bucket");
        Checks.requireArgument(
                bucket.matches("[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"),
                "s3.bucket '%s' is not a valid bucket name (3 to 63 lowercase letters, digits, '.' and '-')",
                bucket);
        Checks.checkNotNull(prefix, "prefix");
        Checks.requireArgument(
                prefix.isEmpty() || (prefix.endsWith("/") && !prefix.startsWith("/")),
                "s3.prefix '%s' must be empty or end in '/' (and not start with one)",
                prefix);
        Checks.requireArgument(prefix.length() <= 512, "s3.prefix is %d characters, over 512", prefix.length());
        Checks.checkNotNull(endpoint, "endpoint");
        endpoint.ifPresent(uri -> Checks.requireArgument(
                uri.getScheme() != null
                        && uri.getHost() != null
                        && (uri.getScheme().equals("http") || uri.getScheme().equals("https")),
                "s3.endpoint '%s' must be an http or https URL",
                uri));
        Checks.requireArgument(region != null && !region.isBlank(), "s3.region must be set");
        Checks.requireArgument(
                accessKey.isPresent() == secretKey.isPresent(),
                "s3.access-key and s3.secret-key go together: give both or neither");
        Checks.checkPositive(concurrency, "concurrency");
        Checks.requireArgument(
                !requestTimeout.isNegative() && !requestTimeout.isZero(), "s3.request-timeout must be positive");
        Checks.checkPositive(maxAttempts, "maxAttempts");
        Checks.requireArgument(
                !connectTimeout.isNegative() && !connectTimeout.isZero(), "s3.connect-timeout must be positive");
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad or missing setting
     */
    public static S3Config from(Settings settings) {
        String bucket = settings.get(BUCKET);
        return settings.read(s -> {
            String endpoint = s.get(ENDPOINT).trim();
            return new S3Config(
                    bucket.trim(),
                    s.get(PREFIX),
                    endpoint.isEmpty() ? Optional.empty() : Optional.of(URI.create(endpoint)),
                    s.get(REGION),
                    s.get(PATH_STYLE),
                    nonEmpty(s.get(ACCESS_KEY)),
                    nonEmpty(s.get(SECRET_KEY)),
                    s.get(CONCURRENCY),
                    s.get(REQUEST_TIMEOUT),
                    s.get(MAX_ATTEMPTS),
                    s.get(CONNECT_TIMEOUT));
        });
    }

    /**
     * Reads the configuration from string parameters keyed by the settings' names, as NIXL plugins take them; the
     * bucket comes from {@link #BUCKET_ENV} when the parameters name none.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad or missing parameter, or one that is
     *     not an {@code s3.*} setting
     */
    public static S3Config fromParams(Map<String, String> params) {
        Settings.Builder b = Settings.builder();
        params.forEach(b::flag);
        bucketOf(params).ifPresent(bucket -> b.flag(BUCKET.key(), bucket));
        try {
            Settings settings = b.build();
            settings.requireKnown(SETTINGS);
            return from(settings);
        } catch (IllegalArgumentException e) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, String.valueOf(e.getMessage()), e);
        }
    }

    /** The bucket string parameters name, else the one in {@link #BUCKET_ENV}, else empty. */
    public static Optional<String> bucketOf(Map<String, String> params) {
        String configured = params.get(BUCKET.key());
        String bucket = configured != null && !configured.isBlank() ? configured : System.getenv(BUCKET_ENV);
        return bucket == null || bucket.isBlank() ? Optional.empty() : Optional.of(bucket.trim());
    }

    /** A store on {@code endpoint} (path style) with explicit keys and the defaults otherwise: for tests. */
    public static S3Config local(URI endpoint, String bucket, String accessKey, String secretKey) {
        return new S3Config(
                bucket,
                "hicache/",
                Optional.of(endpoint),
                "us-east-1",
                true,
                Optional.of(accessKey),
                Optional.of(secretKey),
                CONCURRENCY_DEFAULT,
                Duration.ofSeconds(10),
                3,
                Duration.ofSeconds(2));
    }

    public S3Config withTimeouts(Duration request, int attempts) {
        return new S3Config(
                bucket,
                prefix,
                endpoint,
                region,
                pathStyle,
                accessKey,
                secretKey,
                concurrency,
                request,
                attempts,
                connectTimeout);
    }

    public S3Config withConcurrency(int requests) {
        return new S3Config(
                bucket,
                prefix,
                endpoint,
                region,
                pathStyle,
                accessKey,
                secretKey,
                requests,
                requestTimeout,
                maxAttempts,
                connectTimeout);
    }

    private static Optional<String> nonEmpty(String s) {
        return s == null || s.isBlank() ? Optional.empty() : Optional.of(s.trim());
    }

    /** The secret is never printed. */
    @Override
    public String toString() {
        return "S3Config[bucket=" + bucket + ", prefix=" + prefix + ", endpoint="
                + endpoint.map(URI::toString).orElse("AWS") + ", region=" + region + ", pathStyle=" + pathStyle
                + ", credentials="
                + (accessKey.isPresent() ? "explicit" : "default chain") + ", concurrency=" + concurrency
                + ", requestTimeout=" + requestTimeout + ", maxAttempts=" + maxAttempts + "]";
    }
}
