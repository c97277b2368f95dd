package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Threads;
import io.hicache.cuda.AddressCopyKernel;
import io.hicache.cuda.DevicePointer;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import java.io.DataInputStream;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import jcuda.CudaException;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * The cuda-ipc path to one peer, as the importer: the peer's device regions mapped on first use (after the peer
 * recorded the mapping), the small requests of a submission copied by one launch of the address-copy kernel and the
 * others by one {@code cuMemcpyAsync} each, on this link's stream for the local device, an event recorded after them,
 * and a completion thread that reports the slices when their event fires, in order. A REVOKE from
 * the peer waits for the copies into that region, unmaps it and answers CLOSED; the socket closing (the peer died or
 * closed) does the same for every region, and later slices fail.
 *
 * <p>Thread-safe: slices may be submitted from any thread. Closing waits (bounded) for copies in flight, unmaps
 * every region, then closes the socket, in that order, so the exporter never frees memory this process maps.
 */
final class IpcLink implements TransportLink {
    private static final System.Logger LOG = System.getLogger(IpcLink.class.getName());
    private static final int EVENT_FLAGS = CUevent_flags.CU_EVENT_BLOCKING_SYNC | CUevent_flags.CU_EVENT_DISABLE_TIMING;
    /** A submission of at least this many small slices for one device goes in one kernel launch. */
    static final int KERNEL_MIN_COPIES = 4;
    /** Slices larger than this go to the copy engine, one {@code cuMemcpyAsync} each. */
    static final long KERNEL_MAX_BYTES = 1L << 20;
    /** Copies one launch takes; longer lists go in several. */
    private static final int KERNEL_CAPACITY = 1 << 16;

    private final TransportContext context;
    private final CudaContexts cuda;
    private final PeerContext peer;
    private final Consumer<IpcLink> onClose;
    private final SocketChannel channel;
    private final Map<Integer, Mapping> mappings = new ConcurrentHashMap<>();
    private final Map<Integer, CompletableFuture<Boolean>> opening = new ConcurrentHashMap<>();
    private final Map<Integer, CUstream> streams = new ConcurrentHashMap<>();
    /** Each device's address-copy kernel, used under that device's stream lock. */
    private final Map<Integer, AddressCopyKernel> kernels = new ConcurrentHashMap<>();
    private volatile String kernelProblem;
    private final Map<Integer, ConcurrentLinkedQueue<CUevent>> spareEvents = new ConcurrentHashMap<>();
    private final BlockingQueue<Copy> inFlight = new LinkedBlockingQueue<>();
    private final Thread reader;
    private final Thread completer;
    private volatile String gone;
    private volatile boolean closing;
    /** {base, limit, device} of the local allocation last looked up. */
    private volatile long[] lastAllocation;

    /** A peer's region mapped here. */
    private static final class Mapping {
        final int region;
        final int device;
        final DevicePointer base;
        final long offset;
        int copies;
        boolean revoked;

        Mapping(int region, int device, DevicePointer base, long offset) {
            this.region = region;
            this.device = device;
            this.base = base;
            this.offset = offset;
        }
    }

    /** Copies enqueued on a device's stream together, and the event recorded after them. */
    private record Copy(List<Target> targets, int device, CUevent event) {
    }

    private IpcLink(TransportContext context, CudaContexts cuda, PeerContext peer, Consumer<IpcLink> onClose,
            SocketChannel channel) {
        this.context = context;
        this.cuda = cuda;
        this.peer = peer;
        this.onClose = onClose;
        this.channel = channel;
        this.reader = Threads.unstarted("cuda-ipc-link-" + context.engineName() + "-" + peer.remote().name(),
                this::readLoop);
        this.completer = Threads.unstarted("cuda-ipc-done-" + context.engineName() + "-" + peer.remote().name(),
                this::completeLoop);
    }

    /** Connects to the peer's socket and says who this engine is. */
    static IpcLink open(TransportContext context, CudaContexts cuda, PeerContext peer, Consumer<IpcLink> onClose) {
        String socket = peer.remote().endpoint(CudaIpcTransport.NAME).orElseThrow(() -> new HiCacheException(
                ErrorCode.TRANSFER_UNAVAILABLE, peer.remote().name() + " publishes no cuda-ipc endpoint"));
        SocketChannel channel = null;
        try {
            channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(socket));
            IpcWire.write(channel, IpcWire.HELLO, 0, context.engineName());
        } catch (IOException e) {
            if (channel != null) {
                try {
                    channel.close();
                } catch (IOException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "cuda-ipc cannot connect to "
                    + peer.remote().name() + " at " + socket + ": " + e.getMessage(), e);
        }
        IpcLink link = new IpcLink(context, cuda, peer, onClose, channel);
        link.reader.start();
        link.completer.start();
        return link;
    }

    @Override
    public void submit(Slice slice) {
        Target t = target(slice);
        if (t != null) {
            enqueue(t.device(), List.of(t));
        }
    }

    /**
     * Small slices of one submission go to their device in one launch of the address-copy kernel (a fragmented plan
     * is thousands of 32 KiB requests: one {@code cuMemcpyAsync} each costs microseconds apiece); large ones, which the
     * copy engine moves at full speed, one {@code cuMemcpyAsync} each.
     */
    @Override
    public void submitAll(List<? extends Slice> slices) {
        if (slices.size() < KERNEL_MIN_COPIES) {
            slices.forEach(this::submit);
            return;
        }
        Map<Integer, List<Target>> small = new HashMap<>();
        for (Slice slice : slices) {
            Target t = target(slice);
            if (t == null) {
                continue;
            }
            if (t.length() > KERNEL_MAX_BYTES) {
                enqueue(t.device(), List.of(t));
            } else {
                small.computeIfAbsent(t.device(), d -> new ArrayList<>()).add(t);
            }
        }
        small.forEach(this::enqueue);
    }

    /** A slice checked and mapped: its device, both addresses and its length; the mapping counts it as a copy. */
    private record Target(Slice slice, Mapping mapping, int device, long source, long destination, long length) {
    }

    /** Checks {@code slice} and maps its region; null when the slice was answered already (refused or failed). */
    private Target target(Slice slice) {
        Mapping mapping = null;
        try {
            String refusal = refusal(slice);
            if (refusal != null) {
                slice.done(refusal);
                return null;
            }
            long local = slice.local().address();
            int device = deviceOf(local);
            mapping = mapped(slice.region(), device);
            synchronized (mapping) {
                if (mapping.revoked) {
                    slice.done("region " + slice.region().name() + " of " + peer.remote().name() + " was unregistered");
                    return null;
                }
                mapping.copies++;
            }
            long remote = mapping.base.address() + mapping.offset + slice.remoteOffset();
            boolean write = slice.op() == TransferOp.WRITE;
            return new Target(slice, mapping, device, write ? local : remote, write ? remote : local,
                    slice.local().byteSize());
        } catch (CudaException | HiCacheException e) {
            slice.done("cuda-ipc copy failed: " + e.getMessage());
            return null;
        }
    }

    /** Enqueues {@code targets} on the device's stream (one kernel launch when there are enough), then one event. */
    private void enqueue(int device, List<Target> targets) {
        try {
            CUstream stream = stream(device);
            synchronized (stream) {
                // the completion queue must see events in the order they are recorded on the stream
                cuda.makeCurrent(device);
                AddressCopyKernel kernel = targets.size() >= KERNEL_MIN_COPIES ? kernel(device) : null;
                if (kernel != null) {
                    int n = targets.size();
                    long[] sources = new long[n];
                    long[] destinations = new long[n];
                    long[] lengths = new long[n];
                    for (int i = 0; i < n; i++) {
                        Target t = targets.get(i);
                        sources[i] = t.source();
                        destinations[i] = t.destination();
                        lengths[i] = t.length();
                    }
                    kernel.enqueue(sources, destinations, lengths, n, stream);
                } else {
                    for (Target t : targets) {
                        JCudaDriver.cuMemcpyAsync(DevicePointer.at(t.destination()), DevicePointer.at(t.source()),
                                t.length(), stream);
                    }
                }
                CUevent event = event(device);
                JCudaDriver.cuEventRecord(event, stream);
                inFlight.add(new Copy(targets, device, event));
            }
        } catch (CudaException | HiCacheException e) {
            for (Target t : targets) {
                ended(t.mapping());
                t.slice().done("cuda-ipc copy failed: " + e.getMessage());
            }
        }
    }

    /**
     * The address-copy kernel of {@code device}, loaded on first use; null where it cannot load (the reason is logged
     * once, and copies go one by one). The caller holds the device's stream lock and made its context current.
     */
    private AddressCopyKernel kernel(int device) {
        if (kernelProblem != null) {
            return null;
        }
        AddressCopyKernel k = kernels.get(device);
        if (k == null) {
            try {
                k = AddressCopyKernel.load(KERNEL_CAPACITY);
                kernels.put(device, k);
            } catch (IOException | CudaException e) {
                kernelProblem = e.getMessage();
                LOG.log(Level.WARNING, "cuda-ipc: the address-copy kernel cannot be loaded (" + e.getMessage()
                        + "); small requests are copied one by one");
                return null;
            }
        }
        return k;
    }

    /** The device of a local address; the last allocation looked up is remembered (requests come from one pool). */
    private int deviceOf(long address) {
        long[] known = lastAllocation;
        if (known != null && address >= known[0] && address < known[1]) {
            return (int) known[2];
        }
        int device = cuda.deviceOf(address);
        long[] allocation = cuda.allocationOf(device, address);
        lastAllocation = new long[] {allocation[0], allocation[1], device};
        return device;
    }

    private String refusal(Slice slice) {
        if (gone != null) {
            return "the cuda-ipc link to " + peer.remote().name() + " is closed: " + gone;
        }
        if (!peer.alive()) {
            return "peer " + peer.remote().name() + " is dead: " + peer.deathReason();
        }
        if (!slice.wanted()) {
            return "not wanted any more";
        }
        return null;
    }

    /** The mapping of {@code region}, opened on first use after the exporter recorded it. */
    private Mapping mapped(RegionDescriptor region, int device) {
        Mapping m = mappings.get(region.id());
        if (m != null) {
            if (m.device != device) {
                throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "region " + region.name() + " is mapped "
                        + "for device " + m.device + ", the local memory is on device " + device);
            }
            return m;
        }
        synchronized (this) {
            m = mappings.get(region.id());
            if (m != null) {
                return m;
            }
            Map<String, String> keys = region.keysOf(CudaIpcTransport.NAME);
            if (!keys.containsKey("handle")) {
                throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "region " + region.name() + " of "
                        + peer.remote().name() + " is not exported over cuda-ipc");
            }
            if (!askToOpen(region.id())) {
                throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "region " + region.name() + " of "
                        + peer.remote().name() + " was unregistered");
            }
            DevicePointer base = new DevicePointer();
            try {
                cuda.makeCurrent(device);
                JCudaDriver.cuIpcOpenMemHandle(base, CudaContexts.decode(keys.get("handle")),
                        CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
            } catch (CudaException e) {
                say(IpcWire.CLOSED, region.id());
                throw e;
            }
            m = new Mapping(region.id(), device, base, Long.parseLong(keys.get("offset")));
            mappings.put(region.id(), m);
            return m;
        }
    }

    private boolean askToOpen(int region) {
        CompletableFuture<Boolean> answer = new CompletableFuture<>();
        opening.put(region, answer);
        try {
            say(IpcWire.OPEN, region);
            return answer.get(context.connectTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, peer.remote().name() + " did not answer a "
                    + "cuda-ipc OPEN within " + context.connectTimeoutMillis() + " ms");
        } catch (ExecutionException e) {
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "cuda-ipc OPEN failed: " + e.getCause()
                    .getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "interrupted while mapping a region");
        } finally {
            opening.remove(region, answer);
        }
    }

    private CUstream stream(int device) {
        return streams.computeIfAbsent(device, d -> {
            cuda.makeCurrent(d);
            CUstream s = new CUstream();
            JCudaDriver.cuStreamCreate(s, CUstream_flags.CU_STREAM_NON_BLOCKING);
            return s;
        });
    }

    private CUevent event(int device) {
        CUevent e = spareEvents.computeIfAbsent(device, d -> new ConcurrentLinkedQueue<>()).poll();
        if (e == null) {
            e = new CUevent();
            JCudaDriver.cuEventCreate(e, EVENT_FLAGS);
        }
        return e;
    }

    /**
     * Reports copies when their events fired, in the order they were enqueued. It waits on the newest event of what is
     * queued: a stream runs in order, so every earlier copy on it has ended too (one wake-up for many small copies).
     */
    private void completeLoop() {
        List<Copy> ready = new ArrayList<>();
        while (true) {
            Copy first;
            try {
                first = inFlight.poll(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (first == null) {
                if (gone != null && closing) {
                    return;
                }
                continue;
            }
            ready.clear();
            ready.add(first);
            inFlight.drainTo(ready);
            // one stream per device: wait on the newest event of each device among them
            Map<Integer, CUevent> newest = new HashMap<>();
            for (Copy c : ready) {
                newest.put(c.device(), c.event());
            }
            String failure = null;
            try {
                for (Map.Entry<Integer, CUevent> e : newest.entrySet()) {
                    cuda.makeCurrent(e.getKey());
                    JCudaDriver.cuEventSynchronize(e.getValue());
                }
            } catch (RuntimeException e) {
                failure = "cuda-ipc copy failed on the device: " + e.getMessage();
                LOG.log(Level.WARNING, "cuda-ipc: copies to or from " + peer.remote().name() + " failed", e);
            } catch (Error e) {
                failure = "cuda-ipc completion failed: " + e;
                LOG.log(Level.ERROR, "cuda-ipc completion loop error", e);
            }
            for (Copy c : ready) {
                spareEvents.get(c.device()).add(c.event());
                for (Target t : c.targets()) {
                    ended(t.mapping());
                    t.slice().done(failure);
                }
            }
        }
    }

    private void ended(Mapping mapping) {
        synchronized (mapping) {
            mapping.copies--;
            mapping.notifyAll();
        }
    }

    /** Reads the exporter's answers and revocations; on EOF the peer is gone and every mapping is dropped. */
    private void readLoop() {
        try (DataInputStream in = IpcWire.input(channel)) {
            while (true) {
                IpcWire.Message m = IpcWire.read(in);
                switch (m.kind()) {
                    case IpcWire.OPENED, IpcWire.GONE -> {
                        CompletableFuture<Boolean> f = opening.get(m.region());
                        if (f != null) {
                            f.complete(m.kind() == IpcWire.OPENED);
                        }
                    }
                    case IpcWire.REVOKE -> {
                        unmap(m.region());
                        say(IpcWire.CLOSED, m.region());
                    }
                    default -> throw new IOException("unexpected message " + m.kind() + " from an exporter");
                }
            }
        } catch (IOException e) {
            if (gone == null) {
                gone = "the peer closed the cuda-ipc connection (" + e.getMessage() + ")";
            }
        } catch (RuntimeException | Error e) {
            gone = "the cuda-ipc reader failed: " + e;
            LOG.log(Level.ERROR, "cuda-ipc reader for " + peer.remote().name() + " failed", e);
        } finally {
            opening.values().forEach(f -> f.complete(false));
            for (int region : List.copyOf(mappings.keySet())) {
                unmap(region);
            }
        }
    }

    /** Stops new copies into {@code region}, waits (bounded) for those in flight, then unmaps it. */
    private void unmap(int region) {
        Mapping m = mappings.get(region);
        if (m == null) {
            return;
        }
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(context.sliceTimeoutMillis());
        synchronized (m) {
            m.revoked = true;
            try {
                while (m.copies > 0 && until - System.nanoTime() > 0) {
                    m.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime())));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (m.copies > 0) {
                LOG.log(Level.WARNING, "cuda-ipc: " + m.copies + " copies into region " + region + " of "
                        + peer.remote().name() + " still running after " + context.sliceTimeoutMillis()
                        + " ms; unmapping anyway");
            }
        }
        if (!mappings.remove(region, m)) {
            return; // the reader and close() both unmap on the way out: one closes the handle
        }
        try {
            cuda.makeCurrent(m.device);
            JCudaDriver.cuIpcCloseMemHandle(m.base);
        } catch (CudaException e) {
            LOG.log(Level.WARNING, "cuda-ipc: unmapping region " + region + " of " + peer.remote().name() + " failed",
                    e);
        }
    }

    private void say(byte kind, int region) {
        synchronized (channel) {
            try {
                IpcWire.write(channel, kind, region, "");
            } catch (IOException e) {
                LOG.log(Level.DEBUG, () -> "cuda-ipc: cannot tell " + peer.remote().name() + ": " + e);
            }
        }
    }

    @Override
    public void abandon(Slice slice) {
        // a device copy ends by itself within microseconds to milliseconds; there is nothing to tear down
    }

    @Override
    public void close() {
        if (closing) {
            return;
        }
        closing = true;
        if (gone == null) {
            gone = "closed by this engine";
        }
        for (int region : List.copyOf(mappings.keySet())) {
            unmap(region);
        }
        try {
            channel.close();
        } catch (IOException e) {
            LOG.log(Level.DEBUG, "closing a cuda-ipc link", e);
        }
        try {
            reader.join(TimeUnit.SECONDS.toMillis(5));
            completer.join(context.sliceTimeoutMillis() + 1_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (Map.Entry<Integer, CUstream> s : streams.entrySet()) {
            try {
                cuda.makeCurrent(s.getKey());
                AddressCopyKernel kernel = kernels.remove(s.getKey());
                if (kernel != null) {
                    JCudaDriver.cuStreamSynchronize(s.getValue()); // its lists may still be read
                    kernel.close();
                }
                JCudaDriver.cuStreamDestroy(s.getValue());
                spareEvents.getOrDefault(s.getKey(), new ConcurrentLinkedQueue<>()).forEach(JCudaDriver::cuEventDestroy);
            } catch (CudaException e) {
                LOG.log(Level.DEBUG, "destroying a cuda-ipc stream", e);
            }
        }
        onClose.accept(this);
    }
}
