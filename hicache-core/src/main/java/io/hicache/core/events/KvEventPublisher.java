package io.hicache.core.events;

/**
 * Carries batches of KV events out of the process to whoever routes requests by where prefixes are cached: ZeroMQ
 * in SGLang's wire format ({@code zmq}, module events-zmq), or an in-process {@link KvEventCollector}. Opened by its
 * {@link KvEventPublisherProvider}, or made by the embedder.
 *
 * <p>Calls come from one thread at a time, the {@link KvEventSink}'s, which hands batches over in the order the events
 * happened: an implementation need not be thread-safe for {@link #publish} itself, but {@link #close()} may come from
 * another thread. {@code publish} may block (the sink's thread absorbs it; the cache never waits for it), but should
 * not block for long: events queue behind it and the oldest are dropped when the sink's queue is full. A failure
 * thrown by {@code publish} is counted and logged by the sink, which goes on with the next batch.
 *
 * <p>The owner closes it: the sink that was handed it (a {@link io.hicache.core.cache.HiCache} closes its sink).
 */
public interface KvEventPublisher extends AutoCloseable {
    /** Publishes one batch, after every batch published before it. */
    void publish(KvEventBatch batch);

    /** Stops publishing and frees what the publisher holds (sockets, threads); a second call does nothing. */
    @Override
    void close();
}
