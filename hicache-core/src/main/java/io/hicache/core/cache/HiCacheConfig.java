package io.hicache.core.cache;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.memory.host.HostPoolConfig;
import io.hicache.core.tree.EvictionPolicy;
import io.hicache.core.util.Checks;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The cache's configuration, with SGLang's option names and defaults where SGLang has the option, read and checked
 * once: from {@link Settings} ({@link #from}), or set one by one ({@link #builder()}). The page store named by
 * {@code hicache-storage-backend} reads its own settings ({@code file.root}, ...) from the same {@link #settings()}.
 * Each setting is a constant here ({@link #PAGE_SIZE}, ...); {@link #SETTINGS} lists them, the host pool's included.
 *
 * <p>Immutable and thread-safe.
 */
public final class HiCacheConfig {
    public static final Setting<Integer> PAGE_SIZE = Setting.integer(
            "page-size",
            1,
            1,
            1 << 16,
            "tokens per page; SGLang's default is 1, and 64 is what it recommends with a page store");
    public static final Setting<WritePolicy> WRITE_POLICY = Setting.choice(
            "hicache-write-policy",
            WritePolicy.class,
            WritePolicy::configName,
            WritePolicy.WRITE_THROUGH,
            "write_through (back up on the first hit), write_through_selective (on the second) or write_back (on eviction)");
    public static final Setting<PrefetchPolicy> PREFETCH_POLICY = Setting.choice(
            "hicache-storage-prefetch-policy",
            PrefetchPolicy.class,
            PrefetchPolicy::configName,
            PrefetchPolicy.BEST_EFFORT,
            "when a prefetch stops: best_effort, wait_complete or timeout");
    public static final Setting<String> EVICTION = Setting.string("radix-eviction-policy", "lru", "lru or lfu");
    public static final Setting<Integer> PREFETCH_THRESHOLD = Setting.integer(
            "prefetch-threshold", 256, 1, Integer.MAX_VALUE, "the fewest tokens worth prefetching from the page store");
    public static final Setting<Duration> PREFETCH_TIMEOUT_BASE =
            Setting.duration("prefetch-timeout-base", "1s", "the timeout policy's fixed part");
    public static final Setting<Duration> PREFETCH_TIMEOUT_PER_KI_TOKEN =
            Setting.duration("prefetch-timeout-per-ki-token", "250ms", "the timeout policy's part per 1024 tokens");
    public static final Setting<Integer> LOAD_BACK_THRESHOLD = Setting.integer(
            "load-back-threshold", 10, 0, Integer.MAX_VALUE, "the fewest host tokens worth loading back to the device");
    public static final Setting<Boolean> VERIFY_HOST_CHECKSUMS = Setting.bool(
            "hicache-verify-host-checksums",
            false,
            "check each host page's CRC-32C before loading it back to the device (its identity is always checked; "
                    + "uploads to the page store always check both): one CPU pass per page, which a GPU's link outruns"
                    + " several times (docs/keys.md)");
    public static final Setting<String> STORAGE_BACKEND = Setting.string(
            "hicache-storage-backend", "", "the page store (L3) by name: file, rocksdb, s3, ...; empty for none");
    public static final Setting<Integer> STORAGE_BATCH =
            Setting.integer("hicache-storage-batch-pages", 128, 1, 65536, "pages per page store call");
    public static final Setting<Duration> STORAGE_TIMEOUT =
            Setting.duration("hicache-storage-timeout", "10s", "the deadline of one page store call");
    public static final Setting<Double> RECOMPUTE_SPEED = Setting.decimal(
            "hicache-recompute-tokens-per-second",
            0,
            0,
            1e12,
            "the engine's prefill speed; a prefetch expected to take longer than recomputing is skipped (0: off)");
    public static final Setting<Double> HOST_HIGH_WATER = Setting.decimal(
            "hicache-host-high-water", 0.95, 0.1, 1.0, "host pool occupancy at which background host eviction starts");
    public static final Setting<Double> HOST_LOW_WATER = Setting.decimal(
            "hicache-host-low-water", 0.85, 0.05, 1.0, "host pool occupancy where background host eviction stops");
    public static final Setting<Integer> QUEUE_CAPACITY = Setting.integer(
            "hicache-queue-capacity",
            4096,
            16,
            1 << 20,
            "entries each background loop's queue holds before new work is skipped (and counted)");
    public static final Setting<Long> UPLOAD_QUEUE_BYTES = Setting.bytes(
            "hicache-upload-queue-bytes",
            "1GiB",
            "page bytes waiting for upload to the page store at most; uploads beyond it are skipped and counted");
    public static final Setting<Integer> UPLOAD_THREADS = Setting.integer(
            "hicache-upload-threads",
            4,
            1,
            64,
            "upload batches written to the page store at once (threads of the loop hicache-upload); a store whose "
                    + "calls wait on latency rather than CPU keeps up better with more");
    public static final Setting<Integer> MLA_UPLOAD_RANK = Setting.integer(
            "hicache-mla-upload-rank",
            0,
            0,
            1 << 16,
            "for MLA models, whose KV pages are the same on every tensor-parallel rank: the rank that uploads them to "
                    + "the page store (the others only read); their keys carry no rank");
    public static final Setting<Tiers> TIERS = Setting.choice(
            "hicache-tiers",
            Tiers.class,
            Tiers::configName,
            Tiers.ALL,
            "all (device, host and the page store if one is set) or device-only (the radix tree on the device pool "
                    + "alone: no host pool, no page store)");
    public static final Setting<Duration> CLOSE_TIMEOUT = Setting.duration(
            "hicache-close-timeout",
            "10s",
            "how long closing the cache lets queued background work (uploads, prefetches, copies) run, in all");
    public static final Setting<Duration> RANK_TIMEOUT = Setting.duration(
            "hicache-rank-timeout",
            "60s",
            "with a rank group (tensor-parallel ranks): how long a rank waits for the others at one of the collectives "
                    + "that keep their caches the same before the call fails with RANK_GROUP_FAILED");
    public static final Setting<Duration> ALLOCATE_WAIT = Setting.duration(
            "hicache-allocate-wait",
            "500ms",
            "how long an allocation short of device pages waits for copies in flight before PAGES_EXHAUSTED");
    public static final Setting<Double> DEVICE_FREE_TARGET = Setting.decimal(
            "hicache-device-free-target",
            0,
            0,
            0.5,
            "share of the device pool kept free ahead of need by demoting device pages the host also holds (in the "
                    + "loop hicache-device-evictor; for ranks that agree, at each settle), so that a load-back or an "
                    + "allocation takes free pages without evicting or waiting for backups; 0: off");

    public static final Setting<Long> HYBRID_HOST_BYTES = Setting.bytes(
            "hicache-hybrid-host-bytes",
            "256MiB",
            "for a hybrid model (HiCacheBuilder.hybrid): host memory for the ends of cached prefixes, their window "
                    + "pages and recurrent states (half each when the model has both); ends past it are evicted "
                    + "least recently used first");

    public static final Setting<KvEventsConfig> KV_EVENTS = KvEventsConfig.setting(
            "kv-events-config",
            "SGLang's --kv-events-config JSON, e.g. {\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\"}: where the cache "
                    + "publishes what it stores and evicts, for cache-aware routers (docs/kv-events.md); empty: off");

    /** Every setting read here, the host pool's included. */
    public static final List<Setting<?>> SETTINGS;

    static {
        List<Setting<?>> all = new ArrayList<>(List.of(
                PAGE_SIZE,
                WRITE_POLICY,
                PREFETCH_POLICY,
                EVICTION,
                PREFETCH_THRESHOLD,
                PREFETCH_TIMEOUT_BASE,
                PREFETCH_TIMEOUT_PER_KI_TOKEN,
                LOAD_BACK_THRESHOLD,
                VERIFY_HOST_CHECKSUMS,
                STORAGE_BACKEND,
                STORAGE_BATCH,
                STORAGE_TIMEOUT,
                RECOMPUTE_SPEED,
                HOST_HIGH_WATER,
                HOST_LOW_WATER,
                QUEUE_CAPACITY,
                ALLOCATE_WAIT,
                DEVICE_FREE_TARGET,
                UPLOAD_QUEUE_BYTES,
                UPLOAD_THREADS,
                MLA_UPLOAD_RANK,
                CLOSE_TIMEOUT,
                RANK_TIMEOUT,
                TIERS,
                HYBRID_HOST_BYTES,
                KV_EVENTS));
        all.addAll(HostPoolConfig.SETTINGS);
        SETTINGS = List.copyOf(all);
    }

    private final int pageSizeTokens;
    private final WritePolicy writePolicy;
    private final PrefetchPolicy prefetchPolicy;
    private final EvictionPolicy eviction;
    private final int prefetchThresholdTokens;
    private final Duration prefetchTimeoutBase;
    private final Duration prefetchTimeoutPerKiToken;
    private final int loadBackThresholdTokens;
    private final Optional<String> storageBackend;
    private final int storageBatchPages;
    private final Duration storageTimeout;
    private final double recomputeTokensPerSecond;
    private final double hostHighWater;
    private final double hostLowWater;
    private final int queueCapacity;
    private final Duration allocateWait;
    private final double deviceFreeTarget;
    private final long uploadQueueBytes;
    private final int uploadThreads;
    private final int mlaUploadRank;
    private final Duration closeTimeout;
    private final Duration rankTimeout;
    private final Tiers tiers;
    private final long hybridHostBytes;
    private final HostPoolConfig host;
    private final KvEventsConfig kvEvents;
    private final Settings settings;
    private final boolean verifyHostChecksums;

    private HiCacheConfig(
            int pageSizeTokens,
            WritePolicy writePolicy,
            PrefetchPolicy prefetchPolicy,
            EvictionPolicy eviction,
            int prefetchThresholdTokens,
            Duration prefetchTimeoutBase,
            Duration prefetchTimeoutPerKiToken,
            int loadBackThresholdTokens,
            Optional<String> storageBackend,
            int storageBatchPages,
            Duration storageTimeout,
            double recomputeTokensPerSecond,
            double hostHighWater,
            double hostLowWater,
            int queueCapacity,
            Duration allocateWait,
            double deviceFreeTarget,
            long uploadQueueBytes,
            int uploadThreads,
            int mlaUploadRank,
            Duration closeTimeout,
            Duration rankTimeout,
            Tiers tiers,
            long hybridHostBytes,
            HostPoolConfig host,
            KvEventsConfig kvEvents,
            Settings settings) {
        Checks.checkPositive(pageSizeTokens, "pageSizeTokens");
        Checks.checkNotNull(writePolicy, "writePolicy");
        Checks.checkNotNull(prefetchPolicy, "prefetchPolicy");
        Checks.checkNotNull(eviction, "eviction");
        Checks.requireArgument(
                hostLowWater < hostHighWater,
                "hicache-host-low-water (%s) must be below the high water (%s)",
                hostLowWater,
                hostHighWater);
        Checks.checkNotNull(storageBackend, "storageBackend");
        Checks.checkNotNull(tiers, "tiers");
        Checks.requireArgument(rankTimeout.isPositive(), "hicache-rank-timeout must be positive, was %s", rankTimeout);
        Checks.checkPositive(uploadThreads, "uploadThreads");
        Checks.requireArgument(
                tiers == Tiers.ALL || storageBackend.isEmpty(),
                "hicache-tiers device-only runs no page store, yet hicache-storage-backend is %s",
                storageBackend);
        Checks.checkNotNull(host, "host");
        Checks.checkNotNull(kvEvents, "kvEvents");
        Checks.checkNotNull(settings, "settings");
        this.pageSizeTokens = pageSizeTokens;
        this.writePolicy = writePolicy;
        this.prefetchPolicy = prefetchPolicy;
        this.eviction = eviction;
        this.prefetchThresholdTokens = prefetchThresholdTokens;
        this.prefetchTimeoutBase = prefetchTimeoutBase;
        this.prefetchTimeoutPerKiToken = prefetchTimeoutPerKiToken;
        this.loadBackThresholdTokens = loadBackThresholdTokens;
        this.storageBackend = storageBackend;
        this.storageBatchPages = storageBatchPages;
        this.storageTimeout = storageTimeout;
        this.recomputeTokensPerSecond = recomputeTokensPerSecond;
        this.hostHighWater = hostHighWater;
        this.hostLowWater = hostLowWater;
        this.queueCapacity = queueCapacity;
        this.allocateWait = allocateWait;
        this.deviceFreeTarget = deviceFreeTarget;
        this.uploadQueueBytes = uploadQueueBytes;
        this.uploadThreads = uploadThreads;
        this.mlaUploadRank = mlaUploadRank;
        this.closeTimeout = closeTimeout;
        this.rankTimeout = rankTimeout;
        this.tiers = tiers;
        this.hybridHostBytes = hybridHostBytes;
        this.host = host;
        this.kvEvents = kvEvents;
        this.settings = settings;
        // read once: a load-back asks for it every time, and a lookup by name costs more than the question
        this.verifyHostChecksums = settings.read(s -> s.get(VERIFY_HOST_CHECKSUMS));
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static HiCacheConfig from(Settings settings) {
        return settings.read(s -> {
            String backend = s.get(STORAGE_BACKEND).trim();
            return new HiCacheConfig(
                    s.get(PAGE_SIZE),
                    s.get(WRITE_POLICY),
                    s.get(PREFETCH_POLICY),
                    EvictionPolicy.named(s.get(EVICTION)),
                    s.get(PREFETCH_THRESHOLD),
                    s.get(PREFETCH_TIMEOUT_BASE),
                    s.get(PREFETCH_TIMEOUT_PER_KI_TOKEN),
                    s.get(LOAD_BACK_THRESHOLD),
                    backend.isEmpty() ? Optional.empty() : Optional.of(backend),
                    s.get(STORAGE_BATCH),
                    s.get(STORAGE_TIMEOUT),
                    s.get(RECOMPUTE_SPEED),
                    s.get(HOST_HIGH_WATER),
                    s.get(HOST_LOW_WATER),
                    s.get(QUEUE_CAPACITY),
                    s.get(ALLOCATE_WAIT),
                    s.get(DEVICE_FREE_TARGET),
                    s.get(UPLOAD_QUEUE_BYTES),
                    s.get(UPLOAD_THREADS),
                    s.get(MLA_UPLOAD_RANK),
                    s.get(CLOSE_TIMEOUT),
                    s.get(RANK_TIMEOUT),
                    s.get(TIERS),
                    s.get(HYBRID_HOST_BYTES),
                    HostPoolConfig.from(s),
                    s.get(KV_EVENTS),
                    s);
        });
    }

    /** A builder starting from no settings: each setting at its default until set. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Sets settings one by one, typed ({@code set(PAGE_SIZE, 64)}) or by key (a page store's own, such as
     * {@code file.root}), over a base read elsewhere ({@link #settings}); {@link #build()} reads and checks them once,
     * as {@link HiCacheConfig#from} does. Not thread-safe.
     */
    public static final class Builder {
        private Settings settings = Settings.empty();

        private Builder() {}

        /** Starts over from {@code base} (a file, the environment and flags read into settings). */
        public Builder settings(Settings base) {
            settings = Checks.checkNotNull(base, "base");
            return this;
        }

        /** Sets {@code setting} to {@code value}. */
        public <T> Builder set(Setting<T> setting, T value) {
            Checks.checkNotNull(setting, "setting");
            settings = settings.with(setting.key(), setting.text(value));
            return this;
        }

        /** Sets {@code key} to {@code text}: for settings declared elsewhere, such as a page store's. */
        public Builder set(String key, String text) {
            settings = settings.with(Checks.checkNotNull(key, "key"), Checks.checkNotNull(text, "text"));
            return this;
        }

        /**
         * The configuration.
         *
         * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
         */
        public HiCacheConfig build() {
            return from(settings);
        }
    }

    /** The prefetch threshold in whole pages (at least one). */
    int prefetchThresholdPages() {
        return Math.max(1, (prefetchThresholdTokens + pageSizeTokens - 1) / pageSizeTokens);
    }

    /** Tokens per page ({@code page-size}). */
    public int pageSizeTokens() {
        return pageSizeTokens;
    }

    /** When device pages are backed up to the host. */
    public WritePolicy writePolicy() {
        return writePolicy;
    }

    /** When a prefetch from the page store stops. */
    public PrefetchPolicy prefetchPolicy() {
        return prefetchPolicy;
    }

    /** Eviction order ({@code radix-eviction-policy}). */
    EvictionPolicy eviction() {
        return eviction;
    }

    /** The fewest tokens worth a prefetch (SGLang's {@code prefetch_threshold}). */
    public int prefetchThresholdTokens() {
        return prefetchThresholdTokens;
    }

    /** The {@code timeout} policy's fixed part. */
    public Duration prefetchTimeoutBase() {
        return prefetchTimeoutBase;
    }

    /** The {@code timeout} policy's part per 1024 tokens. */
    public Duration prefetchTimeoutPerKiToken() {
        return prefetchTimeoutPerKiToken;
    }

    /** The fewest host tokens worth loading back to the device. */
    public int loadBackThresholdTokens() {
        return loadBackThresholdTokens;
    }

    /** Whether a load-back checks each host page's CRC-32C, not only its identity ({@link #VERIFY_HOST_CHECKSUMS}). */
    public boolean verifyHostChecksums() {
        return verifyHostChecksums;
    }

    /** The page store's name, or empty for none. */
    public Optional<String> storageBackend() {
        return storageBackend;
    }

    /** Pages per page store call. */
    public int storageBatchPages() {
        return storageBatchPages;
    }

    /** The deadline of one page store call. */
    public Duration storageTimeout() {
        return storageTimeout;
    }

    /** The engine's prefill speed, for skipping prefetches slower than recomputing; 0 turns the check off. */
    public double recomputeTokensPerSecond() {
        return recomputeTokensPerSecond;
    }

    /** Host pool occupancy at which background host eviction starts. */
    public double hostHighWater() {
        return hostHighWater;
    }

    /** Where it stops. */
    public double hostLowWater() {
        return hostLowWater;
    }

    /** Entries each background loop's queue holds before new work is skipped. */
    public int queueCapacity() {
        return queueCapacity;
    }

    /** How long an allocation short of device pages waits for copies in flight to finish (and free or unlock pages) before it fails with PAGES_EXHAUSTED. */
    public Duration allocateWait() {
        return allocateWait;
    }

    /** {@code hicache-device-free-target}: the share of the device pool kept free ahead of need (0: off). */
    public double deviceFreeTarget() {
        return deviceFreeTarget;
    }

    /** Page bytes waiting for upload to the page store at most; more is skipped (counted). */
    public long uploadQueueBytes() {
        return uploadQueueBytes;
    }

    /** Upload batches written to the page store at once. */
    public int uploadThreads() {
        return uploadThreads;
    }

    /** For MLA models (pages the same on every tensor-parallel rank): the one rank that uploads them; every rank reads. */
    public int mlaUploadRank() {
        return mlaUploadRank;
    }

    /** How long {@code close()} lets queued background work run, in all. */
    public Duration closeTimeout() {
        return closeTimeout;
    }

    /** How long a rank waits for the others in one of the collectives that keep tensor-parallel ranks' trees the same (with a rank group); past it the call fails. */
    public Duration rankTimeout() {
        return rankTimeout;
    }

    /** All tiers, or the device pool alone (no host pool, no page store). */
    public Tiers tiers() {
        return tiers;
    }

    /** Host memory for a hybrid model's parts ({@code hicache-hybrid-host-bytes}). */
    public long hybridHostBytes() {
        return hybridHostBytes;
    }

    /** The host pool's settings. */
    public HostPoolConfig host() {
        return host;
    }

    /** Where KV events go ({@code kv-events-config}, SGLang's JSON); off by default. */
    public KvEventsConfig kvEvents() {
        return kvEvents;
    }

    /** All the raw settings, for the page store. */
    public Settings settings() {
        return settings;
    }
}
