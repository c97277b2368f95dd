package io.hicache.core.events;

import io.hicache.core.util.Checks;
import java.util.List;

/**
 * Events published together, oldest first, as SGLang's {@code EventBatch}: the wall-clock time the batch was made,
 * in seconds since the epoch (SGLang's {@code time.time()}), and the events. Immutable.
 *
 * @param timestampSeconds when the batch was made, in seconds since 1970-01-01 UTC
 * @param events           the events, oldest first; not empty
 */
public record KvEventBatch(double timestampSeconds, List<KvEvent> events) {
    public KvEventBatch {
        Checks.checkNotNull(events, "events");
        Checks.requireArgument(!events.isEmpty(), "a batch has at least one event");
        events = List.copyOf(events);
    }

    /** A batch of {@code events} made now. */
    public static KvEventBatch now(List<KvEvent> events) {
        return new KvEventBatch(System.currentTimeMillis() / 1000.0, events);
    }
}
