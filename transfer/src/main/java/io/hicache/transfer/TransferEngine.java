package io.hicache.transfer;

import io.hicache.core.Deadline;
import io.hicache.core.HiCacheException;
import io.hicache.core.memory.MappedFiles;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import io.hicache.transfer.control.ControlClient;
import io.hicache.transfer.control.ControlHost;
import io.hicache.transfer.control.ControlPlane;
import io.hicache.transfer.spi.LocalSegment;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.RegisteredRegion;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportProvider;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * The transfer engine: registers memory regions and publishes them as this process's segment; opens peers'
 * segments and moves bytes to and from them in batches of READ and WRITE requests, over the best transport both
 * sides support (shared memory on one host, else TCP). Also carries small messages between engines, which the
 * prefill/decode protocol uses for its control plane.
 *
 * <p>The engine knows its transports only through {@link io.hicache.transfer.spi}: it loads the providers that
 * {@link TransferConfig#transports()} names with {@link ServiceLoader}, so a transport in another jar plugs in without
 * a change here. Peers find each other through the engine's own control listener, which is not a transport.
 *
 * <p>Thread-safe. The opener closes it: closing closes opened segments (their batches fail), stops serving peers,
 * unregisters every region and stops the engine's threads. Every wait inside is bounded by a configured timeout.
 */
public final class TransferEngine implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(TransferEngine.class.getName());

    private final TransferConfig config;
    private final ScheduledExecutorService timer;
    private final ControlPlane control;
    private final Map<String, Transport> transports = new LinkedHashMap<>();
    private final Regions regions;
    private final Router router;
    private final Set<RemoteSegment> opened = ConcurrentHashMap.newKeySet();
    private final Map<String, Integer> inbound = new ConcurrentHashMap<>();
    private final String hostId;
    private volatile MessageListener messages = (from, payload) -> {};
    private volatile boolean closed;

    private TransferEngine(TransferConfig config) {
        this.config = config;
        this.hostId = HostIdentity.id();
        ScheduledThreadPoolExecutor timers =
                new ScheduledThreadPoolExecutor(1, Threads.factory("transfer-timer-" + config.name()));
        timers.setRemoveOnCancelPolicy(true); // a finished batch's timers leave the queue at once (Router)
        this.timer = timers;
        ControlPlane plane = null;
        try {
            plane = ControlPlane.start(config.name(), config.bindHost(), config.port(), new Host());
            Map<String, TransportProvider> providers = new LinkedHashMap<>();
            for (TransportProvider p :
                    ServiceLoader.load(TransportProvider.class, TransferEngine.class.getClassLoader())) {
                providers.putIfAbsent(p.name(), p);
            }
            TransportContext context = new TransportContext(
                    config.name(),
                    config.bindHost(),
                    config.ioThreads(),
                    config.connectionsPerPeer(),
                    config.windowBytesPerConnection(),
                    config.sliceTimeoutMillis(),
                    config.connectTimeoutMillis(),
                    config.shmDir(),
                    timer,
                    new Served(),
                    config.transportOptions());
            for (String name : config.transports()) {
                TransportProvider p = providers.get(name);
                if (p == null) {
                    throw new IllegalArgumentException(
                            "transfer: unknown transport '" + name + "'; known: " + providers.keySet());
                }
                transports.put(name, p.create(context));
            }
        } catch (RuntimeException e) {
            if (plane != null) {
                plane.close();
            }
            transports.values().forEach(Transport::close);
            timer.shutdownNow();
            throw translate(e);
        }
        this.control = plane;
        this.regions = new Regions(this, transports);
        this.router = new Router(config, timer, regions);
    }

    /**
     * A transport's or the control plane's failure as the engine reports it: a {@link TransferException} with the
     * same code. Bad arguments stay {@link IllegalArgumentException}s.
     */
    static RuntimeException translate(RuntimeException e) {
        if (e instanceof HiCacheException h && !(e instanceof TransferException)) {
            // a HiCacheException is always built with a message
            String message = Checks.checkNotNull(h.getMessage(), "a HiCacheException's message");
            return new TransferException(h.code(), message, h);
        }
        return e;
    }

    /**
     * Why the transport named {@code name} cannot run in this process: no provider of that name on the class path, or
     * its provider's {@link TransportProvider#unavailableReason}; empty when it can.
     */
    public static Optional<String> unavailable(String name) {
        for (TransportProvider p : ServiceLoader.load(TransportProvider.class, TransferEngine.class.getClassLoader())) {
            if (p.name().equals(name)) {
                return p.unavailableReason();
            }
        }
        return Optional.of(
                "no transport named '" + name + "' on the class path (its module, e.g. hicache-transfer-cuda "
                        + "for cuda-ipc, is not a dependency)");
    }

    /** Starts an engine: binds its listener and creates its transports. */
    public static TransferEngine open(TransferConfig config) {
        return new TransferEngine(config);
    }

    /** The configuration. */
    public TransferConfig config() {
        return config;
    }

    /** {@code host:port} of the control listener, which is how peers open this segment. */
    public String address() {
        return config.bindHost() + ":" + control.port();
    }

    /** The segment as peers see it now. */
    public SegmentDescriptor descriptor() {
        Map<String, String> endpoints = new LinkedHashMap<>();
        for (Transport t : transports.values()) {
            if (!t.endpoint().isEmpty()) {
                endpoints.put(t.name(), t.endpoint());
            }
        }
        return new SegmentDescriptor(
                config.name(),
                address(),
                hostId,
                ProcessHandle.current().pid(),
                List.copyOf(transports.keySet()),
                endpoints,
                regions.descriptors());
    }

    /** Regions registered now. */
    public List<LocalRegion> regions() {
        return regions.all();
    }

    /**
     * Registers memory the caller owns (host slab slots, a device pool's host-visible memory, aux buffers) under
     * {@code name}. The caller keeps it alive until the region is closed.
     *
     * @throws IllegalArgumentException when the name is taken or the memory is empty
     */
    public LocalRegion register(String name, MemorySegment memory) {
        return regions.add(name, memory, MemoryKind.HOST, Optional.empty(), () -> {});
    }

    /**
     * Registers device memory the caller owns ({@code bytes} at the device's unified address {@code address}, e.g.
     * a CUDA KV pool) under {@code name}. Only transports that move device memory ({@link Transport#moves}) register
     * and reach it; requests between it and a peer that no linked transport can move are refused with the reason.
     * The returned region's {@link LocalRegion#memory()} carries the address and length only: local requests slice
     * it to name device ranges, nothing may dereference it. The caller keeps the memory allocated until the region
     * is closed.
     *
     * @throws IllegalArgumentException when the name is taken, the range is empty, or no configured transport moves
     *     device memory
     * @throws TransferException when a transport cannot export it
     */
    @SuppressWarnings("restricted") // an address token: the engine and host transports never dereference it
    public LocalRegion registerDevice(String name, long address, long bytes) {
        requireOpen();
        if (address == 0 || bytes <= 0) {
            throw new IllegalArgumentException("device region " + name + " needs an address and bytes > 0, got 0x"
                    + Long.toHexString(address) + " and " + bytes);
        }
        if (!movesDeviceMemory()) {
            throw new IllegalArgumentException("device region " + name + ": none of the transports "
                    + transports.keySet() + " moves device memory");
        }
        return regions.add(
                name,
                MemorySegment.ofAddress(address).reinterpret(bytes),
                MemoryKind.DEVICE,
                Optional.empty(),
                () -> {});
    }

    /** Whether one of this engine's transports moves device memory, so that {@link #registerDevice} can take a region. */
    public boolean movesDeviceMemory() {
        return transports.values().stream().anyMatch(Regions::movesDevice);
    }

    /**
     * Creates a region of {@code bytes} zeroed bytes in a file under the shared-memory folder, so that a peer on the
     * same host can map it and move its bytes with one copy. The file's space is reserved when it is created
     * ({@link MappedFiles#create}), so a folder too small for it refuses the region at once. Closing the region unmaps
     * and deletes the file.
     *
     * @throws TransferException {@code TRANSFER_UNAVAILABLE} when the file cannot be created, reserved or mapped (the
     *     message names the folder, and its free bytes when it is too small)
     */
    public LocalRegion registerShared(String name, long bytes) {
        requireOpen();
        return regions.addShared(name, bytes);
    }

    /** Unregisters {@code region} (its {@link LocalRegion#close()}): see {@link Regions#remove}. */
    void unregister(LocalRegion region) {
        regions.remove(region);
    }

    /**
     * Connections the engine named {@code peer} has open into this engine: its control connections and the inbound
     * connections transports report ({@link LocalSegment#inbound}). Zero means the peer holds no connection here, so
     * no more of its writes can land over a connection: what a decode waits for before it reuses pages a dead
     * prefill was writing.
     */
    public int inboundConnections(String peer) {
        return inbound.getOrDefault(peer, 0);
    }

    /** Sets the receiver of peers' messages (replacing the previous one). */
    public void onMessage(MessageListener listener) {
        this.messages = listener;
    }

    /**
     * Opens the segment listening at {@code address} ({@code host:port}): connects, fetches its descriptor, and
     * links it over the first transport in this engine's preference that both sides support.
     *
     * @throws TransferException when it cannot be reached or described within {@code timeout}
     */
    public RemoteSegment openSegment(String address, Duration timeout) {
        requireOpen();
        Deadline deadline = Deadline.after(timeout);
        int colon = address.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("segment address must be host:port, got " + address);
        }
        ControlClient client;
        try {
            client = control.connect(
                            address.substring(0, colon),
                            Integer.parseInt(address.substring(colon + 1)),
                            Math.min(
                                    config.connectTimeoutMillis(),
                                    Math.max(1, deadline.remaining().toMillis())),
                            "control to " + address)
                    .get(deadline.remainingNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | TimeoutException e) {
            throw TransferException.unavailable("cannot connect to segment at " + address + ": "
                    + (e.getCause() == null ? e : e.getCause()).getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw TransferException.unavailable("interrupted while opening " + address);
        }
        SegmentDescriptor remote;
        try {
            remote = SegmentDescriptor.decode(client.describe().get(deadline.remainingNanos(), TimeUnit.NANOSECONDS));
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            client.close("describe failed");
            throw TransferException.unavailable("segment at " + address + " did not describe itself: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            client.close("interrupted");
            throw TransferException.unavailable("interrupted while opening " + address);
        }
        RemoteSegment segment = new RemoteSegment(this, client, remote);
        client.watch(timer, config.heartbeatMillis(), segment::die);
        SegmentDescriptor local = descriptor();
        try {
            linkTransports(segment, local, remote);
        } catch (RuntimeException e) {
            segment.close();
            throw translate(e);
        }
        if (segment.link() == null) {
            segment.close();
            throw TransferException.unavailable("no transport reaches " + remote.name() + ": it offers "
                    + remote.transports() + ", this engine has " + transports.keySet());
        }
        opened.add(segment);
        return segment;
    }

    /**
     * Links the first transport in preference that moves host memory and reaches the peer (the segment's primary
     * link; failing to link it fails the open), then every other one that reaches it and moves device memory (one
     * that fails to link is left out with a warning: requests it would have carried fall back or are refused).
     */
    private void linkTransports(RemoteSegment segment, SegmentDescriptor local, SegmentDescriptor remote) {
        boolean hostLinked = false;
        for (Map.Entry<String, Transport> e : transports.entrySet()) {
            Transport t = e.getValue();
            if (!remote.transports().contains(e.getKey()) || !t.canReach(local, remote)) {
                continue;
            }
            boolean host = t.moves(MemoryKind.HOST, MemoryKind.HOST);
            if (host && !hostLinked) {
                segment.attach(e.getKey(), t, t.link(segment.peer()), true);
                hostLinked = true;
            } else if (Regions.movesDevice(t)) {
                try {
                    segment.attach(e.getKey(), t, t.link(segment.peer()), false);
                } catch (RuntimeException failure) {
                    LOG.log(
                            Level.WARNING,
                            "transport " + e.getKey() + " could not link " + remote.name()
                                    + "; its device requests go elsewhere or are refused: " + failure.getMessage());
                }
            }
        }
    }

    void forget(RemoteSegment segment) {
        opened.remove(segment);
    }

    /**
     * Submits {@code requests} to {@code segment}. Requests that cannot start (local memory not registered, a region
     * the peer does not publish, a range outside it, a dead peer) fail at once with the reason; the others move in
     * slices. Every request is final by {@code deadline} (see {@link TransferBatch}).
     */
    public TransferBatch submit(RemoteSegment segment, List<TransferRequest> requests, Deadline deadline) {
        requireOpen();
        return router.submit(segment, requests, deadline);
    }

    void requireOpen() {
        if (closed) {
            throw TransferException.unavailable("transfer engine " + config.name() + " is closed");
        }
    }

    /** Timer tasks waiting in this engine's queue: batches' deadlines and links' heartbeats (for tests). */
    int queuedTimers() {
        return ((ScheduledThreadPoolExecutor) timer).getQueue().size();
    }

    /** Closes opened segments, stops serving, unregisters every region and stops the threads. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (RemoteSegment s : List.copyOf(opened)) {
            s.close();
        }
        control.close();
        // stop serving peers before unregistering, so no region waits on a peer's request in flight
        transports.values().forEach(t -> t.closeInbound(5_000));
        regions.removeAll();
        transports.values().forEach(Transport::close);
        timer.shutdownNow();
    }

    private void countInbound(String from, int delta) {
        inbound.merge(from, delta, (a, b) -> a + b == 0 ? null : a + b);
    }

    /** The control listener's view of this engine. */
    private final class Host implements ControlHost {
        @Override
        public byte[] describe() {
            return descriptor().encode();
        }

        @Override
        public void connected(String from, int delta) {
            countInbound(from, delta);
        }

        @Override
        public void message(String from, byte[] payload) {
            try {
                messages.onMessage(from, payload);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "message listener of " + config.name() + " failed on a message from " + from, e);
            }
        }
    }

    /** This engine's segment as its transports see it. */
    private final class Served implements LocalSegment {
        @Override
        public @Nullable RegisteredRegion region(int id) {
            LocalRegion r = regions.byId(id);
            return r == null || r.kind() != MemoryKind.HOST ? null : r.served();
        }

        @Override
        public void inbound(String peer, int delta) {
            countInbound(peer, delta);
        }
    }
}
