package io.hicache.transfer;

import io.hicache.transfer.control.ControlClient;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportLink;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A peer's segment, opened with {@link TransferEngine#openSegment}: its descriptor, the transport chosen for it,
 * and a control connection that carries messages and heartbeats. Three unanswered heartbeats, or the control
 * connection closing, declare the peer dead: its batches fail and {@link #onDeath} callbacks run.
 *
 * <p>Thread-safe. Closed by its opener (or by the engine when the engine closes).
 */
public final class RemoteSegment implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RemoteSegment.class.getName());

    private final TransferEngine engine;
    private final ControlClient control;
    private final PeerContext peer = new Peer();
    private final CopyOnWriteArrayList<Runnable> deathListeners = new CopyOnWriteArrayList<>();
    private volatile SegmentDescriptor descriptor;
    /** The linked transports, in the engine's preference; the first is the primary (host memory) link. */
    private final CopyOnWriteArrayList<Linked> links = new CopyOnWriteArrayList<>();

    private volatile @Nullable String deathReason;

    RemoteSegment(TransferEngine engine, ControlClient control, SegmentDescriptor descriptor) {
        this.engine = engine;
        this.control = control;
        this.descriptor = descriptor;
    }

    /** Adds a linked transport: the primary (host memory) one first, the others in the order attached. */
    void attach(String transportName, Transport transport, TransportLink transportLink, boolean primary) {
        Linked linked = new Linked(transportName, transport, transportLink);
        if (primary) {
            links.add(0, linked);
        } else {
            links.add(linked);
        }
    }

    /** A transport linked to this peer. */
    record Linked(String name, Transport transport, TransportLink link) {}

    /** The peer's published segment, as last fetched. */
    public SegmentDescriptor remote() {
        return descriptor;
    }

    /** The peer's name. */
    public String name() {
        return descriptor.name();
    }

    /** The transport chosen for this peer's host memory (the first linked), or null before one is linked. */
    public @Nullable String transport() {
        return links.isEmpty() ? null : links.get(0).name();
    }

    /** Every transport linked to this peer, in the engine's preference. */
    public List<String> transports() {
        return links.stream().map(Linked::name).toList();
    }

    /**
     * The transport that moves requests between local memory of kind {@code local} and the peer's regions of kind
     * {@code remote}, if one is linked: what a caller checks before it sends device memory directly (else it stages
     * through host memory).
     */
    public Optional<String> transportFor(MemoryKind local, MemoryKind remote) {
        return linkFor(local, remote).map(Linked::name);
    }

    Optional<Linked> linkFor(MemoryKind local, MemoryKind remote) {
        for (Linked l : links) {
            if (l.transport().moves(local, remote)) {
                return Optional.of(l);
            }
        }
        return Optional.empty();
    }

    /** The primary link, or null before one is linked. */
    @Nullable
    TransportLink link() {
        return links.isEmpty() ? null : links.get(0).link();
    }

    /** The peer as its transport link sees it. */
    PeerContext peer() {
        return peer;
    }

    /** Whether the peer is considered alive (its control connection answers heartbeats). */
    public boolean alive() {
        return deathReason == null;
    }

    /** Why the peer is considered dead, or null while it is alive. */
    public @Nullable String deathReason() {
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
            byte[] answer = control.describe().get(timeout.toNanos(), TimeUnit.NANOSECONDS);
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

    /** Declares the peer dead (first reason wins) and tells the listeners. */
    void die(String reason) {
        synchronized (this) {
            if (deathReason != null) {
                return;
            }
            deathReason = reason;
        }
        control.close(reason);
        for (Runnable r : deathListeners) {
            deathListeners.remove(r);
            try {
                r.run();
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "a death listener of " + name() + " failed", e);
            }
        }
    }

    /** Closes the link and the control connection; batches still running fail. Idempotent. */
    @Override
    public void close() {
        die("closed by this engine");
        for (Linked l : links) {
            l.link().close();
        }
        engine.forget(this);
    }

    @Override
    public String toString() {
        return "segment " + descriptor.name() + " at " + descriptor.address() + " over " + transports();
    }

    /** What the transport link learns about the peer. */
    private final class Peer implements PeerContext {
        @Override
        public SegmentDescriptor remote() {
            return descriptor;
        }

        @Override
        public boolean alive() {
            return RemoteSegment.this.alive();
        }

        @Override
        public @Nullable String deathReason() {
            return deathReason;
        }
    }
}
