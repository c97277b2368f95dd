package io.hicache.events.zmq;

import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventPublisherProvider;
import io.hicache.core.events.KvEventsConfig;

/** Opens {@link ZmqPublisher}s: {@code "publisher": "zmq"}, as in SGLang. Stateless and thread-safe. */
public final class ZmqPublisherProvider implements KvEventPublisherProvider {
    /** The name in {@code kv-events-config}. */
    public static final String NAME = "zmq";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public KvEventPublisher open(KvEventsConfig config) {
        return ZmqPublisher.open(config);
    }
}
