package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Threads;
import io.hicache.cuda.DevicePointer;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.RegisteredRegion;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import java.io.DataInputStream;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import jcuda.CudaException;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * The {@code cuda-ipc} transport: moves bytes between device memory of two processes on one host, GPU to GPU (over
 * NVLink where the GPUs have it, within one GPU's memory where both processes use the same one), never through host
 * memory. A device region registered with the engine is exported as a CUDA IPC handle in the segment descriptor; a
 * peer maps it with {@code cuIpcOpenMemHandle} and copies with {@code cuMemcpyAsync} on its own stream, one
 * operation per request (no slicing). Host memory is not its business: it moves device to device only, so the engine
 * sends host requests over {@code shm} or {@code tcp} on the same segment.
 *
 * <p>CUDA cannot revoke a mapping, so the exporter keeps account over a Unix domain socket ({@link IpcWire}): a peer
 * maps a region only after the exporter recorded it, and unregistering a region asks every holder to unmap it (after
 * its copies into it ended) and waits, bounded by the slice timeout, before the engine lets the owner free the
 * memory. The socket also reports a peer's connections to the engine ({@code inbound}), so a decode knows when a dead
 * prefill can no longer write. It reaches a peer on the same host in another process (CUDA does not open a handle in
 * the process that made it) when every device of the peer's device regions can be reached from every device of this
 * engine's (the same device or peer access).
 *
 * <p>Thread-safe. Created by {@link CudaIpcTransportProvider} for one engine; closed by it.
 */
final class CudaIpcTransport implements Transport {
    static final String NAME = "cuda-ipc";
    private static final System.Logger LOG = System.getLogger(CudaIpcTransport.class.getName());

    private final TransportContext context;
    private final CudaContexts cuda = new CudaContexts();
    private final Path socketPath;
    private final ServerSocketChannel server;
    private final Thread acceptor;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition released = lock.newCondition();
    /** Exported device regions by id, and which importers hold each (guarded by lock). */
    private final Map<Integer, Set<Importer>> holders = new LinkedHashMap<>();
    /** Exported regions being unregistered: no new mappings (guarded by lock). */
    private final Set<Integer> withdrawn = new HashSet<>();

    private final Set<Importer> importers = ConcurrentHashMap.newKeySet();
    private final Set<IpcLink> links = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    CudaIpcTransport(TransportContext context) {
        this.context = context;
        this.socketPath = context.shmDir()
                .resolve("hicache-ipc-" + context.engineName().replaceAll("[^A-Za-z0-9_.-]", "_") + "-"
                        + ProcessHandle.current().pid() + "-" + Long.toHexString(System.nanoTime()) + ".sock");
        try {
            server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(socketPath));
        } catch (IOException e) {
            cuda.close();
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "cuda-ipc cannot listen at " + socketPath + ": " + e.getMessage(),
                    e);
        }
        acceptor = Threads.start("cuda-ipc-accept-" + context.engineName(), this::acceptLoop);
    }

    @Override
    public String name() {
        return NAME;
    }

    /** The socket peers connect to, to map this engine's device regions. */
    @Override
    public String endpoint() {
        return socketPath.toString();
    }

    @Override
    public boolean moves(MemoryKind local, MemoryKind remote) {
        return local == MemoryKind.DEVICE && remote == MemoryKind.DEVICE;
    }

    @Override
    public long sliceBytes(long configuredSliceBytes) {
        return Long.MAX_VALUE;
    }

    /** Exports a device region: its allocation's IPC handle, its offset in the allocation, its device's bus id. */
    @Override
    public Map<String, String> register(RegisteredRegion region) {
        if (region.kind() != MemoryKind.DEVICE) {
            return Map.of();
        }
        long address = region.memory().address();
        try {
            int ordinal = cuda.deviceOf(address);
            long base = cuda.allocationOf(ordinal, address)[0];
            CUipcMemHandle handle = new CUipcMemHandle();
            JCudaDriver.cuIpcGetMemHandle(handle, DevicePointer.at(base));
            lock.lock();
            try {
                holders.put(region.id(), new HashSet<>());
            } finally {
                lock.unlock();
            }
            return Map.of(
                    "handle",
                    CudaContexts.encode(handle),
                    "offset",
                    Long.toString(address - base),
                    "bus",
                    cuda.busId(ordinal));
        } catch (CudaException e) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE, "cuda-ipc cannot export " + region + ": " + e.getMessage(), e);
        }
    }

    /** Asks every peer that maps the region to unmap it and waits for them, bounded by the slice timeout. */
    @Override
    public void deregister(RegisteredRegion region) {
        if (region.kind() != MemoryKind.DEVICE) {
            return;
        }
        Set<Importer> left = revoke(Set.of(region.id()), context.sliceTimeoutMillis());
        if (!left.isEmpty()) {
            LOG.log(
                    Level.WARNING,
                    () -> "cuda-ipc: " + left + " did not unmap " + region + " within " + context.sliceTimeoutMillis()
                            + " ms; closing their connections (their process may still map it)");
            left.forEach(Importer::close);
        }
        lock.lock();
        try {
            holders.remove(region.id());
            withdrawn.remove(region.id());
        } finally {
            lock.unlock();
        }
    }

    /** Revokes every exported region from every peer, waits up to {@code waitMillis}, then closes their sockets. */
    @Override
    public void closeInbound(long waitMillis) {
        Set<Integer> all;
        lock.lock();
        try {
            all = Set.copyOf(holders.keySet());
        } finally {
            lock.unlock();
        }
        revoke(all, waitMillis);
        importers.forEach(Importer::close);
    }

    /** Stops new mappings of {@code regions}, sends REVOKE to their holders, waits; returns the holders left. */
    private Set<Importer> revoke(Set<Integer> regions, long waitMillis) {
        Map<Importer, Set<Integer>> asked = new LinkedHashMap<>();
        lock.lock();
        try {
            for (int id : regions) {
                Set<Importer> h = holders.get(id);
                if (h != null) {
                    h.forEach(
                            i -> asked.computeIfAbsent(i, k -> new HashSet<>()).add(id));
                }
            }
            // withdrawn: an OPEN that arrives from now on is answered GONE
            withdrawn.addAll(regions);
        } finally {
            lock.unlock();
        }
        asked.forEach((importer, ids) -> ids.forEach(id -> importer.send(IpcWire.REVOKE, id)));
        long nanos = TimeUnit.MILLISECONDS.toNanos(waitMillis);
        lock.lock();
        try {
            while (nanos > 0 && holding(regions)) {
                nanos = released.awaitNanos(nanos);
            }
            Set<Importer> left = new HashSet<>();
            for (int id : regions) {
                left.addAll(holders.getOrDefault(id, Set.of()));
            }
            return left;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Set.copyOf(importers);
        } finally {
            lock.unlock();
        }
    }

    private boolean holding(Set<Integer> regions) {
        for (int id : regions) {
            if (!holders.getOrDefault(id, Set.of()).isEmpty()) {
                return true;
            }
        }
        return false;
    }

    @Override
    public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
        if (!local.hostId().equals(remote.hostId()) || local.pid() == remote.pid()) {
            return false;
        }
        Path peerSocket = remote.endpoint(NAME).map(Path::of).orElse(null);
        if (peerSocket == null || !Files.exists(peerSocket)) {
            return false;
        }
        try {
            for (RegionDescriptor mine : local.regions()) {
                for (RegionDescriptor theirs : remote.regions()) {
                    if (mine.kind() == MemoryKind.DEVICE
                            && theirs.kind() == MemoryKind.DEVICE
                            && !reachable(
                                    mine.keysOf(NAME).get("bus"),
                                    theirs.keysOf(NAME).get("bus"))) {
                        return false;
                    }
                }
            }
        } catch (CudaException | HiCacheException e) {
            LOG.log(Level.DEBUG, () -> "cuda-ipc cannot tell whether " + remote.name() + " is reachable: " + e);
            return false;
        }
        return true;
    }

    /** Whether a device at PCI bus {@code from} reaches one at {@code to}; false when either is not exported here. */
    private boolean reachable(@Nullable String from, @Nullable String to) {
        return from != null && to != null && cuda.canAccess(cuda.ordinalOf(from), cuda.ordinalOf(to));
    }

    @Override
    public TransportLink link(PeerContext peer) {
        if (closed) {
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "the cuda-ipc transport is closed");
        }
        IpcLink link = IpcLink.open(context, cuda, peer, links::remove);
        links.add(link);
        return link;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        links.forEach(IpcLink::close);
        importers.forEach(Importer::close);
        try {
            server.close();
        } catch (IOException e) {
            LOG.log(Level.DEBUG, "closing the cuda-ipc listener", e);
        }
        try {
            acceptor.join(TimeUnit.SECONDS.toMillis(5));
            Files.deleteIfExists(socketPath);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException e) {
            LOG.log(Level.WARNING, "could not delete " + socketPath, e);
        }
        cuda.close();
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                SocketChannel channel = server.accept();
                Importer importer = new Importer(channel);
                importers.add(importer);
                Threads.start("cuda-ipc-serve-" + context.engineName(), importer::serve);
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(Level.WARNING, "cuda-ipc accept failed on " + socketPath, e);
                }
                return;
            } catch (RuntimeException | Error e) {
                LOG.log(Level.ERROR, "cuda-ipc accept loop of " + context.engineName() + " failed", e);
                return;
            }
        }
    }

    /** One peer connected to map this engine's regions: what it holds, and its socket. */
    private final class Importer {
        private final SocketChannel channel;
        private volatile String peer = "?";

        Importer(SocketChannel channel) {
            this.channel = channel;
        }

        void serve() {
            boolean counted = false;
            try (DataInputStream in = IpcWire.input(channel)) {
                while (true) {
                    IpcWire.Message m = IpcWire.read(in);
                    switch (m.kind()) {
                        case IpcWire.HELLO -> {
                            peer = m.name();
                            context.local().inbound(peer, +1);
                            counted = true;
                        }
                        case IpcWire.OPEN -> send(open(m.region()) ? IpcWire.OPENED : IpcWire.GONE, m.region());
                        case IpcWire.CLOSED -> forget(m.region());
                        default -> throw new IOException("unexpected message " + m.kind() + " from an importer");
                    }
                }
            } catch (IOException e) {
                LOG.log(Level.DEBUG, () -> "cuda-ipc importer " + peer + " left: " + e);
            } catch (RuntimeException | Error e) {
                LOG.log(Level.ERROR, "cuda-ipc: serving " + peer + " failed", e);
            } finally {
                close();
                // a closed socket is an importer that ended (its mappings die with it, or it unmapped before closing)
                forgetAll();
                if (counted) {
                    context.local().inbound(peer, -1);
                }
                importers.remove(this);
            }
        }

        private boolean open(int region) {
            lock.lock();
            try {
                Set<Importer> h = holders.get(region);
                if (h == null || withdrawn.contains(region)) {
                    return false;
                }
                h.add(this);
                return true;
            } finally {
                lock.unlock();
            }
        }

        private void forget(int region) {
            lock.lock();
            try {
                Set<Importer> h = holders.get(region);
                if (h != null) {
                    h.remove(this);
                }
                released.signalAll();
            } finally {
                lock.unlock();
            }
        }

        private void forgetAll() {
            lock.lock();
            try {
                holders.values().forEach(h -> h.remove(this));
                released.signalAll();
            } finally {
                lock.unlock();
            }
        }

        void send(byte kind, int region) {
            synchronized (channel) {
                try {
                    IpcWire.write(channel, kind, region, "");
                } catch (IOException e) {
                    LOG.log(Level.DEBUG, () -> "cuda-ipc: cannot tell " + peer + ": " + e);
                    close();
                }
            }
        }

        void close() {
            try {
                channel.close();
            } catch (IOException e) {
                LOG.log(Level.DEBUG, "closing a cuda-ipc connection", e);
            }
        }

        @Override
        public String toString() {
            return "peer " + peer;
        }
    }
}
