package io.hicache.storage.nixl.obj;

import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.storage.nixl.agent.MemoryType;
import io.hicache.storage.nixl.agent.NixlBackend;
import io.hicache.storage.nixl.agent.NixlException;
import io.hicache.storage.nixl.agent.NixlPlugin;
import io.hicache.storage.nixl.agent.NixlStatus;
import io.hicache.storage.s3.S3Clients;
import io.hicache.storage.s3.S3StoreConfig;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/**
 * The {@code OBJ} plugin: objects in one bucket of an S3-compatible service, through the S3 client of
 * {@code storage-s3}. Parameters are that module's settings ({@code s3.bucket}, {@code s3.endpoint}, {@code s3.region},
 * {@code s3.path-style}, credentials, {@code s3.concurrency}, timeouts); the bucket may also come from
 * {@code AWS_DEFAULT_BUCKET}, as in SGLang. Object keys are given whole at registration ({@code s3.prefix} is not
 * applied). Stateless.
 */
public final class ObjPlugin implements NixlPlugin {
    public static final String NAME = "OBJ";
    /** The environment variable SGLang's HiCacheNixl reads the bucket from when none is configured. */
    public static final String BUCKET_ENV = "AWS_DEFAULT_BUCKET";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 50;
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return Set.of(MemoryType.DRAM, MemoryType.OBJ);
    }

    @Override
    public Map<String, String> defaultParams() {
        Map<String, String> params = new LinkedHashMap<>();
        for (var s : S3StoreConfig.SETTINGS) {
            params.put(s.key(), s.defaultText().orElse(""));
        }
        return params;
    }

    @Override
    public Optional<String> unavailableReason(Map<String, String> params) {
        String bucket = bucket(params);
        return bucket == null || bucket.isBlank()
                ? Optional.of("no bucket: set " + S3StoreConfig.BUCKET.key() + " or " + BUCKET_ENV)
                : Optional.empty();
    }

    @Override
    public NixlBackend create(String agentName, Map<String, String> params) {
        S3StoreConfig config = s3Config(params);
        S3AsyncClient client = S3Clients.build(config);
        try {
            S3Clients.checkBucket(client, config);
        } catch (HiCacheException e) {
            client.close();
            throw new NixlException(NixlStatus.ERR_BACKEND, e.getMessage(), e);
        }
        return new ObjBackend(client, config.bucket(), config.requestTimeout().multipliedBy(config.maxAttempts()));
    }

    /**
     * The S3 configuration the parameters describe, the bucket from {@link #BUCKET_ENV} when none is given: what the
     * plugin's backends use, and what a user of the same bucket (the store's deletes and listings) should use too.
     *
     * @throws NixlException {@link NixlStatus#ERR_INVALID_PARAM} naming the bad or missing parameter
     */
    public static S3StoreConfig s3Config(Map<String, String> params) {
        Settings.Builder b = Settings.builder();
        params.forEach(b::flag);
        String bucket = bucket(params);
        if (bucket != null) {
            b.flag(S3StoreConfig.BUCKET.key(), bucket);
        }
        try {
            Settings settings = b.build();
            settings.requireKnown(S3StoreConfig.SETTINGS);
            return S3StoreConfig.from(settings);
        } catch (HiCacheException | IllegalArgumentException e) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, e.getMessage(), e);
        }
    }

    private static String bucket(Map<String, String> params) {
        String configured = params.get(S3StoreConfig.BUCKET.key());
        return configured != null && !configured.isBlank() ? configured : System.getenv(BUCKET_ENV);
    }
}
