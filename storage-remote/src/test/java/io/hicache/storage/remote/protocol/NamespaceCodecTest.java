package io.hicache.storage.remote.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

/** The namespace's wire forms: versions 1 and 2 carry the common fields only, version 3 carries every field. */
class NamespaceCodecTest {
    private static final Namespace WHOLE = Namespace.builder("llama-3.1-8b")
            .weightsRevision("0e9e39f")
            .kvDtype(KvDtype.FP8_E4M3)
            .quantization("per-token-scale")
            .pageByteOrder(PageByteOrder.TOKEN_MAJOR)
            .pageTokens(64)
            .tensorParallel(3, 8)
            .tenant("acme")
            .extraKey("lora-a")
            .build();

    @Test
    void versionThreeCarriesEveryFieldAndTheFormatVersion() {
        ByteBuf out = Unpooled.buffer();
        Codec.writeNamespace(out, WHOLE, Wire.VERSION_3);
        out.writeInt(0x5EED);
        Namespace read = Codec.readNamespace(out, Wire.VERSION_3);
        assertEquals(WHOLE, read);
        assertEquals(WHOLE.id(), read.id());
        assertEquals(0x5EED, out.readInt(), "nothing after the namespace was read");

        Namespace older = Namespace.builder("m").formatVersion(1).build();
        ByteBuf old = Unpooled.buffer();
        Codec.writeNamespace(old, older, Wire.VERSION_3);
        assertEquals(1, Codec.readNamespace(old, Wire.VERSION_3).formatVersion());
    }

    @Test
    void versionsOneAndTwoRefuseANamespaceTheyCannotSayAndReadNeutralFields() {
        for (Namespace ns : new Namespace[] {
            WHOLE,
            Namespace.builder("m").weightsRevision("r").build(),
            Namespace.builder("m").pageTokens(16).build(),
            Namespace.builder("m").tenant("t").build(),
            Namespace.builder("m").quantization("q").build(),
            Namespace.builder("m").formatVersion(1).build()
        }) {
            assertThrows(
                    IllegalArgumentException.class, () -> Codec.writeNamespace(Unpooled.buffer(), ns, 2), ns::toString);
        }
        Namespace plain = Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 1, 2)
                .withExtraKey("x");
        ByteBuf out = Unpooled.buffer();
        Codec.writeNamespace(out, plain, Wire.VERSION_2);
        ByteBuf same = out.copy();
        assertEquals(plain, Codec.readNamespace(out, Wire.VERSION_2));
        ByteBuf v3 = Unpooled.buffer();
        Codec.writeNamespace(v3, plain, Wire.VERSION_3);
        assertTrue(v3.readableBytes() > same.readableBytes(), "version 3 adds fields");
        assertEquals(plain, Codec.readNamespace(v3, Wire.VERSION_3), "neutral fields name the same namespace");
    }

    @Test
    void badVersionThreeFieldsAreMalformed() {
        ByteBuf tooManyTokens = Unpooled.buffer();
        Codec.writeNamespace(tooManyTokens, Namespace.builder("m").build(), Wire.VERSION_2);
        tooManyTokens.writeShort(2);
        Codec.writeString(tooManyTokens, "");
        Codec.writeString(tooManyTokens, "");
        tooManyTokens.writeInt(-1);
        Codec.writeString(tooManyTokens, "");
        ProtocolException e =
                assertThrows(ProtocolException.class, () -> Codec.readNamespace(tooManyTokens, Wire.VERSION_3));
        assertTrue(e.getMessage().startsWith("bad namespace"), e.getMessage());

        ByteBuf unknownFormat = Unpooled.buffer();
        Codec.writeNamespace(unknownFormat, Namespace.builder("m").build(), Wire.VERSION_2);
        unknownFormat.writeShort(9);
        Codec.writeString(unknownFormat, "");
        Codec.writeString(unknownFormat, "");
        unknownFormat.writeInt(0);
        Codec.writeString(unknownFormat, "");
        e = assertThrows(ProtocolException.class, () -> Codec.readNamespace(unknownFormat, Wire.VERSION_3));
        assertTrue(e.getMessage().contains("key format version 9"), e.getMessage());

        ByteBuf cut = Unpooled.buffer();
        Codec.writeNamespace(cut, WHOLE, Wire.VERSION_3);
        cut.writerIndex(cut.writerIndex() - 1);
        assertThrows(ProtocolException.class, () -> Codec.readNamespace(cut, Wire.VERSION_3));
    }
}
