package io.hicache.storage.nixl.obj;

import io.hicache.core.HiCacheException;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.s3.client.S3Clients;
import io.hicache.storage.s3.client.S3Config;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/**
 * The {@code OBJ} plugin: objects in one bucket of an S3-compatible service, through the S3 client of
 * {@code storage-s3}. Parameters are that module's settings ({@code s3.bucket}, {@code s3.endpoint}, {@code s3.region},
 * {@code s3.path-style}, credentials, {@code s3.concurrency}, timeouts); the bucket may also come from
 * {@code AWS_DEFAULT_BUCKET} ({@link S3Config#BUCKET_ENV}), as in NIXL and SGLang. Object keys are given whole at
 * registration ({@code s3.prefix} is not applied). Found with {@link java.util.ServiceLoader}; stateless.
 */
public final class ObjPlugin implements NixlPlugin {
    public static final String NAME = "OBJ";

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
        for (var s : S3Config.SETTINGS) {
            params.put(s.key(), s.defaultText().orElse(""));
        }
        return params;
    }

    @Override
    public Optional<String> unavailableReason(Map<String, String> params) {
        return S3Config.bucketOf(params).isPresent()
                ? Optional.empty()
                : Optional.of("no bucket: set " + S3Config.BUCKET.key() + " or " + S3Config.BUCKET_ENV);
    }

    @Override
    public NixlBackend create(String agentName, Map<String, String> params) {
        S3Config config;
        try {
            config = S3Config.fromParams(params);
        } catch (HiCacheException e) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, String.valueOf(e.getMessage()), e);
        }
        S3AsyncClient client = S3Clients.build(config);
        try {
            S3Clients.checkBucket(client, config);
        } catch (HiCacheException e) {
            client.close();
            throw new NixlException(NixlStatus.ERR_BACKEND, String.valueOf(e.getMessage()), e);
        }
        return new ObjBackend(client, config.bucket(), config.requestTimeout().multipliedBy(config.maxAttempts()));
    }
}
