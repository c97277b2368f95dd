package io.hicache.transfer.ucx;

import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.openucx.jucx.UcxCallback;
import org.openucx.jucx.UcxException;
import org.openucx.jucx.ucp.UcpEndpoint;
import org.openucx.jucx.ucp.UcpEndpointParams;
import org.openucx.jucx.ucp.UcpRemoteKey;
import org.openucx.jucx.ucp.UcpRequest;

/**
 * One link's endpoint on one {@link UcxLoop}: its slices waiting and in flight, the remote keys it unpacked and the
 * fences it read. Every method but construction runs on the loop's thread.
 *
 * <p>Reads and writes are issued as UCX's implicit operations and are done when a flush of the endpoint after them
 * completed: for a write, UCX's own completion says only that its buffer may be reused, the flush that the peer
 * applied it; for a read, that its bytes arrived. A failed
 * endpoint (UCX's error handler, a request that failed, no completion within the slice timeout, an abandoned slice) is
 * closed at once, its slices retried on a new endpoint while they have retries, wanted, and the peer lives.
 */
final class UcxLane {
    private static final System.Logger LOG = System.getLogger(UcxLane.class.getName());
    /** Slices moved to a new endpoint after theirs failed, in this process: for tests and diagnostics. */
    private static final AtomicLong RETRIED = new AtomicLong();

    /** One slice's journey on this lane. */
    static final class Op {
        final Slice slice;
        final Fence fence;
        final long enqueuedNanos = System.nanoTime();
        long issuedNanos;
        int attempt;

        boolean finished;

        Op(Slice slice, Fence fence) {
            this.slice = slice;
            this.fence = fence;
        }

        long bytes() {
            return slice.local().byteSize();
        }
    }

    /** The check, once per submission and region, that the region is still registered. */
    static final class Fence {
        static final int NEW = 0;
        static final int PENDING = 1;
        static final int PASSED = 2;
        static final int FAILED = 3;

        final RegionDescriptor region;
        int state = NEW;
        long sentNanos;
        long passedNanos;

        @Nullable
        String reason;

        Fence(RegionDescriptor region) {
            this.region = region;
        }
    }

    /** The UCX keys a region published. */
    private record RegionKeys(String rkey, long addr, int slot, long token) {}

    private final UcxLink link;
    private final UcxLoop loop;
    private final String remoteWorker;
    private final ArrayDeque<Op> waiting = new ArrayDeque<>();
    private final LinkedHashMap<Slice, Op> inFlight = new LinkedHashMap<>();
    private final List<Op> unflushed = new ArrayList<>();
    private final List<Fence> pendingFences = new ArrayList<>();
    private final Map<Integer, UcpRemoteKey> rkeys = new HashMap<>();
    private final Map<Integer, String> rkeyStrings = new HashMap<>();
    private long inFlightBytes;
    private long unflushedBytes;

    @Nullable
    private UcpEndpoint ep;

    @Nullable
    private UcpRemoteKey fenceKey;

    private int epGeneration;
    private long retryAtNanos;
    /** Since when this lane has had no endpoint (reset whenever one opens). */
    private long noEndpointSinceNanos = System.nanoTime();

    private long backoffMillis = 20;

    @Nullable
    private String lastError;

    private boolean closed;

    UcxLane(UcxLink link, UcxLoop loop, String remoteWorker) {
        this.link = link;
        this.loop = loop;
        this.remoteWorker = remoteWorker;
    }

    UcxLoop loop() {
        return loop;
    }

    /** Loop thread: joins the loop and connects at once, so the log says which UCX transports carry the peer. */
    void attach() {
        loop.attach(this);
        if (!closed) {
            ensureEndpoint();
        }
    }

    /** Takes the slices of one submission for this lane, with their fences. */
    void enqueue(List<Op> ops) {
        if (closed) {
            ops.forEach(o -> finish(o, "the link to " + link.peerName() + " is closed"));
            return;
        }
        waiting.addAll(ops);
        pump();
    }

    /** Issues what the window and the fences allow. */
    void pump() {
        if (closed) {
            return;
        }
        if (!link.peer().alive()) {
            failEverything(
                    "peer " + link.peerName() + " is dead: " + link.peer().deathReason());
            return;
        }
        for (Iterator<Op> it = waiting.iterator(); it.hasNext(); ) {
            Op op = it.next();
            if (!op.slice.wanted()) {
                it.remove();
                finish(op, "not wanted any more");
                continue;
            }
            if (inFlightBytes >= link.windowBytes() || !ensureEndpoint()) {
                break;
            }
            Fence f = op.fence;
            if (f.state == Fence.PASSED && System.nanoTime() - f.passedNanos > link.fenceValidNanos()) {
                f.state = Fence.NEW; // old news: the region may have closed since (the owner waits only so long)
            }
            if (f.state == Fence.NEW) {
                sendFence(f);
            }
            if (f.state == Fence.FAILED) {
                it.remove();
                finish(op, f.reason);
            } else if (f.state == Fence.PASSED) {
                it.remove();
                issue(op);
            }
            if (ep == null) {
                break; // issuing broke the endpoint
            }
        }
        flush();
    }

    private boolean ensureEndpoint() {
        if (ep != null) {
            return true;
        }
        if (System.nanoTime() - retryAtNanos < 0) {
            return false;
        }
        int generation = ++epGeneration;
        try {
            UcpEndpoint e = loop.worker()
                    .newEndpoint(new UcpEndpointParams()
                            .setUcpAddress(UcxTransport.unhex(remoteWorker))
                            .setPeerErrorHandlingMode()
                            .setErrorHandler((endpoint, status, message) -> {
                                link.sawPeerFailure(status);
                                endpointFailed(generation, "ucx endpoint failed: " + message);
                            }));
            ep = e;
            fenceKey = e.unpackRemoteKey(UcxTransport.unhex(link.fenceRkey()));
            noEndpointSinceNanos = System.nanoTime();
            backoffMillis = 20;
            if (link.announce()) {
                List<String> lanes = UcxNative.lanes(e.getNativeId());
                LOG.log(
                        Level.INFO,
                        () -> "ucx: " + link.engineName() + " reaches " + link.peerName() + " from "
                                + Thread.currentThread().getName() + " over " + lanes);
            }
            return true;
        } catch (UcxException | IllegalArgumentException e) {
            lastError = "cannot connect to " + link.peerName() + " over ucx: " + e.getMessage();
            closeEndpoint();
            retryAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoffMillis);
            backoffMillis = Math.min(1_000, backoffMillis * 2);
            return false;
        }
    }

    private @Nullable RegionKeys keys(RegionDescriptor region) {
        Map<String, String> k = region.keysOf(UcxTransport.NAME);
        String rkey = k.get("rkey");
        if (rkey == null) {
            return null;
        }
        try {
            RegionKeys keys = new RegionKeys(
                    rkey,
                    Long.parseLong(k.get("addr")),
                    Integer.parseInt(k.get("slot")),
                    Long.parseLong(k.get("token")));
            return keys.slot() >= 0 && keys.slot() < UcxTransport.FENCE_SLOTS ? keys : null;
        } catch (RuntimeException e) {
            return null;
        }
    }

    private void sendFence(Fence f) {
        RegionKeys k = keys(f.region);
        if (k == null) {
            f.state = Fence.FAILED;
            f.reason = "region " + f.region.name() + " of " + link.peerName() + " publishes no ucx keys";
            return;
        }
        MemorySegment buf = loop.takeFenceBuffer();
        if (buf == null) {
            return; // all fence buffers are out: stays NEW, sent on a later pump
        }
        f.state = Fence.PENDING;
        f.sentNanos = System.nanoTime();
        pendingFences.add(f);
        buf.set(ValueLayout.JAVA_LONG, 0, 0L);
        boolean[] returned = {false};
        Runnable giveBack = () -> {
            if (!returned[0]) { // JUCX may both throw and call onError for a request refused at once
                returned[0] = true;
                loop.giveFenceBuffer(buf);
            }
        };
        int generation = epGeneration;
        UcpEndpoint e = ep;
        UcpRemoteKey fk = fenceKey;
        if (e == null || fk == null) {
            f.state = Fence.NEW;
            pendingFences.remove(f);
            giveBack.run();
            return;
        }
        try {
            e.getNonBlocking(
                    link.fenceAddr() + (long) k.slot() * Long.BYTES, fk, buf.address(), Long.BYTES, new UcxCallback() {
                        @Override
                        public void onSuccess(UcpRequest request) {
                            long seen = buf.get(ValueLayout.JAVA_LONG, 0);
                            giveBack.run();
                            if (f.state != Fence.PENDING || generation != epGeneration) {
                                return;
                            }
                            pendingFences.remove(f);
                            if (seen == k.token()) {
                                f.state = Fence.PASSED;
                                f.passedNanos = System.nanoTime();
                            } else {
                                f.state = Fence.FAILED;
                                f.reason = "region " + f.region.name() + " of " + link.peerName() + " was unregistered";
                            }
                            loop.markDirty(UcxLane.this);
                        }

                        @Override
                        public void onError(int status, String message) {
                            link.sawPeerFailure(status);
                            giveBack.run();
                            endpointFailed(generation, "ucx fence read failed: " + message);
                        }
                    });
        } catch (UcxException ex) {
            giveBack.run();
            endpointFailed(generation, "ucx fence read failed: " + ex.getMessage());
        }
    }

    private void issue(Op op) {
        RegionKeys k = keys(op.slice.region());
        if (k == null) {
            finish(op, "region " + op.slice.region().name() + " of " + link.peerName() + " publishes no ucx keys");
            return;
        }
        UcpEndpoint e = ep;
        if (e == null) {
            waiting.addFirst(op);
            return;
        }
        UcpRemoteKey rkey;
        try {
            rkey = rkey(e, op.slice.region().id(), k.rkey());
        } catch (UcxException | IllegalArgumentException ex) {
            finish(
                    op,
                    "cannot unpack the ucx key of region " + op.slice.region().name() + ": " + ex.getMessage());
            return;
        }
        ++op.attempt;
        int generation = epGeneration;
        op.issuedNanos = System.nanoTime();
        inFlight.put(op.slice, op);
        inFlightBytes += op.bytes();
        long local = op.slice.local().address();
        long remote = k.addr() + op.slice.remoteOffset();
        try {
            // implicit operations: no request object or callback per slice; the flush after them completes them all
            if (op.slice.op() == TransferOp.READ) {
                e.getNonBlockingImplicit(remote, rkey, local, op.bytes());
            } else {
                e.putNonBlockingImplicit(local, op.bytes(), remote, rkey);
            }
            unflushed.add(op);
            unflushedBytes += op.bytes();
            if (unflushedBytes >= link.windowBytes() / 4) {
                flush(); // a flush per quarter window: completions come back while the rest still moves
            }
        } catch (UcxException ex) {
            endpointFailed(generation, "ucx " + op.slice.op() + " failed: " + ex.getMessage());
        }
    }

    private UcpRemoteKey rkey(UcpEndpoint e, int regionId, String packed) {
        UcpRemoteKey k = rkeys.get(regionId);
        if (k != null && packed.equals(rkeyStrings.get(regionId))) {
            return k;
        }
        if (k != null) {
            k.close();
        }
        k = e.unpackRemoteKey(UcxTransport.unhex(packed));
        rkeys.put(regionId, k);
        rkeyStrings.put(regionId, packed);
        return k;
    }

    /**
     * A flush after the operations issued since the last one: its completion says every write before it was applied
     * at the peer and every read before it arrived here.
     */
    private void flush() {
        if (unflushed.isEmpty() || ep == null) {
            return;
        }
        List<Op> puts = List.copyOf(unflushed);
        unflushed.clear();
        unflushedBytes = 0;
        int[] attempts = new int[puts.size()];
        for (int i = 0; i < attempts.length; i++) {
            attempts[i] = puts.get(i).attempt;
        }
        int generation = epGeneration;
        try {
            ep.flushNonBlocking(new UcxCallback() {
                @Override
                public void onSuccess(UcpRequest request) {
                    for (int i = 0; i < attempts.length; i++) {
                        Op op = puts.get(i);
                        if (op.attempt == attempts[i] && !op.finished && inFlight.get(op.slice) == op) {
                            completed(op, null);
                        }
                    }
                }

                @Override
                public void onError(int status, String message) {
                    link.sawPeerFailure(status);
                    endpointFailed(generation, "ucx flush failed: " + message);
                }
            });
        } catch (UcxException ex) {
            endpointFailed(generation, "ucx flush failed: " + ex.getMessage());
        }
    }

    private void completed(Op op, @Nullable String failure) {
        if (inFlight.remove(op.slice) == op) {
            inFlightBytes -= op.bytes();
        }
        finish(op, failure);
        loop.markDirty(this);
    }

    private void finish(Op op, @Nullable String failure) {
        if (!op.finished) {
            op.finished = true;
            op.slice.done(failure);
        }
    }

    /** The endpoint of {@code generation} failed: close it; its slices retry elsewhere or fail. */
    private void endpointFailed(int generation, String reason) {
        if (generation != epGeneration || ep == null) {
            return;
        }
        lastError = reason;
        closeEndpoint();
        retryAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoffMillis);
        backoffMillis = Math.min(1_000, backoffMillis * 2);
        List<Op> orphans = new ArrayList<>(inFlight.values());
        inFlight.clear();
        inFlightBytes = 0;
        unflushed.clear();
        unflushedBytes = 0;
        for (Fence f : pendingFences) {
            f.state = Fence.NEW;
        }
        pendingFences.clear();
        List<Op> again = new ArrayList<>();
        for (Op op : orphans) {
            op.fence.state = Fence.NEW; // read the fence again before the retry moves bytes
            op.attempt++; // a late completion of the old attempt is ignored
            if (op.slice.takeRetry() < 0 || !op.slice.wanted() || !link.peer().alive()) {
                finish(op, reason);
            } else {
                again.add(op);
            }
        }
        for (int i = again.size() - 1; i >= 0; i--) {
            waiting.addFirst(again.get(i));
        }
        RETRIED.addAndGet(again.size());
        loop.markDirty(this);
    }

    private void closeEndpoint() {
        UcpEndpoint e = ep;
        if (e != null) {
            noEndpointSinceNanos = System.nanoTime();
        }
        ep = null;
        epGeneration++;
        if (e != null) {
            try {
                e.closeNonBlockingForce(); // cancels what is outstanding; the keys go after it, never under it
            } catch (RuntimeException ex) {
                // already failed: nothing more to release
            }
        }
        rkeys.values().forEach(UcxLane::closeQuietly);
        rkeys.clear();
        rkeyStrings.clear();
        if (fenceKey != null) {
            closeQuietly(fenceKey);
            fenceKey = null;
        }
    }

    private static void closeQuietly(UcpRemoteKey k) {
        try {
            k.close();
        } catch (RuntimeException e) {
            // destroyed with its endpoint
        }
    }

    /** Slices retried on a new endpoint in this process so far. */
    static long retried() {
        return RETRIED.get();
    }

    /** Loop thread: fails the endpoint now, as UCX's error handler would. */
    void failEndpoint(String reason) {
        endpointFailed(epGeneration, reason);
    }

    /** A slice its batch gave up on: closes the endpoint carrying it (which fails or moves the others). */
    void abandon(Slice slice) {
        if (inFlight.containsKey(slice)) {
            endpointFailed(epGeneration, "a slice on it was abandoned by its batch");
        }
    }

    /** Deadlines: slices and fences with no completion within the slice timeout close the endpoint. */
    void sweep() {
        if (closed) {
            return;
        }
        long now = System.nanoTime();
        long timeout = TimeUnit.MILLISECONDS.toNanos(link.sliceTimeoutMillis());
        if (!link.peer().alive()) {
            failEverything(
                    "peer " + link.peerName() + " is dead: " + link.peer().deathReason());
            return;
        }
        boolean stuck = false;
        for (Op op : inFlight.values()) {
            stuck |= now - op.issuedNanos > timeout;
            break; // the first is the oldest
        }
        for (Fence f : pendingFences) {
            stuck |= now - f.sentNanos > timeout;
        }
        if (stuck) {
            endpointFailed(
                    epGeneration,
                    "no completion from " + link.peerName() + " for " + link.sliceTimeoutMillis() + " ms");
        }
        for (Iterator<Op> it = waiting.iterator(); it.hasNext(); ) {
            Op op = it.next();
            if (!op.slice.wanted()) {
                it.remove();
                finish(op, "not wanted any more");
            } else if (ep == null && now - noEndpointSinceNanos > timeout && now - op.enqueuedNanos > timeout) {
                it.remove();
                finish(op, lastError != null ? lastError : "no ucx endpoint to " + link.peerName());
            }
        }
        loop.markDirty(this);
    }

    private void failEverything(String reason) {
        closeEndpoint();
        List<Op> all = new ArrayList<>(inFlight.values());
        all.addAll(waiting);
        inFlight.clear();
        inFlightBytes = 0;
        waiting.clear();
        unflushed.clear();
        unflushedBytes = 0;
        pendingFences.clear();
        for (Op op : all) {
            op.attempt++;
            finish(op, reason);
        }
    }

    /** Ends the lane: every slice it holds fails with {@code reason}. */
    void closeOnLoop(String reason) {
        if (closed) {
            return;
        }
        failEverything(reason);
        closed = true;
        loop.detach(this);
    }
}
