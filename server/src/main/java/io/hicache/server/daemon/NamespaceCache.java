package io.hicache.server.daemon;

import io.hicache.core.key.Namespace;
import io.hicache.storage.remote.protocol.Codec;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import org.jspecify.annotations.Nullable;

/**
 * The namespace a connection named last, by its encoded bytes. A connection nearly always speaks for one model and
 * rank, and decoding a namespace costs two strings and a SHA-256 digest per request; comparing a few dozen bytes does
 * not. The namespace is the one the connection may reach ({@link Tenants.Access#confine}). One per connection; confined to its event loop.
 */
final class NamespaceCache {
    private final int version;
    private final Tenants.Access access;
    private ByteBuf lastBytes = Unpooled.EMPTY_BUFFER;
    /** Null until the first namespace is read. */
    private @Nullable Namespace last;

    /** A cache for a connection of protocol {@code version}, whose namespaces are encoded as that version says. */
    NamespaceCache(int version, Tenants.Access access) {
        this.version = version;
        this.access = access;
    }

    /**
     * Reads a namespace like {@link Codec#readNamespace(ByteBuf, int)}, returning the previous one's object when the bytes are the
     * same.
     *
     * @throws io.hicache.storage.remote.protocol.ProtocolException if the namespace is malformed
     */
    Namespace read(ByteBuf in) {
        int start = in.readerIndex();
        int length = lastBytes.readableBytes();
        if (last != null && in.readableBytes() >= length && ByteBufUtil.equals(in, start, lastBytes, 0, length)) {
            in.skipBytes(length);
            return last;
        }
        // A tenant's connection means its own namespace (or is refused, ERROR AUTH): decided once per namespace.
        Namespace ns = access.confine(Codec.readNamespace(in, version));
        byte[] bytes = new byte[in.readerIndex() - start];
        in.getBytes(start, bytes);
        lastBytes = Unpooled.wrappedBuffer(bytes);
        last = ns;
        return ns;
    }
}
