package io.hicache.events.zmq;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEvent;
import io.hicache.core.events.KvEventBatch;
import io.hicache.core.events.Placement;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.jspecify.annotations.Nullable;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes a batch as SGLang does (msgspec structs with {@code array_like=True}, so every field is written in order,
 * defaults included, and each event is a tagged array that starts with its class name):
 *
 * <pre>
 * batch:            [ts (float64 seconds), [event, ...], attn_dp_rank (int)]
 * BlockStored:      ["BlockStored", [block_hash (int64), ...], parent_block_hash (int64 | nil),
 *                    [token_id (int), ...], block_size (int), lora_id (int | nil), medium (str)]
 * BlockRemoved:     ["BlockRemoved", [block_hash, ...], medium (str)]
 * AllBlocksCleared: ["AllBlocksCleared"]
 * </pre>
 *
 * <p>An event with a {@link Placement} (the daemon's) has one more trailing field, a map {@code {"tier": "slab" | "l3",
 * "store": name, "namespace": id}}, which SGLang's decoders skip.
 *
 * <p>Token ids go out as their unsigned values. Stateless.
 */
final class BatchEncoder {
    private BatchEncoder() {}

    /** The payload frame of {@code batch}, published by data-parallel rank {@code attnDpRank}. */
    static byte[] encode(KvEventBatch batch, int attnDpRank) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packArrayHeader(3);
            p.packDouble(batch.timestampSeconds());
            p.packArrayHeader(batch.events().size());
            for (KvEvent e : batch.events()) {
                switch (e) {
                    case BlockStored s -> stored(p, s);
                    case BlockRemoved r -> removed(p, r);
                    case AllBlocksCleared c -> {
                        p.packArrayHeader(1);
                        p.packString("AllBlocksCleared");
                    }
                }
            }
            p.packInt(attnDpRank);
            return p.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("msgpack into memory failed", e); // a buffer packer does no I/O
        }
    }

    private static void stored(MessageBufferPacker p, BlockStored s) throws IOException {
        p.packArrayHeader(s.placement() == null ? 7 : 8);
        p.packString("BlockStored");
        p.packArrayHeader(s.blockCount());
        for (int i = 0; i < s.blockCount(); i++) {
            p.packLong(s.blockHash(i));
        }
        if (s.parentBlockHash().isPresent()) {
            p.packLong(s.parentBlockHash().getAsLong());
        } else {
            p.packNil();
        }
        p.packArrayHeader(s.tokenCount());
        for (int i = 0; i < s.tokenCount(); i++) {
            p.packLong(s.tokenId(i));
        }
        p.packInt(s.blockSize());
        if (s.loraId().isPresent()) {
            p.packInt(s.loraId().getAsInt());
        } else {
            p.packNil();
        }
        p.packString(s.medium().wireName());
        placement(p, s.placement());
    }

    private static void removed(MessageBufferPacker p, BlockRemoved r) throws IOException {
        p.packArrayHeader(r.placement() == null ? 3 : 4);
        p.packString("BlockRemoved");
        p.packArrayHeader(r.blockCount());
        for (int i = 0; i < r.blockCount(); i++) {
            p.packLong(r.blockHash(i));
        }
        p.packString(r.medium().wireName());
        placement(p, r.placement());
    }

    /** HiCache's trailing field: {"tier": ..., "store": ..., "namespace": ...}, written only when there is one. */
    private static void placement(MessageBufferPacker p, @Nullable Placement placement) throws IOException {
        if (placement == null) {
            return;
        }
        p.packMapHeader(3);
        p.packString("tier");
        p.packString(placement.tier());
        p.packString("store");
        p.packString(placement.store());
        p.packString("namespace");
        p.packString(placement.namespaceId());
    }
}
