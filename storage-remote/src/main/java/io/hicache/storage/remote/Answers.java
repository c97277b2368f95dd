package io.hicache.storage.remote;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemoteConnection.Reply;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * How the {@code remote} store reads the daemon's answers (docs/protocol.md §3) into its results: per-page statuses
 * and GET bodies into a batch's result (a frame's share of the batch each), answers that carry nothing, and answers
 * read by a function. Each is a {@link Reply}, run on the connection's I/O thread. Stateless.
 */
final class Answers {
    /** Answer bytes per page of a get (status, length, checksum). */
    static final int GET_ANSWER_BYTES = 9;
    /** Answer bytes per page of a lease (status, length, checksum, offset). */
    static final int LEASE_ANSWER_BYTES = 17;

    private Answers() {}

    /** The answer to one frame's pages of a batch: without an answer, each of its pages gets the failure. */
    interface ChunkReply extends Reply<Void> {
        int[] chunk();

        BatchResult.Builder out();

        @Override
        default Void noAnswer(PageStatus status, @Nullable String detail) {
            for (int i : chunk()) {
                out().set(i, status, detail);
            }
            return null;
        }
    }

    /** Per-page statuses (put, delete) into the batch's result. */
    record Statuses(int[] chunk, BatchResult.Builder out) implements ChunkReply {
        @Override
        public Void answer(ByteBuf in) {
            int n = Codec.readCount(in, 1, chunk.length);
            if (n != chunk.length) {
                throw new ProtocolException(n + " statuses for " + chunk.length + " pages");
            }
            for (int i : chunk) {
                PageStatus s = Wire.status(in.readByte());
                out.set(i, s, s.isSuccess() || s == PageStatus.MISS ? null : "the daemon answered " + s);
            }
            return null;
        }
    }

    /** A get's answer: statuses, then the bodies of the pages found, copied into their targets and verified. */
    record Pages(PageBatch targets, int[] chunk, BatchResult.Builder out) implements ChunkReply {
        @Override
        public Void answer(ByteBuf in) {
            int n = Codec.readCount(in, GET_ANSWER_BYTES, chunk.length);
            if (n != chunk.length) {
                throw new ProtocolException(n + " outcomes for " + chunk.length + " pages");
            }
            PageStatus[] statuses = new PageStatus[n];
            long[] lengths = new long[n];
            int[] crcs = new int[n];
            for (int j = 0; j < n; j++) {
                statuses[j] = Wire.status(in.readByte());
                lengths[j] = in.readUnsignedInt();
                crcs[j] = in.readInt();
            }
            for (int j = 0; j < n; j++) {
                int i = chunk[j];
                MemorySegment target = targets.page(i);
                switch (statuses[j]) {
                    case OK -> {
                        if (lengths[j] != target.byteSize()) {
                            throw new ProtocolException("page " + i + " came with " + lengths[j]
                                    + " bytes for a target of " + target.byteSize());
                        }
                        Codec.need(in, (int) lengths[j], "page");
                        in.getBytes(in.readerIndex(), target.asByteBuffer());
                        in.skipBytes((int) lengths[j]);
                        int crc = PageChecksum.of(target);
                        if (crc != crcs[j]) {
                            out.set(
                                    i,
                                    PageStatus.CORRUPT,
                                    "checksum " + Integer.toHexString(crc) + ", the daemon sent "
                                            + Integer.toHexString(crcs[j]));
                        } else {
                            out.set(i, PageStatus.OK);
                        }
                    }
                    case SIZE_MISMATCH ->
                        out.set(
                                i,
                                PageStatus.SIZE_MISMATCH,
                                "the stored page is " + lengths[j] + " bytes, the target " + target.byteSize());
                    case MISS -> out.set(i, PageStatus.MISS);
                    default -> out.set(i, statuses[j], "the daemon answered " + statuses[j]);
                }
            }
            return null;
        }
    }

    /** An answer with nothing in it (clear); no answer is an error. */
    record Done(String what) implements Reply<Void> {
        @Override
        public Void answer(ByteBuf in) {
            return null;
        }

        @Override
        public Void noAnswer(PageStatus status, @Nullable String detail) {
            throw new HiCacheException(ErrorCode.STORE_IO, what + " on the daemon: " + status + ": " + detail);
        }
    }

    /** An answer {@code read} turns into a value; no answer fails with a {@link HiCacheException} naming {@code what}. */
    static <T> Reply<T> read(String what, Function<ByteBuf, T> read) {
        return new Reply<>() {
            @Override
            public T answer(ByteBuf payload) {
                return read.apply(payload);
            }

            @Override
            public T noAnswer(PageStatus status, @Nullable String detail) {
                throw new HiCacheException(ErrorCode.STORE_IO, what + ": " + detail);
            }
        };
    }
}
