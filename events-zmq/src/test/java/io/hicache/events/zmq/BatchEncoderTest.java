package io.hicache.events.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEventBatch;
import io.hicache.core.events.Medium;
import java.util.List;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;

/** The payload, value by value, as SGLang's msgspec encoder writes it (every field, in order, tagged arrays). */
class BatchEncoderTest {
    @Test
    void aBatchIsTsEventsAndRankAndEachEventATaggedArrayWithEveryField() throws Exception {
        KvEventBatch batch = new KvEventBatch(
                1_700_000_000.25,
                List.of(
                        new BlockStored(
                                new long[] {Long.MIN_VALUE, -1, 7},
                                OptionalLong.empty(),
                                new int[] {0, 1, -1},
                                1,
                                OptionalInt.empty(),
                                Medium.GPU),
                        new BlockStored(
                                new long[] {42},
                                OptionalLong.of(-5),
                                new int[0],
                                0,
                                OptionalInt.of(3),
                                Medium.EXTERNAL),
                        new BlockRemoved(new long[] {7, 42}, Medium.CPU),
                        new AllBlocksCleared()));
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(BatchEncoder.encode(batch, 2))) {
            Value v = u.unpackValue();
            assertEquals(
                    "[1.70000000025E9,[[\"BlockStored\",[-9223372036854775808,-1,7],null,[0,1,4294967295],1,null,"
                            + "\"GPU\"],[\"BlockStored\",[42],-5,[],0,3,\"EXTERNAL\"],[\"BlockRemoved\",[7,42],\"CPU_PINNED\"],"
                            + "[\"AllBlocksCleared\"]],2]",
                    v.toJson());
            assertEquals(
                    1_700_000_000.25, v.asArrayValue().get(0).asFloatValue().toDouble(), "a float64, not rounded");
            assertFalse(u.hasNext(), "one value, nothing after it");
        }
    }
}
