package io.hicache.transfer.ucx;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransportLink;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The UCX path to one peer: a {@link UcxLane} (an endpoint) on each of the transport's loops, the n-th connected to
 * the peer's n-th worker (modulo its count). A submission is cut into contiguous runs, one per lane, starting at a
 * lane that rotates, so one large request is moved by every worker while small ones spread over them.
 *
 * <p>Thread-safe: submissions are handed to the lanes' loop threads. Closing fails what the lanes still hold.
 */
final class UcxLink implements TransportLink {
    private final UcxTransport transport;
    private final PeerContext peer;
    private final long fenceAddr;
    private final String fenceRkey;
    private final UcxLane[] lanes;
    private final AtomicInteger next = new AtomicInteger();
    private final AtomicBoolean announced = new AtomicBoolean();
    /** Open links of this process, so that a test can break their endpoints while the peer lives. */
    private static final Set<UcxLink> OPEN = ConcurrentHashMap.newKeySet();

    private volatile boolean closed;

    UcxLink(UcxTransport transport, PeerContext peer) {
        this.transport = transport;
        this.peer = peer;
        String endpoint =
                peer.remote().endpoint(UcxTransport.NAME).orElseThrow(() -> unavailable("publishes no ucx endpoint"));
        String[] parts = endpoint.split(";");
        if (parts.length != 4 || !parts[0].equals("1") || parts[3].isEmpty()) {
            throw unavailable("publishes a ucx endpoint this version does not read");
        }
        try {
            this.fenceAddr = Long.parseUnsignedLong(parts[1], 16);
        } catch (NumberFormatException e) {
            throw unavailable("publishes a bad ucx fence address");
        }
        this.fenceRkey = parts[2];
        String[] workers = parts[3].split(",");
        List<UcxLoop> loops = transport.loops();
        this.lanes = new UcxLane[loops.size()];
        for (int i = 0; i < lanes.length; i++) {
            UcxLane lane = new UcxLane(this, loops.get(i), workers[i % workers.length]);
            lanes[i] = lane;
            loops.get(i).execute(lane::attach);
        }
        OPEN.add(this);
    }

    /**
     * Fails every endpoint of every open link in this process as UCX's error handler would (tests: the retry path with
     * the peer alive).
     */
    static void failEndpointsForTest(String reason) {
        for (UcxLink link : OPEN) {
            for (UcxLane lane : link.lanes) {
                lane.loop().execute(() -> lane.failEndpoint(reason));
            }
        }
    }

    private HiCacheException unavailable(String what) {
        return new HiCacheException(
                ErrorCode.TRANSFER_UNAVAILABLE, peer.remote().name() + " " + what);
    }

    PeerContext peer() {
        return peer;
    }

    String peerName() {
        return peer.remote().name();
    }

    String engineName() {
        return transport.context().engineName();
    }

    /** A UCX endpoint or request of this link failed with {@code status} (counted unless it was our own cancel). */
    void sawPeerFailure(int status) {
        transport.sawPeerFailure(status);
    }

    /** True once: for the lane that first connects, to log the UCX transports it got. */
    boolean announce() {
        return announced.compareAndSet(false, true);
    }

    long fenceAddr() {
        return fenceAddr;
    }

    String fenceRkey() {
        return fenceRkey;
    }

    long windowBytes() {
        return transport.context().windowBytesPerConnection();
    }

    /** How long a passed fence stays good for issuing: a quarter of the owner's unmap grace. */
    long fenceValidNanos() {
        return Math.max(
                TimeUnit.MILLISECONDS.toNanos(1),
                TimeUnit.MILLISECONDS.toNanos(transport.settings().unmapGraceMillis()) / 4);
    }

    long sliceTimeoutMillis() {
        return transport.context().sliceTimeoutMillis();
    }

    @Override
    public void submit(Slice slice) {
        submitAll(List.of(slice));
    }

    @Override
    public void submitAll(List<? extends Slice> slices) {
        if (slices.isEmpty()) {
            return;
        }
        if (closed) {
            slices.forEach(s -> s.done("the link to " + peerName() + " is closed"));
            return;
        }
        int runs = Math.min(lanes.length, slices.size());
        int per = (slices.size() + runs - 1) / runs;
        int start = Math.floorMod(next.getAndIncrement(), lanes.length);
        for (int r = 0; r * per < slices.size(); r++) {
            UcxLane lane = lanes[(start + r) % lanes.length];
            List<? extends Slice> run = slices.subList(r * per, Math.min(slices.size(), (r + 1) * per));
            Map<Integer, UcxLane.Fence> fences = new HashMap<>();
            List<UcxLane.Op> ops = new ArrayList<>(run.size());
            for (Slice s : run) {
                UcxLane.Fence f = fences.computeIfAbsent(s.region().id(), id -> new UcxLane.Fence(s.region()));
                ops.add(new UcxLane.Op(s, f));
            }
            if (!lane.loop().execute(() -> lane.enqueue(ops))) {
                ops.forEach(o -> o.slice.done("the ucx transport is closed"));
            }
        }
    }

    @Override
    public void abandon(Slice slice) {
        for (UcxLane lane : lanes) {
            lane.loop().execute(() -> lane.abandon(slice));
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        OPEN.remove(this);
        CountDownLatch done = new CountDownLatch(lanes.length);
        for (UcxLane lane : lanes) {
            Runnable closeLane = () -> {
                try {
                    lane.closeOnLoop("the link to " + peerName() + " closed");
                } finally {
                    done.countDown();
                }
            };
            if (lane.loop().onLoop()) {
                closeLane.run(); // closed from a completion callback on that loop: waiting for it would stall
            } else if (!lane.loop().execute(closeLane)) {
                done.countDown(); // the loop stopped: it failed what the lane held when it did
            }
        }
        try {
            done.await(transport.context().connectTimeoutMillis() + 1_000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
