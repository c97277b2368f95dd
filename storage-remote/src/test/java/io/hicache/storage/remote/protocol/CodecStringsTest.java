package io.hicache.storage.remote.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * Strings on the wire are strict UTF-8: bytes a lossy decoder would map to the same text (and so merge two tenants'
 * namespaces) are refused, and valid strings round-trip byte for byte.
 */
class CodecStringsTest {
    /** A namespace as the wire carries it, with {@code model} as raw bytes. */
    private static ByteBuf namespaceWithModel(byte[] model) {
        ByteBuf b = Unpooled.buffer();
        b.writeShort(model.length).writeBytes(model);
        byte[] dtype = "bfloat16".getBytes(StandardCharsets.UTF_8);
        b.writeShort(dtype.length).writeBytes(dtype);
        b.writeByte(0).writeShort(0).writeShort(1);
        b.writeShort(0);
        return b;
    }

    @Test
    void invalidUtf8IsRefusedNotRepaired() {
        byte[] ff = {'t', 'e', 'n', 'a', 'n', 't', '-', (byte) 0xff};
        byte[] fe = {'t', 'e', 'n', 'a', 'n', 't', '-', (byte) 0xfe};
        for (byte[] model : new byte[][] {ff, fe, {(byte) 0xc3}, {(byte) 0xed, (byte) 0xa0, (byte) 0x80}}) {
            ProtocolException e =
                    assertThrows(ProtocolException.class, () -> Codec.readNamespace(namespaceWithModel(model)));
            assertTrue(e.getMessage().contains("not valid UTF-8"), e.getMessage());
        }
    }

    @Test
    void validStringsRoundTripAndDifferentBytesStayApart() {
        Namespace a = Codec.readNamespace(namespaceWithModel("tenant-\u00ff".getBytes(StandardCharsets.UTF_8)));
        Namespace b = Codec.readNamespace(namespaceWithModel("tenant-\u00fe".getBytes(StandardCharsets.UTF_8)));
        assertEquals("tenant-\u00ff", a.modelId());
        assertTrue(!a.equals(b) && !a.id().equals(b.id()), "two namespaces that differ in one byte stay apart");
        ByteBuf out = Unpooled.buffer();
        Codec.writeNamespace(out, Namespace.of("模型/ü", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1));
        assertEquals("模型/ü", Codec.readNamespace(out).modelId());
    }
}
