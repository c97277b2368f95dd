/**
 * The {@code zmq} KV event publisher ({@link io.hicache.events.zmq.ZmqPublisher}): SGLang's {@code ZmqEventPublisher}
 * on the wire, in pure Java (JeroMQ, msgpack-core). A PUB socket sends each batch as three frames (topic, 8-byte
 * big-endian sequence number, msgpack payload); an optional ROUTER socket replays the buffered batches from a
 * sequence number a subscriber asks for. Found by name through {@link io.hicache.events.zmq.ZmqPublisherProvider}.
 * See docs/kv-events.md.
 */
package io.hicache.events.zmq;
