package io.hicache.core.events;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.stream.Collectors;

/** Finds KV event publisher providers on the class path, by name. Thread-safe; the providers are loaded once. */
public final class KvEventPublishers {
    private KvEventPublishers() {}

    private static final class Loaded {
        static final Map<String, KvEventPublisherProvider> BY_NAME = load();

        private static Map<String, KvEventPublisherProvider> load() {
            Map<String, KvEventPublisherProvider> byName = new TreeMap<>();
            for (KvEventPublisherProvider p :
                    ServiceLoader.load(KvEventPublisherProvider.class, KvEventPublishers.class.getClassLoader())) {
                KvEventPublisherProvider other = byName.putIfAbsent(p.name(), p);
                if (other != null) {
                    throw new HiCacheException(
                            ErrorCode.CONFIG_INVALID,
                            "two KV event publishers are named '" + p.name() + "': "
                                    + other.getClass().getName() + " and "
                                    + p.getClass().getName());
                }
            }
            return Map.copyOf(byName);
        }
    }

    /** Every provider on the class path, sorted by name. */
    public static List<KvEventPublisherProvider> providers() {
        return Loaded.BY_NAME.values().stream()
                .sorted((a, b) -> a.name().compareTo(b.name()))
                .toList();
    }

    /** The provider named {@code name}, if its module is on the class path. */
    public static Optional<KvEventPublisherProvider> find(String name) {
        return Optional.ofNullable(Loaded.BY_NAME.get(name));
    }

    /**
     * Opens the publisher {@code config} names; the caller closes it.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} when the config turns events off ({@code "null"}) or
     *     no module on the class path provides the publisher (the message lists those that do)
     */
    public static KvEventPublisher open(KvEventsConfig config) {
        if (!config.enabled()) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, "KV events are off (publisher \"null\")");
        }
        return find(config.publisher())
                .orElseThrow(() -> new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "no KV event publisher is named '" + config.publisher()
                                + "' (is its module, e.g. hicache-events-zmq, on "
                                + "the class path?); available: "
                                + providers().stream()
                                        .map(KvEventPublisherProvider::name)
                                        .collect(Collectors.joining(", "))))
                .open(config);
    }
}
