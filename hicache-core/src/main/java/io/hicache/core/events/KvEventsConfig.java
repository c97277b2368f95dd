package io.hicache.core.events;

import io.hicache.core.config.Setting;
import io.hicache.core.util.Checks;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Where and how KV events are published, with SGLang's names and defaults: the JSON of its
 * {@code --kv-events-config} ({@code KVEventsConfig}), which the cache reads from {@code kv-events-config} and the
 * daemon from {@code server.kv-events-config}. Publisher {@code "null"} (the default) turns events off, so that nobody
 * pays for them. Immutable.
 *
 * @param publisher                 the publisher's name ({@code publisher}): {@code null} for none, {@code zmq}
 * @param endpoint                  the PUB socket's address ({@code endpoint}); bound when it has {@code *},
 *                                  {@code ::}, or is {@code inproc://}, else connected ({@code ipc://} is refused by the zmq publisher)
 * @param replayEndpoint            the ROUTER socket's address for replay ({@code replay_endpoint}), if any
 * @param replayBufferBatches       batches kept for replay ({@code buffer_steps})
 * @param sendHighWaterMarkMessages ZeroMQ's send high-water mark of the PUB socket, in messages ({@code hwm}); 0 is
 *                                  no limit
 * @param maxQueueEvents            events waiting to be published at most ({@code max_queue_size}); past it the
 *                                  oldest are dropped and counted
 * @param topic                     the topic frame of every message ({@code topic})
 * @param attnDpRank                the attention data-parallel rank ({@code attn_dp_rank}, this project's addition:
 *                                  SGLang takes it from the server): stamped on each batch, and added to the
 *                                  endpoints' ports as SGLang does
 * @param bindHost                  the address bound in place of a wildcard host ({@code bind_host}, this project's
 *                                  addition): SGLang's {@code tcp://*:5557} binds every interface; with
 *                                  {@code 127.0.0.1} here it binds that address only. The daemon sets it to
 *                                  {@code 127.0.0.1} when it serves loopback only and the JSON does not say
 */
public record KvEventsConfig(
        String publisher,
        String endpoint,
        Optional<String> replayEndpoint,
        int replayBufferBatches,
        int sendHighWaterMarkMessages,
        int maxQueueEvents,
        String topic,
        int attnDpRank,
        Optional<String> bindHost) {
    /** The publisher name that turns events off. */
    public static final String NO_PUBLISHER = "null";
    /** SGLang's default PUB address. */
    public static final String DEFAULT_ENDPOINT = "tcp://*:5557";
    /** SGLang's default replay buffer, in batches. */
    public static final int DEFAULT_REPLAY_BUFFER_BATCHES = 10_000;
    /** SGLang's default high-water mark, in messages. */
    public static final int DEFAULT_SEND_HIGH_WATER_MARK_MESSAGES = 100_000;
    /** SGLang's default queue bound, in events. */
    public static final int DEFAULT_MAX_QUEUE_EVENTS = 100_000;
    /** Events off. */
    public static final KvEventsConfig OFF = defaults(NO_PUBLISHER);

    private static final Set<String> KEYS = Set.of(
            "publisher",
            "endpoint",
            "replay_endpoint",
            "buffer_steps",
            "hwm",
            "max_queue_size",
            "topic",
            "attn_dp_rank",
            "bind_host");

    public KvEventsConfig {
        Checks.checkNotNull(publisher, "publisher");
        Checks.requireArgument(!publisher.isBlank(), "publisher must not be empty (\"null\" turns events off)");
        Checks.checkNotNull(endpoint, "endpoint");
        Checks.requireArgument(!endpoint.isBlank(), "endpoint must not be empty");
        Checks.checkNotNull(replayEndpoint, "replayEndpoint");
        Checks.checkNotNegative(replayBufferBatches, "buffer_steps");
        Checks.checkNotNegative(sendHighWaterMarkMessages, "hwm");
        Checks.checkPositive(maxQueueEvents, "max_queue_size");
        Checks.checkNotNull(topic, "topic");
        Checks.checkNotNegative(attnDpRank, "attn_dp_rank");
        Checks.checkNotNull(bindHost, "bindHost");
        bindHost.ifPresent(h -> Checks.requireArgument(
                !h.isBlank() && !h.contains("/") && !h.contains("*"), "\"bind_host\" must be an address, was '%s'", h));
    }

    /** This configuration with {@code host} bound in place of a wildcard host. */
    public KvEventsConfig withBindHost(String host) {
        return new KvEventsConfig(
                publisher,
                endpoint,
                replayEndpoint,
                replayBufferBatches,
                sendHighWaterMarkMessages,
                maxQueueEvents,
                topic,
                attnDpRank,
                Optional.of(host));
    }

    /** This configuration with {@code topic} as the topic frame of every message. */
    public KvEventsConfig withTopic(String topic) {
        return new KvEventsConfig(
                publisher,
                endpoint,
                replayEndpoint,
                replayBufferBatches,
                sendHighWaterMarkMessages,
                maxQueueEvents,
                topic,
                attnDpRank,
                bindHost);
    }

    /** SGLang's defaults, with {@code publisher}. */
    public static KvEventsConfig defaults(String publisher) {
        return new KvEventsConfig(
                publisher,
                DEFAULT_ENDPOINT,
                Optional.empty(),
                DEFAULT_REPLAY_BUFFER_BATCHES,
                DEFAULT_SEND_HIGH_WATER_MARK_MESSAGES,
                DEFAULT_MAX_QUEUE_EVENTS,
                "",
                0,
                Optional.empty());
    }

    /** True unless the publisher is {@code "null"}. */
    public boolean enabled() {
        return !publisher.equals(NO_PUBLISHER);
    }

    /**
     * The setting {@code key} holding SGLang's JSON (see {@link #parse}); empty by default: events off. A bad value
     * fails reading the settings, naming the key.
     */
    public static Setting<KvEventsConfig> setting(String key, String description) {
        return Setting.parsed(key, "JSON", "", description, KvEventsConfig::parse, KvEventsConfig::toJson);
    }

    /** SGLang's JSON for this configuration, as {@link #parse} reads it. */
    public String toJson() {
        StringBuilder b = new StringBuilder("{\"publisher\": ")
                .append(quoted(publisher))
                .append(", \"endpoint\": ")
                .append(quoted(endpoint));
        replayEndpoint.ifPresent(r -> b.append(", \"replay_endpoint\": ").append(quoted(r)));
        return b.append(", \"buffer_steps\": ")
                .append(replayBufferBatches)
                .append(", \"hwm\": ")
                .append(sendHighWaterMarkMessages)
                .append(", \"max_queue_size\": ")
                .append(maxQueueEvents)
                .append(", \"topic\": ")
                .append(quoted(topic))
                .append(", \"attn_dp_rank\": ")
                .append(attnDpRank)
                .append(bindHost.map(h -> ", \"bind_host\": " + quoted(h)).orElse(""))
                .append('}')
                .toString();
    }

    private static String quoted(String text) {
        return '"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }

    /**
     * Reads SGLang's JSON, e.g. {@code {"publisher": "zmq", "topic": "kv-events"}}; missing keys take SGLang's
     * defaults, and blank text means events off.
     *
     * @throws IllegalArgumentException naming what is wrong (malformed JSON, an unknown key, a value of the wrong type
     *     or range)
     */
    public static KvEventsConfig parse(String json) {
        if (json == null || json.isBlank()) {
            return OFF;
        }
        Map<String, Object> m = FlatJson.parse(json);
        for (String key : m.keySet()) {
            Checks.requireArgument(KEYS.contains(key), "unknown key \"%s\"; known: %s", key, new TreeSet<>(KEYS));
        }
        return new KvEventsConfig(
                text(m, "publisher", NO_PUBLISHER),
                text(m, "endpoint", DEFAULT_ENDPOINT),
                m.get("replay_endpoint") == null ? Optional.empty() : Optional.of(text(m, "replay_endpoint", "")),
                whole(m, "buffer_steps", DEFAULT_REPLAY_BUFFER_BATCHES),
                whole(m, "hwm", DEFAULT_SEND_HIGH_WATER_MARK_MESSAGES),
                whole(m, "max_queue_size", DEFAULT_MAX_QUEUE_EVENTS),
                text(m, "topic", ""),
                whole(m, "attn_dp_rank", 0),
                m.get("bind_host") == null ? Optional.empty() : Optional.of(text(m, "bind_host", "")));
    }

    private static String text(Map<String, Object> m, String key, String otherwise) {
        Object v = m.get(key);
        if (v == null) {
            return otherwise;
        }
        Checks.requireArgument(v instanceof String, "\"%s\" must be a string, was %s", key, v);
        return (String) v;
    }

    private static int whole(Map<String, Object> m, String key, int otherwise) {
        Object v = m.get(key);
        if (v == null) {
            return otherwise;
        }
        Checks.requireArgument(
                v instanceof Long l && l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE,
                "\"%s\" must be a whole number, was %s",
                key,
                v);
        return ((Long) v).intValue();
    }
}
