package io.hicache.core.events;

/**
 * Opens KV event publishers of one kind. Found with {@link java.util.ServiceLoader} by {@link #name()} (see
 * {@link KvEventPublishers}), as SGLang's {@code EventPublisherFactory} finds {@code zmq}: a module registers its
 * provider in {@code META-INF/services/io.hicache.core.events.KvEventPublisherProvider}. The core never names one.
 *
 * <p>Implementations are stateless and thread-safe, with a public no-argument constructor.
 */
public interface KvEventPublisherProvider {
    /** The publisher's name in {@code kv-events-config}'s {@code publisher} field: lowercase, unique. */
    String name();

    /**
     * Opens a publisher: binds or connects what it needs now, so that a bad endpoint fails here. The caller owns it
     * and closes it.
     *
     * @throws io.hicache.core.HiCacheException {@link io.hicache.core.ErrorCode#CONFIG_INVALID} for a bad setting,
     *     {@link io.hicache.core.ErrorCode#TRANSFER_UNAVAILABLE} when an endpoint cannot be bound or connected
     */
    KvEventPublisher open(KvEventsConfig config);
}
