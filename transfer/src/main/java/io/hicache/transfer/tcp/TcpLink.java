package io.hicache.transfer.tcp;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import io.netty.channel.EventLoopGroup;
import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The TCP path to one peer: {@code connectionsPerPeer} connections to the TCP endpoint it published, slices queued
 * here and handed to the connection with the fewest bytes in flight while it is under its window, so a large request
 * is spread over all of them.
 *
 * <p>Health: a connection whose oldest slice has waited longer than the slice timeout is closed; a closed
 * connection's slices move to the others (each slice at most {@code sliceRetries} times) and the connection is
 * reopened with backoff. Slices fail when the peer is dead, when no connection could be had for a slice timeout,
 * or when their retries run out. A sweep on the engine's timer enforces all of this, so nothing waits unbounded.
 *
 * <p>Thread-safe; the queue and slot states are guarded by this object's monitor.
 */
final class TcpLink implements TransportLink {
    private static final System.Logger LOG = System.getLogger(TcpLink.class.getName());

    private final TransportContext context;
    private final PeerContext peer;
    private final EventLoopGroup group;
    private final String host;
    private final int port;
    private final Slot[] slots;
    private final ArrayDeque<Slice> waiting = new ArrayDeque<>();
    private final Map<Slice, DataConnection> carrying = new ConcurrentHashMap<>();
    private final ScheduledFuture<?> sweep;
    private long noConnectionSinceNanos;
    private boolean closed;

    /** One connection position: its connection when up, and when to try again when down. */
    private static final class Slot {
        @Nullable
        DataConnection conn;

        boolean connecting;
        long retryAtNanos;
        long backoffMillis = 50;

        @Nullable
        String lastError;
    }

    TcpLink(TransportContext context, PeerContext peer, EventLoopGroup group) {
        this.context = context;
        this.peer = peer;
        this.group = group;
        String address = peer.remote()
                .endpoint(TcpTransport.NAME)
                .orElseThrow(() -> new HiCacheException(
                        ErrorCode.TRANSFER_UNAVAILABLE, peer.remote().name() + " publishes no tcp endpoint"));
        int colon = address.lastIndexOf(':');
        this.host = address.substring(0, colon);
        this.port = Integer.parseInt(address.substring(colon + 1));
        this.slots = new Slot[context.connectionsPerPeer()];
        for (int i = 0; i < slots.length; i++) {
            slots[i] = new Slot();
        }
        this.noConnectionSinceNanos = System.nanoTime();
        long every = Math.max(5, Math.min(100, context.sliceTimeoutMillis() / 4));
        this.sweep = context.timer().scheduleWithFixedDelay(this::sweepSafely, every, every, TimeUnit.MILLISECONDS);
        synchronized (this) {
            for (int i = 0; i < slots.length; i++) {
                connect(i);
            }
        }
    }

    @Override
    public void submit(Slice slice) {
        synchronized (this) {
            if (!closed) {
                waiting.add(slice);
                slice = null;
            }
        }
        if (slice != null) {
            slice.done("the link to " + peer.remote().name() + " is closed");
            return;
        }
        pump();
    }

    @Override
    public void abandon(Slice slice) {
        DataConnection conn = carrying.get(slice);
        if (conn != null) {
            conn.close("a slice on it was abandoned by its batch");
        }
    }

    /** Hands waiting slices to connections under their window. */
    private void pump() {
        while (true) {
            Slice slice;
            DataConnection target;
            synchronized (this) {
                slice = waiting.peek();
                if (slice == null) {
                    return;
                }
                if (!slice.wanted()) {
                    waiting.poll();
                    target = null;
                } else {
                    target = leastLoaded();
                    if (target == null) {
                        return;
                    }
                    waiting.poll();
                    carrying.put(slice, target);
                }
            }
            if (target == null) {
                slice.done("not wanted any more");
            } else {
                target.send(slice);
            }
        }
    }

    private @Nullable DataConnection leastLoaded() {
        DataConnection best = null;
        long bestBytes = Long.MAX_VALUE;
        for (Slot s : slots) {
            DataConnection c = s.conn;
            if (c != null && c.isOpen()) {
                long inFlight = c.bytesInFlight();
                if (inFlight < context.windowBytesPerConnection() && inFlight < bestBytes) {
                    best = c;
                    bestBytes = inFlight;
                }
            }
        }
        return best;
    }

    private void answered(DataConnection conn, @Nullable Slice slice) {
        if (slice != null) {
            carrying.remove(slice);
        }
        pump();
    }

    private void orphaned(List<Slice> slices, String reason) {
        for (Slice s : slices) {
            carrying.remove(s);
            if (s.takeRetry() < 0 || !s.wanted()) {
                s.done(reason);
            } else {
                synchronized (this) {
                    waiting.addFirst(s);
                }
            }
        }
        pump();
    }

    private void connect(int index) {
        Slot slot = slots[index];
        slot.connecting = true;
        DataConnection.connect(
                        group,
                        host,
                        port,
                        context.connectTimeoutMillis(),
                        context.engineName(),
                        "connection " + index + " to " + peer.remote().name(),
                        this::answered,
                        this::orphaned)
                .whenComplete((conn, error) -> {
                    boolean closeNow;
                    synchronized (this) {
                        slot.connecting = false;
                        closeNow = closed;
                        if (error != null) {
                            slot.lastError = String.valueOf(error.getMessage());
                            slot.retryAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(slot.backoffMillis);
                            slot.backoffMillis = Math.min(2_000, slot.backoffMillis * 2);
                        } else {
                            slot.conn = conn;
                            slot.backoffMillis = 50;
                        }
                    }
                    if (closeNow && conn != null) {
                        conn.close("the link closed");
                    }
                    pump();
                });
    }

    private void sweepSafely() {
        try {
            sweep();
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "transfer link sweep failed; it runs again", e);
        }
    }

    private void sweep() {
        long now = System.nanoTime();
        long timeoutNanos = TimeUnit.MILLISECONDS.toNanos(context.sliceTimeoutMillis());
        List<Slice> failed = new ArrayList<>();
        String failure = null;
        synchronized (this) {
            if (closed) {
                return;
            }
            boolean anyOpen = false;
            for (int i = 0; i < slots.length; i++) {
                Slot s = slots[i];
                DataConnection c = s.conn;
                if (c != null && c.isOpen()) {
                    anyOpen = true;
                    long oldest = c.oldestSentNanos();
                    if (oldest != 0 && now - oldest > timeoutNanos) {
                        c.close("no answer for " + context.sliceTimeoutMillis() + " ms");
                    }
                } else if (!s.connecting && now - s.retryAtNanos >= 0 && peer.alive()) {
                    if (c != null && s.lastError == null) {
                        s.lastError = c.closeReason();
                    }
                    s.conn = null;
                    connect(i);
                }
            }
            if (anyOpen) {
                noConnectionSinceNanos = now;
            }
            if (!peer.alive()) {
                failure = "peer " + peer.remote().name() + " is dead: " + peer.deathReason();
            } else if (!anyOpen && now - noConnectionSinceNanos > timeoutNanos) {
                failure = "no connection to " + host + ":" + port + " for " + context.sliceTimeoutMillis() + " ms ("
                        + slots[0].lastError + ")";
            }
            for (var it = waiting.iterator(); it.hasNext(); ) {
                Slice s = it.next();
                if (failure != null || !s.wanted()) {
                    it.remove();
                    failed.add(s);
                }
            }
        }
        for (Slice s : failed) {
            s.done(failure != null ? failure : "not wanted any more");
        }
        if (failure != null && !peer.alive()) {
            closeConnections("peer is dead");
        }
        pump();
    }

    private void closeConnections(String reason) {
        DataConnection[] conns;
        synchronized (this) {
            conns = new DataConnection[slots.length];
            for (int i = 0; i < slots.length; i++) {
                conns[i] = slots[i].conn;
            }
        }
        for (DataConnection c : conns) {
            if (c != null) {
                c.close(reason);
            }
        }
    }

    @Override
    public void close() {
        List<Slice> left;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            left = List.copyOf(waiting);
            waiting.clear();
        }
        sweep.cancel(false);
        for (Slice s : left) {
            s.done("the link to " + peer.remote().name() + " closed");
        }
        closeConnections("the link closed");
    }
}
