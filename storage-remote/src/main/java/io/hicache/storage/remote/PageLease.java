package io.hicache.storage.remote;

import io.hicache.core.Deadline;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemoteConnection.Reply;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.ReadRequest;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * Pages a same-host client reads in place in the daemon's slab ({@link RemotePageStore#lease}): until the lease is
 * closed or expires, the daemon neither evicts them nor reuses their memory. Each page found was checked against its
 * checksum when the lease was taken; a damaged one is {@link PageStatus#CORRUPT} and has no segment.
 *
 * <p>Thread-safe. The taker closes it, which unmaps the pages (a segment read after that throws) and tells the
 * daemon; a lease not closed ends when it expires or its connection closes. Do not read past the lease's expiry:
 * the daemon may reuse the memory.
 */
public final class PageLease implements AutoCloseable {
    private final RemoteConnection connection;
    private final long id;
    private final PageStatus[] statuses;
    private final MemorySegment[] pages;
    private final Arena arena;
    private final AtomicBoolean closed = new AtomicBoolean();

    private PageLease(RemoteConnection connection, long id, PageStatus[] statuses, MemorySegment[] pages, Arena arena) {
        this.connection = connection;
        this.id = id;
        this.statuses = statuses;
        this.pages = pages;
        this.arena = arena;
    }

    /** Reads a LEASE answer and maps its pages; on failure the lease is released at once. */
    static PageLease read(ByteBuf in, int expected, long pageBytes, RemoteConnection connection, SlabMapping slab) {
        long id = Codec.readLong(in);
        int n = Codec.readCount(in, Answers.LEASE_ANSWER_BYTES, expected);
        if (n != expected) {
            throw new ProtocolException(n + " outcomes for a lease of " + expected + " pages");
        }
        PageStatus[] statuses = new PageStatus[n];
        long[] offsets = new long[n];
        int[] crcs = new int[n];
        long low = Long.MAX_VALUE;
        long high = 0;
        for (int i = 0; i < n; i++) {
            statuses[i] = Wire.status(in.readByte());
            long length = in.readUnsignedInt();
            crcs[i] = in.readInt();
            offsets[i] = in.readLong();
            if (statuses[i] == PageStatus.OK) {
                if (length != pageBytes || offsets[i] < 0) {
                    throw new ProtocolException("lease page " + i + " at " + offsets[i] + " has " + length + " bytes");
                }
                low = Math.min(low, offsets[i]);
                high = Math.max(high, offsets[i] + length);
            }
        }
        Arena arena = Arena.ofShared();
        MemorySegment[] pages = new MemorySegment[n];
        try {
            if (high > 0) {
                MemorySegment span = slab.map(low, high - low, arena);
                for (int i = 0; i < n; i++) {
                    if (statuses[i] == PageStatus.OK) {
                        MemorySegment page = span.asSlice(offsets[i] - low, pageBytes);
                        if (PageChecksum.of(page) != crcs[i]) {
                            statuses[i] = PageStatus.CORRUPT;
                        } else {
                            pages[i] = page;
                        }
                    }
                }
            }
        } catch (RuntimeException e) {
            arena.close();
            release(connection, id);
            throw e;
        }
        return new PageLease(connection, id, statuses, pages, arena);
    }

    /** The daemon's id of this lease; 0 when it took none (every page is then other than OK). */
    public long id() {
        return id;
    }

    public int size() {
        return statuses.length;
    }

    /**
     * OK if page {@code index} is leased; MISS, SIZE_MISMATCH or CORRUPT if not, or REJECTED where the daemon would not
     * lease it (no room in its slab for a page only its L3 had, or this connection holds its
     * {@code server.max-leases-per-connection}): get that page instead.
     */
    public PageStatus status(int index) {
        return statuses[Objects.checkIndex(index, statuses.length)];
    }

    /**
     * Page {@code index}, read-only, in the daemon's memory.
     *
     * @throws IllegalStateException if the page is not leased or the lease is closed
     */
    public MemorySegment page(int index) {
        if (statuses[Objects.checkIndex(index, statuses.length)] != PageStatus.OK) {
            throw new IllegalStateException("page " + index + " is not leased: " + statuses[index]);
        }
        if (closed.get()) {
            throw new IllegalStateException("lease " + id + " is closed");
        }
        return pages[index];
    }

    /** Unmaps the pages and ends the lease at the daemon (without waiting for its answer); idempotent. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            arena.close();
            release(connection, id);
        }
    }

    private static void release(RemoteConnection connection, long id) {
        if (id == 0 || !connection.isActive()) {
            return; // id 0: the daemon took no lease; else it ended the connection's leases when it closed
        }
        connection.send(new ReadRequest.Release(id), Deadline.after(Duration.ofSeconds(10)), new Reply<Boolean>() {
            @Override
            public Boolean answer(ByteBuf in) {
                return true;
            }

            @Override
            public Boolean noAnswer(PageStatus status, @Nullable String detail) {
                return false;
            }
        });
    }
}
