package io.hicache.storage.remote.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * Every request the Java client encodes decodes, on the daemon's side, to the same record: one definition of each
 * payload serves both. Also the decoder's refusals: bytes left over, versions, and HELLO's error codes.
 */
class RequestCodecTest {
    private static final Function<ByteBuf, Namespace> V3_NAMESPACES = in -> Codec.readNamespace(in, Wire.VERSION_3);

    private static final Namespace NS =
            Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1).withExtraKey("x");

    private static List<StoreKey> keys(int n) {
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] b = new byte[PageHash.BYTES];
            b[0] = (byte) i;
            b[31] = (byte) (7 * i + 1);
            keys.add(NS.key(PageHash.fromBytes(b, 0)));
        }
        return keys;
    }

    /** Encodes as the client does, and decodes as the daemon does. */
    private static Request roundTrip(Request r, int version) {
        ByteBuf frame = RequestEncoder.frame(UnpooledByteBufAllocator.DEFAULT, r, 42, 1_500);
        try {
            assertEquals(frame.readableBytes() - 4, frame.readInt(), "the length field");
            FrameHeader h = FrameHeader.read(frame);
            assertEquals(new FrameHeader(r.op(), r.flags(), 42, 1_500), h);
            if (r instanceof Hello) {
                return Hello.read(frame);
            }
            // The client writes namespaces as version 3 does; the decoder's version decides the ops and flags.
            return new RequestDecoder(version, 68 << 20, V3_NAMESPACES).decode(h, frame);
        } finally {
            frame.release();
        }
    }

    @Test
    void everyRequestRoundTrips() {
        List<StoreKey> keys = keys(3);
        int[] lengths = {4096, 1, 70_000};
        assertEquals(new ReadRequest.LeadingHits(NS, keys), roundTrip(new ReadRequest.LeadingHits(NS, keys), 1));
        assertEquals(
                new ReadRequest.LeadingHits(NS, List.of()), roundTrip(new ReadRequest.LeadingHits(NS, List.of()), 1));
        ReadRequest.Get get =
                assertInstanceOf(ReadRequest.Get.class, roundTrip(new ReadRequest.Get(NS, keys, lengths), 1));
        assertEquals(keys, get.keys());
        assertArrayEquals(lengths, get.lengths());
        for (boolean noChecksums : new boolean[] {false, true}) {
            ReadRequest.Lease lease = assertInstanceOf(
                    ReadRequest.Lease.class,
                    roundTrip(new ReadRequest.Lease(NS, keys, lengths, 0xFFFF_FFFFL, noChecksums), 2));
            assertEquals(keys, lease.keys());
            assertArrayEquals(lengths, lease.lengths());
            assertEquals(0xFFFF_FFFFL, lease.holdMillis());
            assertEquals(noChecksums, lease.noChecksums());
        }
        assertEquals(new ReadRequest.Release(-2), roundTrip(new ReadRequest.Release(-2), 1));
        assertEquals(new WriteRequest.Delete(NS, keys), roundTrip(new WriteRequest.Delete(NS, keys), 1));
        assertEquals(new WriteRequest.Clear(NS), roundTrip(new WriteRequest.Clear(NS), 1));
        assertEquals(new WriteRequest.ClearAll(), roundTrip(new WriteRequest.ClearAll(), 1));
        WriteRequest.Reserve reserve = assertInstanceOf(
                WriteRequest.Reserve.class, roundTrip(new WriteRequest.Reserve(NS, keys, lengths, 60_000), 2));
        assertEquals(keys, reserve.keys());
        assertArrayEquals(lengths, reserve.lengths());
        assertEquals(60_000, reserve.holdMillis());
        WriteRequest.Commit commit = assertInstanceOf(
                WriteRequest.Commit.class, roundTrip(new WriteRequest.Commit(9, new int[] {1, -1, 0}), 2));
        assertEquals(9, commit.reservationId());
        assertArrayEquals(new int[] {1, -1, 0}, commit.crcs());
        assertEquals(
                true,
                ((WriteRequest.Commit) roundTrip(new WriteRequest.Commit(9, new int[] {0}, true), 2)).noChecksums(),
                "COMMIT's no-checksums flag travels in the header");
        assertEquals(new AdminRequest.Stats(), roundTrip(new AdminRequest.Stats(), 1));
        assertEquals(new AdminRequest.Health(), roundTrip(new AdminRequest.Health(), 1));
        assertEquals(new AdminRequest.Flush(), roundTrip(new AdminRequest.Flush(), 1));
        assertEquals(new AdminRequest.StoreShow(), roundTrip(new AdminRequest.StoreShow(), 1));
        assertEquals(new AdminRequest.StoreDetach(), roundTrip(new AdminRequest.StoreDetach(), 1));
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("file.root", "/tmp/x");
        settings.put("file.fsync", "true");
        assertEquals(
                new AdminRequest.StoreAttach("file", settings),
                roundTrip(new AdminRequest.StoreAttach("file", settings), 1));
        assertEquals(
                new Hello(1, "token", WireChecksum.CRC32C), roundTrip(new Hello(1, "token", WireChecksum.CRC32C), 1));
        assertEquals(new Hello(2, "", WireChecksum.CRC32), roundTrip(new Hello(2, "", WireChecksum.CRC32), 2));
        assertEquals(new Hello(3, "t", WireChecksum.CRC32C), roundTrip(new Hello(3, "t", WireChecksum.CRC32C), 3));
    }

    @Test
    void aPutsUncheckedFlagTravelsInTheHeaderAndVersion1IgnoresIt() {
        for (int version : new int[] {1, 2, 3}) {
            for (boolean unchecked : new boolean[] {false, true}) {
                ByteBuf body = Unpooled.directBuffer(3).writeBytes(new byte[] {7, 8, 9});
                WriteRequest.Put sent =
                        new WriteRequest.Put(NS, keys(1), new int[] {3}, new int[] {5}, body, unchecked);
                assertEquals(unchecked ? WriteRequest.Put.UNCHECKED : 0, sent.flags());
                WriteRequest.Put got = assertInstanceOf(WriteRequest.Put.class, roundTrip(sent, version));
                assertEquals(unchecked && version >= 2, got.unchecked(), "version " + version);
            }
        }
    }

    @Test
    void aPutsBodiesTravelWithoutACopyAndDecodeAsASliceOfTheFrame() {
        List<StoreKey> keys = keys(2);
        ByteBuf bodies = Unpooled.directBuffer(6).writeBytes(new byte[] {1, 2, 3, 4, 5, 6});
        WriteRequest.Put sent = new WriteRequest.Put(NS, keys, new int[] {2, 4}, new int[] {11, 22}, bodies);
        ByteBuf frame = RequestEncoder.frame(UnpooledByteBufAllocator.DEFAULT, sent, 1, 0);
        try {
            frame.skipBytes(4);
            FrameHeader h = FrameHeader.read(frame);
            WriteRequest.Put put = assertInstanceOf(
                    WriteRequest.Put.class, new RequestDecoder(1, 68 << 20, V3_NAMESPACES).decode(h, frame));
            assertEquals(keys, put.keys());
            assertArrayEquals(new int[] {2, 4}, put.lengths());
            assertArrayEquals(new int[] {11, 22}, put.crcs());
            assertArrayEquals(new byte[] {1, 2, 3, 4, 5, 6}, ByteBufUtil.getBytes(put.bodies()));
            assertTrue(put.isWrite());
        } finally {
            frame.release();
        }
        assertEquals(0, bodies.refCnt(), "the frame took the bodies over and released them");
    }

    @Test
    void theDecoderRefusesWhatTheProtocolDoesNot() {
        RequestDecoder v1 = new RequestDecoder(1, 68 << 20, V3_NAMESPACES);
        RequestDecoder v2 = new RequestDecoder(2, 68 << 20, V3_NAMESPACES);
        assertFalse(v1.defines(Wire.RESERVE));
        assertFalse(v1.defines(Wire.COMMIT));
        assertTrue(v2.defines(Wire.RESERVE));
        assertFalse(v2.defines(Wire.HELLO), "HELLO is the handshake's");
        assertFalse(v2.defines(Wire.GET | Wire.RESPONSE), "an answer's op is no request");

        ByteBuf trailing = Unpooled.buffer().writeLong(5).writeByte(0);
        ProtocolException e = assertThrows(
                ProtocolException.class, () -> v1.decode(new FrameHeader(Wire.RELEASE, 0, 1, 0), trailing));
        assertEquals(Wire.E_MALFORMED, e.code());
        assertTrue(e.getMessage().contains("1 bytes after the end of the request"), e.getMessage());

        ByteBuf lease = Unpooled.buffer();
        new ReadRequest.Lease(NS, keys(1), new int[] {8}, 10, true).writeTo(lease);
        ReadRequest.Lease v1Lease = (ReadRequest.Lease) v1.decode(new FrameHeader(Wire.LEASE, 1, 1, 0), lease);
        assertFalse(v1Lease.noChecksums(), "version 1 ignores every flag");

        ByteBuf shortPut = Unpooled.buffer();
        Codec.writeNamespace(shortPut, NS, Wire.VERSION_3);
        shortPut.writeInt(1).writeBytes(new byte[32]).writeInt(8).writeInt(0).writeByte(1);
        e = assertThrows(ProtocolException.class, () -> v1.decode(new FrameHeader(Wire.PUT, 0, 1, 0), shortPut));
        assertTrue(e.getMessage().contains("the page lengths add up to 8 bytes, the frame has 1"), e.getMessage());

        ByteBuf store = Unpooled.buffer().writeByte(3);
        assertTrue(RequestDecoder.isAdminOperation(Wire.STORE, store), "an undefined STORE is not SHOW: admin's");
        assertFalse(
                RequestDecoder.isAdminOperation(Wire.STORE, Unpooled.buffer().writeByte(Wire.STORE_SHOW)));
        e = assertThrows(ProtocolException.class, () -> v1.decode(new FrameHeader(Wire.STORE, 0, 1, 0), store));
        assertTrue(e.getMessage().contains("STORE sub-operation 3 is not defined"), e.getMessage());
    }

    @Test
    void helloErrorsCarryTheirCodes() {
        ByteBuf version4 = Unpooled.buffer().writeInt(Wire.MAGIC).writeShort(4);
        assertEquals(
                Wire.E_VERSION,
                assertThrows(ProtocolException.class, () -> Hello.read(version4))
                        .code());
        ByteBuf badMagic = Unpooled.buffer().writeInt(1).writeShort(1);
        assertEquals(
                Wire.E_MALFORMED,
                assertThrows(ProtocolException.class, () -> Hello.read(badMagic))
                        .code());
        ByteBuf longToken = Unpooled.buffer().writeInt(Wire.MAGIC).writeShort(1).writeShort(Codec.MAX_STRING_BYTES + 1);
        assertEquals(
                Wire.E_TOO_LARGE,
                assertThrows(ProtocolException.class, () -> Hello.read(longToken))
                        .code());
        ByteBuf badChecksum = Unpooled.buffer()
                .writeInt(Wire.MAGIC)
                .writeShort(2)
                .writeShort(0)
                .writeByte(9);
        assertEquals(
                Wire.E_MALFORMED,
                assertThrows(ProtocolException.class, () -> Hello.read(badChecksum))
                        .code());
    }
}
