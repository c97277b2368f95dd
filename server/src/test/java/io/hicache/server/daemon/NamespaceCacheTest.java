package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.key.Namespace;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

class NamespaceCacheTest {
    @Test
    void repeatsAreServedFromTheCacheAndChangesAreDecoded() {
        Namespace a = Pages.namespace("a");
        Namespace b = Pages.namespace("b");
        Namespace aExtra = a.withExtraKey("lora-7");
        Namespace aRevised = a.toBuilder().weightsRevision("r2").build();
        ByteBuf in = Unpooled.buffer();
        for (Namespace ns : new Namespace[] {a, a, b, aExtra, aRevised, a}) {
            Codec.writeNamespace(in, ns, Wire.VERSION_3);
            in.writeInt(0x5EED); // what follows a namespace must be left where it was
        }
        NamespaceCache cache = new NamespaceCache(Wire.VERSION_3, Tenants.NONE.everything());
        Namespace first = cache.read(in);
        assertEquals(0x5EED, in.readInt());
        assertEquals(a, first);
        assertSame(first, cache.read(in), "the same bytes give the cached object");
        assertEquals(0x5EED, in.readInt());
        assertEquals(b, cache.read(in));
        assertEquals(0x5EED, in.readInt());
        assertEquals(aExtra, cache.read(in));
        assertEquals(0x5EED, in.readInt());
        assertEquals(aRevised, cache.read(in), "a revision is part of what is compared");
        assertEquals(0x5EED, in.readInt());
        assertEquals(a, cache.read(in));
        assertEquals(0x5EED, in.readInt());
        // A frame cut short inside a cached namespace's bytes is malformed, not a cache hit.
        ByteBuf cut = Unpooled.buffer();
        Codec.writeNamespace(cut, a, Wire.VERSION_3);
        cut.writerIndex(cut.writerIndex() - 1);
        assertThrows(ProtocolException.class, () -> cache.read(cut));
    }
}
