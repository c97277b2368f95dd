package io.hicache.transfer;

import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.TransportLink;
import io.hicache.transfer.tcp.ClientConnection;
import io.hicache.transfer.tcp.Frames;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;

/**
 * A peer's segment, opened with {@link TransferEngine#openSegment}: its descriptor, the transport chosen for it,
 * and a control connection that carries messages and heartbeats. Three unanswered heartbeats, or the control
 * connection closing, declare the peer dead: its batches fail and {@link #onDeath} callbacks run.
 *
 * <p>Thread-safe. Closed by its opener (or by the engine when the engine closes).
 */
public final class RemoteSegment implements PeerContext, AutoCloseable {
    private final TransferEngine engine;
    private final ClientConnection control;
    private final ScheduledFuture<?> heartbeat;
    private final long heartbeatMillis;
    private final CopyOnWriteArrayList<Runnable> deathListeners = new CopyOnWriteArrayList<>();
    private volatile SegmentDescriptor descriptor;
    private volatile TransportLink link;
    private volatile String transport;
    private volatile long lastAnswerNanos = System.nanoTime();
    private volatile String deathReason;

    RemoteSegment(TransferEngine engine, ClientConnection control, SegmentDescriptor descriptor,
            ScheduledExecutorService timer, long heartbeatMillis) {
        this.engine = engine;
        this.control = control;
        this.descriptor = descriptor;
        this.heartbeatMillis = heartbeatMillis;
        this.heartbeat = timer.scheduleWithFixedDelay(this::beat, heartbeatMillis, heartbeatMillis,
                TimeUnit.MILLISECONDS);
    }

    void attach(String transportName, TransportLink transportLink) {
        this.transport = transportName;
        this.link = transportLink;
    }

    @Override
    public SegmentDescriptor remote() {
        return descriptor;
    }

    /** The peer's name. */
    public String name() {
        return descriptor.name();
    }

    /** The transport chosen for this peer. */
    public String transport() {
        return transport;
    }

    TransportLink link() {
        return link;
    }

    @Override
    public boolean alive() {
        return deathReason == null;
    }

    @Override
    public String deathReason() {
        return deathReason;
    }

    /** Runs {@code callback} once when the peer is declared dead (at once if it already is). */
    public void onDeath(Runnable callback) {
        deathListeners.add(callback);
        if (!alive() && deathListeners.remove(callback)) {
            callback.run();
        }
    }

    /**
     * Fetches the descriptor again, for regions the peer registered after it was opened.
     *
     * @throws TransferException when the peer does not answer within {@code timeout}
     */
    public SegmentDescriptor refresh(Duration timeout) {
        try {
            byte[] answer = control.request(Frames.DESCRIBE).get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            descriptor = SegmentDescriptor.decode(answer);
            return descriptor;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw TransferException.unavailable("interrupted while describing " + name());
        } catch (ExecutionException | TimeoutException e) {
            throw TransferException.unavailable("segment " + name() + " did not describe itself within "
                    + timeout.toMillis() + " ms: " + e.getMessage());
        }
    }

    /**
     * Sends a message to the peer's {@link MessageListener}, in order with other messages to it. Fire and forget:
     * a dead peer loses it, which {@link #onDeath} reports.
     */
    public void send(byte[] payload) {
        if (alive()) {
            control.message(payload);
        }
    }

    private void beat() {
        if (!alive()) {
            return;
        }
        if (!control.isOpen()) {
            die("control connection closed (" + control.closeReason() + ")");
            return;
        }
        long silentMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastAnswerNanos);
        if (silentMillis > 3 * heartbeatMillis) {
            die("no heartbeat answer for " + silentMillis + " ms");
            return;
        }
        control.request(Frames.PING).whenComplete((ok, error) -> {
            if (error == null) {
                lastAnswerNanos = System.nanoTime();
            }
        });
    }

    /** Declares the peer dead (first reason wins) and tells the listeners. */
    void die(String reason) {
        synchronized (this) {
            if (deathReason != null) {
                return;
            }
            deathReason = reason;
        }
        heartbeat.cancel(false);
        control.close(reason);
        for (Runnable r : deathListeners) {
            deathListeners.remove(r);
            try {
                r.run();
            } catch (RuntimeException e) {
                java.util.logging.Logger.getLogger(RemoteSegment.class.getName()).log(
                        java.util.logging.Level.WARNING, "a death listener of " + name() + " failed", e);
            }
        }
    }

    /** Closes the link and the control connection; batches still running fail. Idempotent. */
    @Override
    public void close() {
        die("closed by this engine");
        TransportLink l = link;
        if (l != null) {
            l.close();
        }
        engine.forget(this);
    }

    @Override
    public String toString() {
        return "segment " + descriptor.name() + " at " + descriptor.address() + " over " + transport;
    }
}
