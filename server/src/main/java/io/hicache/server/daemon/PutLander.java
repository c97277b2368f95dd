package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import io.hicache.storage.remote.protocol.RequestDecoder;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.hicache.storage.remote.protocol.WriteRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.DefaultMaxMessagesRecvByteBufAllocator;
import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;
import org.jspecify.annotations.Nullable;

/**
 * Receives the bodies of a connection's PUT frames straight into their rooms in the slab, as memcached reads a value
 * into its item: the channel's receive buffers are this handler's, and while a body has a room the buffer handed to the
 * socket wraps that room, so the kernel's copy out of the socket is the only copy of the page on its way in. Frames that
 * are not such PUTs pass on untouched, as slices of what was read, to the {@link FrameDecoder} behind it.
 *
 * <p>A PUT with at least one page of {@link #MIN_LANDED_PAGE_BYTES} or more: its header and table are collected
 * first (reads between frames and of a table take {@value #HEAD_READ_BYTES} bytes, so at most that much of a body comes in
 * through a buffer and is copied); then each page gets a room as a PUT on the event loop would take it ({@link
 * SlabWrites#room} without eviction); a page that gets none (stored already, too large, the slab needs eviction, too
 * small to be worth it) is collected in a buffer as before. The whole frame goes on as a {@link LandedPut} (its bodies
 * the rooms' memory and the buffers), which the {@link FrameDecoder} passes through and {@link WriteHandler} stores:
 * checked against its checksum, then committed, so the table's promises hold as for any PUT (a page that fails its
 * checksum is not stored, and its room is freed). The checksums of a landed page are computed here, read by read, while
 * the bytes the kernel just copied are still in this core's cache: checked later, a page is read again from memory,
 * which costs several times more (CRC-32C runs at about 90 GB/s over cached bytes on the development machine's Xeon,
 * 10 GB/s out of memory: `java scripts/CrcVsCopy.java`); a PUT flagged {@code UNCHECKED} on a CRC-32C connection is
 * not summed at all (docs/protocol.md §3 PUT). Rooms are taken early, stored in order: a page is visible only when its
 * PUT runs, behind the connection's earlier writes (docs/protocol.md §1).
 *
 * <p>A table that does not parse within {@value #MAX_TABLE_BYTES} bytes (or the frame) is passed on whole, and the
 * request is answered as any malformed one. Bytes of collected tables and bodies are charged to the partial-frame
 * budget as the frame decoder charges its own.
 *
 * <p>Installed with {@code server.put-into-slab} (the default), on connections without TLS, whose channel got an
 * {@link Allocator} when it started. One instance per connection; used on its event loop only. Rooms of a frame still arriving when the
 * connection goes are freed; a {@link LandedFrame} frees the rooms its PUT did not take when it is released.
 */
final class PutLander extends ChannelInboundHandlerAdapter {
    static final String NAME = "put-lander";
    /** Pages below this are copied through a buffer: a room costs more bookkeeping than their copy. */
    static final int MIN_LANDED_PAGE_BYTES = 16 << 10;
    /**
     * What one read takes between frames and of a PUT's table: small requests come many to a read; at worst this much
     * of a PUT's first body comes in with its table and is copied (memcached reads 16 KiB ahead, alike).
     */
    static final int HEAD_READ_BYTES = 4 << 10;
    /**
     * What one read takes of a body landing in its room: small enough that the bytes are still in this core's cache
     * when the lander computes their checksum right after (in profiles of the server suite's CPU probe the CRC-32C
     * took 0.25 of the socket's receive copy time with whole-room reads, 0.14 at 256 KiB, 0.10 at 64 KiB, where the
     * extra reads cost about what was saved: docs/benchmarks.md).
     */
    private static final int LAND_READ_BYTES = 256 << 10;
    /** What one read takes of a frame passed on, or of a body that has no room. */
    private static final int PASS_READ_BYTES = 64 << 10;
    /** A PUT's table that has not parsed after this many bytes is passed on with its frame. */
    static final int MAX_TABLE_BYTES = 1 << 20;
    /** The length field and the request header. */
    private static final int HEAD_BYTES = 4 + 16;

    private final SlabCache cache;
    private final ServerConfig config;
    private final FrameDecoder.Budget budget;
    private final RequestDecoder decoder;
    private final int maxFrameBytes;
    /** The connection's wire checksum, computed as bodies land; and CRC-32C, the slab's, when that is another. */
    private final Checksum wireSum;

    private final @Nullable CRC32C slabSum;

    /** The first bytes of a frame that straddles reads, until they tell what it is (length field and op). */
    private ByteBuf head = Unpooled.EMPTY_BUFFER; // allocated once the lander is in the pipeline
    /** Bytes of the frame under way that go on untouched. */
    private long passRemaining;

    private @Nullable Landing landing;
    /** The last buffer that wraps a room: bytes read into it are in place. */
    private @Nullable ByteBuf handedOut;
    /** Set on anything unexpected: every byte from then on goes on to the frame decoder, which judges it. */
    private boolean bypass;
    /** Set when a frame was refused over the budget: the connection closes, and nothing behind the frame runs. */
    private boolean refused;

    /**
     * A lander for a connection whose frame decoder holds {@code held} (the bytes that came behind the HELLO, which
     * it decodes itself): the frames they start are passed on to their end; where they end inside a length field the
     * connection's frames are all passed on.
     */
    PutLander(
            SlabCache cache,
            ServerConfig config,
            FrameDecoder.Budget budget,
            RequestDecoder decoder,
            WireChecksum checksum,
            ByteBuf held) {
        this.cache = cache;
        this.config = config;
        this.budget = budget;
        this.decoder = decoder;
        this.maxFrameBytes = config.maxFrameBytes();
        this.wireSum = checksum.newChecksum();
        this.slabSum = checksum == WireChecksum.CRC32C ? null : new CRC32C();
        long at = held.readerIndex();
        long end = held.writerIndex();
        while (at + 4 <= end) {
            at += 4 + held.getUnsignedInt((int) at);
        }
        if (at > end) {
            passRemaining = at - end;
        } else if (at < end) {
            bypass = true; // a length field cut in two: rare (a HELLO and a frame start in one read); not worth it
        }
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        head = Unpooled.directBuffer(5);
        if (ctx.channel().config().getRecvByteBufAllocator() instanceof Allocator a) {
            a.lander = this;
        } else {
            bypass = true; // no allocator of ours (installed at the channel's start): frames are only passed on
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf in)) {
            ctx.fireChannelRead(msg);
            return;
        }
        try {
            while (in.isReadable()) {
                if (refused) {
                    in.skipBytes(in.readableBytes());
                } else if (bypass) {
                    ctx.fireChannelRead(in.readRetainedSlice(in.readableBytes()));
                } else if (landing != null) {
                    Landing l = landing;
                    l.consume(ctx, in, in == handedOut);
                } else if (passRemaining > 0) {
                    int n = (int) Math.min(in.readableBytes(), passRemaining);
                    passRemaining -= n;
                    ctx.fireChannelRead(in.readRetainedSlice(n));
                } else if (head.isReadable()) {
                    head.writeBytes(in, Math.min(in.readableBytes(), head.writableBytes()));
                    Decision d = decide(head, head.readerIndex(), head.writerIndex());
                    if (d != Decision.UNDECIDED) {
                        ByteBuf start = head.copy(); // the head buffer is reused; what goes on is its own
                        head.clear();
                        begin(ctx, d, start.getUnsignedInt(0), start);
                    }
                } else {
                    passWholeFrames(ctx, in);
                }
            }
        } finally {
            if (in == handedOut) {
                handedOut = null;
            }
            in.release();
        }
    }

    /** What a frame's first bytes say about it. */
    private enum Decision {
        /** Too few bytes to tell. */
        UNDECIDED,
        /** A PUT worth landing. */
        LAND,
        /** Any other frame: passed on whole. */
        PASS,
        /** A length the frame decoder refuses (under a header, over the limit): everything goes on to it. */
        BYPASS
    }

    /**
     * What the frame starting at {@code at} is, from its length field and op; {@code end} bounds the bytes there. A
     * length that cannot be a landed PUT is decided on the length alone, so that a length over the limit is refused
     * as soon as it arrives.
     */
    private Decision decide(ByteBuf buf, int at, int end) {
        if (at + 4 > end) {
            return Decision.UNDECIDED;
        }
        long length = buf.getUnsignedInt(at);
        if (length < 16 || length > maxFrameBytes) {
            return Decision.BYPASS;
        }
        if (length < 16 + MIN_LANDED_PAGE_BYTES) {
            return Decision.PASS;
        }
        if (at + 5 > end) {
            return Decision.UNDECIDED;
        }
        return buf.getUnsignedByte(at + 4) == Wire.PUT ? Decision.LAND : Decision.PASS;
    }

    /**
     * At a frame boundary: passes on, as one slice, the frames of {@code in} up to the first PUT to land (or a frame
     * whose first bytes do not tell yet); then starts that one.
     */
    private void passWholeFrames(ChannelHandlerContext ctx, ByteBuf in) {
        int start = in.readerIndex();
        int end = in.writerIndex();
        long at = start;
        Decision d;
        while ((d = decide(in, (int) at, end)) == Decision.PASS) {
            at += 4 + in.getUnsignedInt((int) at);
            if (at >= end) {
                break;
            }
        }
        if (d == Decision.BYPASS) {
            bypass = true; // the frame decoder and the handler answer it
            ctx.fireChannelRead(in.readRetainedSlice(end - start));
            return;
        }
        if (at > end) {
            passRemaining = at - end; // the last frame goes on past this read
            at = end;
        }
        if (at > start) {
            ctx.fireChannelRead(in.readRetainedSlice((int) at - start));
        }
        if (!in.isReadable() || passRemaining > 0) {
            return;
        }
        if (d == Decision.LAND) {
            landing =
                    new Landing(ctx, (int) in.getUnsignedInt(in.readerIndex())); // takes the frame from its first byte
        } else {
            head.writeBytes(in, Math.min(in.readableBytes(), head.writableBytes())); // the next read tells
        }
    }

    /** Starts the frame whose first bytes ({@code start}, its length field among them) decided {@code d}. */
    private void begin(ChannelHandlerContext ctx, Decision d, long length, ByteBuf start) {
        try {
            switch (d) {
                case LAND -> {
                    Landing l = new Landing(ctx, (int) length);
                    landing = l;
                    l.consume(ctx, start, false);
                }
                case PASS -> {
                    passRemaining = 4 + length - start.readableBytes();
                    ctx.fireChannelRead(start.retain());
                }
                case BYPASS, UNDECIDED -> {
                    bypass = true;
                    ctx.fireChannelRead(start.retain());
                }
            }
        } finally {
            start.release();
        }
    }

    /** Charges {@code bytes} of a frame still arriving; over the budget the frame is refused as the decoder does. */
    private void charge(long bytes) {
        if (!budget.take(bytes)) {
            refused = true;
            throw new FrameDecoder.OverBudget("the daemon holds its limit of " + budget.limitBytes() + " bytes of "
                    + "frames still arriving (server.max-partial-frame-bytes); this frame was refused");
        }
    }

    /** One PUT frame on its way in. */
    private final class Landing {
        /** The frame's length field: header and payload. */
        private final int length;
        /** The length field, header and table (and, until the table parses, whatever came after). */
        private final ByteBuf prefix;

        private long charged;
        private WriteRequest.Put.@Nullable Table table;
        /** Per page, once decided (as its first byte is due): its room, or null for a buffered body. */
        private Room @Nullable [] rooms;
        /** Per landed page, once whole: its wire checksum and its CRC-32C (the same when the wire's is CRC-32C). */
        private int @Nullable [] wireSums;

        private int @Nullable [] slabSums;
        /**
         * Whether the landed pages' checksums are computed: not for a PUT flagged {@code UNCHECKED} on a CRC-32C
         * connection, which {@link WriteHandler} stores with the client's checksums unchecked.
         */
        private boolean summing = true;

        private @Nullable CompositeByteBuf @Nullable [] bodies;
        /** Pages whose destination is decided: {@code [0, decided)}. */
        private int decided;
        /** The page being received, and its bytes so far; the bodies' bytes still to come. */
        private int page;

        private long bodyLeft;

        private int filled;

        Landing(ChannelHandlerContext ctx, int length) {
            this.length = length;
            // from the channel's allocator (Netty's adaptive one pools), sized for the first read's bytes
            this.prefix = ctx.alloc().directBuffer(HEAD_READ_BYTES);
            // The running checksums start clean with every frame: a frame left mid-page closes its connection today,
            // but this frame's sums should not depend on that.
            wireSum.reset();
            if (slabSum != null) {
                slabSum.reset();
            }
        }

        /** Charges {@code bytes} received to the budget (as the frame decoder charges what it buffers). */
        private void take(long bytes) {
            charge(bytes);
            charged += bytes;
        }

        /** Takes what {@code in} holds of this frame; {@code inPlace}: {@code in} wraps the current page's room. */
        void consume(ChannelHandlerContext ctx, ByteBuf in, boolean inPlace) {
            if (table == null) {
                collectTable(ctx, in);
                return;
            }
            deliver(ctx, in, inPlace);
        }

        private void collectTable(ChannelHandlerContext ctx, ByteBuf in) {
            int frameEnd = 4 + length;
            int n = Math.min(in.readableBytes(), frameEnd - prefix.writerIndex());
            take(n);
            prefix.writeBytes(in, n);
            WriteRequest.Put.Table t = null;
            if (prefix.writerIndex() > HEAD_BYTES) {
                try {
                    t = decoder.putTable(prefix.slice(HEAD_BYTES, prefix.writerIndex() - HEAD_BYTES));
                } catch (RuntimeException notYet) { // not all here yet, or malformed: more bytes tell
                }
            }
            int tableEnd = t == null ? -1 : HEAD_BYTES + t.tableBytes();
            if (t == null || tableEnd + t.bodyBytes() != frameEnd) {
                if (prefix.writerIndex() == frameEnd || prefix.writerIndex() >= MAX_TABLE_BYTES || t != null) {
                    passOn(ctx); // whole, or no table to be had: the handler judges it
                }
                return;
            }
            if (!anyWorthLanding(t)) {
                passOn(ctx); // only small pages: buffered whole, as before
                return;
            }
            table = t;
            int flags = decoder.flags(prefix.getUnsignedByte(4 + 1)); // after the length field and the op
            summing = slabSum != null || (flags & WriteRequest.Put.UNCHECKED) == 0;
            bodyLeft = t.bodyBytes();
            rooms = new Room[t.keys().size()];
            bodies = new CompositeByteBuf[t.keys().size()];
            wireSums = new int[t.keys().size()];
            slabSums = new int[t.keys().size()];
            // Bytes of the first bodies that came with the table: copied once, as memcached copies from its buffer.
            int early = prefix.writerIndex() - tableEnd;
            budget.giveBack(early); // charged again as they are delivered
            charged -= early;
            ByteBuf bodyStart = prefix.retainedSlice(tableEnd, early);
            prefix.writerIndex(tableEnd);
            try {
                deliver(ctx, bodyStart, false); // finishes the frame if its bodies all came with the table
            } finally {
                bodyStart.release();
            }
        }

        private boolean anyWorthLanding(WriteRequest.Put.Table t) {
            for (int len : t.lengths()) {
                if (len >= MIN_LANDED_PAGE_BYTES && len <= config.maxPageBytes()) {
                    return true;
                }
            }
            return false;
        }

        /**
         * Decides where page {@code i}'s body goes, as its first byte is due: a room if it is worth one and one is free
         * without eviction. Taken late, so that a frame that stalls holds no room for pages it has not begun; the
         * rooms of pages received stay taken until the frame is whole or its connection goes (bounded, with the
         * bytes, by the partial-frame budget).
         */
        private void decide(int i) {
            WriteRequest.Put.Table t = table;
            Room[] r = rooms;
            if (i < decided || t == null || r == null) {
                return;
            }
            int len = t.lengths()[i];
            StoreKey key = t.keys().get(i);
            if (len >= MIN_LANDED_PAGE_BYTES
                    && len <= config.maxPageBytes()
                    && !cache.pages.contains(key)
                    && cache.writes.room(key, len, EvictionChoice.NONE) instanceof Room room) {
                r[i] = room;
            }
            decided = i + 1;
        }

        /** Copies (or, in place, counts) bodies' bytes from {@code in}; finishes the frame after its last. */
        private void deliver(ChannelHandlerContext ctx, ByteBuf in, boolean inPlace) {
            WriteRequest.Put.Table t = table;
            Room[] r = rooms;
            CompositeByteBuf[] b = bodies;
            if (t == null || r == null || b == null) {
                throw new IllegalStateException("bodies before the table");
            }
            int pages = t.keys().size();
            while (in.isReadable() && page < pages) {
                decide(page);
                int len = t.lengths()[page];
                int n = Math.min(in.readableBytes(), len - filled);
                take(n);
                Room room = r[page];
                if (room != null) {
                    MemorySegment landed = cache.space.bytes(room).asSlice(filled, n);
                    if (inPlace) {
                        cache.counters.landedInPlaceBytes.add(n);
                    } else {
                        MemorySegment.copy(MemorySegment.ofBuffer(in.nioBuffer(in.readerIndex(), n)), 0, landed, 0, n);
                    }
                    if (summing) {
                        sum(landed);
                    }
                    in.skipBytes(n);
                } else {
                    CompositeByteBuf body = b[page];
                    if (body == null) {
                        body = ctx.alloc().compositeDirectBuffer(Integer.MAX_VALUE);
                        b[page] = body;
                    }
                    body.addComponent(true, in.readRetainedSlice(n)); // the read's buffer, kept as it came
                }
                filled += n;
                bodyLeft -= n;
                if (filled == len) {
                    if (room != null && summing) {
                        sumsOf(page);
                    }
                    page++;
                    filled = 0;
                }
            }
            if (page == pages) {
                finish(ctx);
            }
        }

        /** Adds bytes just landed (still in this core's cache) to the current page's checksums. */
        private void sum(MemorySegment landed) {
            wireSum.update(landed.asByteBuffer());
            if (slabSum != null) {
                slabSum.update(landed.asByteBuffer());
            }
        }

        /** The whole page {@code i}'s checksums, kept for its commit; the running ones start again. */
        private void sumsOf(int i) {
            int[] w = wireSums;
            int[] c = slabSums;
            if (w == null || c == null) {
                throw new IllegalStateException("a page before the table");
            }
            w[i] = (int) wireSum.getValue();
            c[i] = slabSum == null ? w[i] : (int) slabSum.getValue();
            wireSum.reset();
            if (slabSum != null) {
                slabSum.reset();
            }
        }

        /** The current page's room, where the next read may land: null if it has none (or all are in). */
        @Nullable
        MemorySegment roomAhead() {
            WriteRequest.Put.Table t = table;
            Room[] r = rooms;
            if (t == null || r == null || page >= t.keys().size()) {
                return null;
            }
            decide(page);
            Room room = r[page];
            if (room == null) {
                return null;
            }
            MemorySegment rest = cache.space.bytes(room).asSlice(filled);
            return rest.byteSize() <= LAND_READ_BYTES ? rest : rest.asSlice(0, LAND_READ_BYTES);
        }

        /** Bytes of the frame collected so far while its table is read. */
        int collected() {
            return prefix.writerIndex();
        }

        /** Whether the table is still being collected. */
        boolean collectingTable() {
            return table == null;
        }

        /** Bytes still to come of the frame. */
        long remaining() {
            return table == null ? 4L + length - prefix.writerIndex() : bodyLeft;
        }

        /** The frame is whole: on to the decoder and the handler as a {@link LandedPut}. */
        private void finish(ChannelHandlerContext ctx) {
            WriteRequest.Put.Table t = table;
            Room[] r = rooms;
            CompositeByteBuf[] b = bodies;
            int[] w = wireSums;
            int[] c = slabSums;
            if (t == null || r == null || b == null || w == null || c == null) {
                throw new IllegalStateException("finished before the table");
            }
            landing = null;
            budget.giveBack(charged); // a whole frame: the handler accounts for it from here, as for any frame
            charged = 0;
            LandedFrame frame = new LandedFrame(ctx.alloc(), r.length + 1, cache.space, r, summing ? w : null, c);
            frame.addComponent(true, prefix.retainedSlice(4, prefix.writerIndex() - 4));
            prefix.release();
            for (int i = 0; i < r.length; i++) {
                Room room = r[i];
                CompositeByteBuf body = b[i];
                b[i] = null;
                if (room != null) {
                    frame.addComponent(
                            true, Unpooled.wrappedBuffer(cache.space.bytes(room).asByteBuffer()));
                } else if (body != null) {
                    frame.addComponent(true, body);
                }
            }
            ctx.fireChannelRead(new LandedPut(frame));
        }

        /** Gives up landing: what was collected goes on as the frame's start, and the rest follows untouched. */
        private void passOn(ChannelHandlerContext ctx) {
            landing = null;
            budget.giveBack(charged);
            charged = 0;
            passRemaining = 4L + length - prefix.writerIndex();
            ctx.fireChannelRead(prefix);
        }

        /** The connection went with the frame half here: rooms freed, buffers released. */
        void abandon() {
            budget.giveBack(charged);
            charged = 0;
            prefix.release();
            Room[] r = rooms;
            if (r != null) {
                for (Room room : r) {
                    if (room != null) {
                        cache.space.free(room);
                    }
                }
            }
            CompositeByteBuf[] b = bodies;
            if (b != null) {
                for (CompositeByteBuf body : b) {
                    if (body != null) {
                        body.release();
                    }
                }
            }
        }
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (ctx.channel().config().getRecvByteBufAllocator() instanceof Allocator a) {
            a.lander = null;
        }
        Landing l = landing;
        landing = null;
        if (l != null) {
            l.abandon();
        }
        head.release();
    }

    private ByteBuf nextBuffer(ByteBufAllocator alloc) {
        if (bypass || refused) {
            return alloc.directBuffer(PASS_READ_BYTES);
        }
        Landing l = landing;
        if (l != null && !bypass && !refused) {
            MemorySegment room = l.roomAhead();
            if (room != null) {
                handedOut = Unpooled.wrappedBuffer(room.asByteBuffer()).clear();
                return handedOut;
            }
            // A table is read in small reads first (the bodies after it should land in place); one that has not
            // parsed within them is large or malformed: read on at full size, as the frame decoder would.
            boolean smallReads = l.collectingTable() && l.collected() < HEAD_READ_BYTES;
            return alloc.directBuffer(
                    (int) Math.max(1024, Math.min(l.remaining(), smallReads ? HEAD_READ_BYTES : PASS_READ_BYTES)));
        }
        if (passRemaining > 0) {
            return alloc.directBuffer((int) Math.max(1024, Math.min(passRemaining, PASS_READ_BYTES)));
        }
        return alloc.directBuffer(HEAD_READ_BYTES);
    }

    /**
     * The receive buffer allocator of a connection that may land PUTs: installed when the channel starts (Netty keeps a
     * channel's allocator handle from its first read on, so one set later would never be asked), it hands out what the
     * connection's {@link PutLander} chooses once the lander is in the pipeline, and plain buffers before (the HELLO).
     * Used on the channel's event loop only.
     */
    static final class Allocator extends DefaultMaxMessagesRecvByteBufAllocator {
        private @Nullable PutLander lander;

        Allocator() {
            super(16);
        }

        // Netty's signature still names the deprecated Handle; what is returned is an ExtendedHandle, as epoll needs
        @Override
        @SuppressWarnings("deprecation")
        public Handle newHandle() {
            return new MaxMessageHandle() {
                @Override
                public ByteBuf allocate(ByteBufAllocator alloc) {
                    PutLander l = lander;
                    return l == null ? alloc.directBuffer(HEAD_READ_BYTES) : l.nextBuffer(alloc);
                }

                @Override
                public int guess() {
                    return HEAD_READ_BYTES;
                }
            };
        }
    }

    /** A PUT frame whose bodies lie in their rooms: passed through the frame decoder, which buffers only bytes. */
    record LandedPut(LandedFrame frame) {}

    /**
     * The frame of a landed PUT (header, table, bodies): the rooms' memory where a page has one, with the checksums its
     * bytes had as they landed (no one writes into a room between its landing and its commit), unless the PUT was
     * stored unchecked. Released, it frees the rooms its PUT did not take ({@link #take}).
     */
    static final class LandedFrame extends CompositeByteBuf {
        private final SlabSpace space;
        private final Room[] rooms;
        private final int @Nullable [] wireSums;
        private final int[] slabSums;

        LandedFrame(
                ByteBufAllocator alloc,
                int components,
                SlabSpace space,
                Room[] rooms,
                int @Nullable [] wireSums,
                int[] slabSums) {
            super(alloc, true, components);
            this.space = space;
            this.rooms = rooms;
            this.wireSums = wireSums;
            this.slabSums = slabSums;
        }

        /** The checksum (the connection's) that page {@code i}'s body had as it landed in its room. */
        int wireSum(int i) {
            int[] w = wireSums;
            if (w == null) {
                throw new IllegalStateException("the bodies of an unchecked PUT were not summed");
            }
            return w[i];
        }

        /** The CRC-32C, what the slab keeps, that page {@code i}'s body had as it landed in its room. */
        int slabSum(int i) {
            return slabSums[i];
        }

        /** Page {@code i}'s room, now the caller's to commit or free; null if it had none or it was taken. */
        @Nullable
        Room take(int i) {
            Room r = rooms[i];
            rooms[i] = null;
            return r;
        }

        @Override
        protected void deallocate() {
            for (int i = 0; i < rooms.length; i++) {
                Room r = take(i);
                if (r != null) {
                    space.free(r);
                }
            }
            super.deallocate();
        }
    }
}
