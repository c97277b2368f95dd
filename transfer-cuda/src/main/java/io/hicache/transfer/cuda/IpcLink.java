package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Threads;
import io.hicache.transfer.spi.PeerContext;
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
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import jcuda.CudaException;
import org.jspecify.annotations.Nullable;

/**
 * The cuda-ipc path to one peer, as the importer: the peer's device regions mapped on first use, after the peer
 * recorded the mapping ({@link IpcMappings}); the small requests of a submission copied by one launch of the
 * address-copy kernel and the others by one {@code cuMemcpyAsync} each, on this link's stream for the local device
 * ({@link DeviceCopies}); the slices reported when the event recorded after them fires, in order, by the device's
 * completion queue (hicache-cuda's). A REVOKE from the peer waits for the copies into that region, unmaps it and
 * answers CLOSED; the socket closing (the peer died or closed) does the same for every region, and later slices fail.
 *
 * <p>Thread-safe: slices may be submitted from any thread. Closing waits (bounded) for copies in flight, unmaps
 * every region, then closes the socket, in that order, so the exporter never frees memory this process maps.
 */
final class IpcLink implements TransportLink {
    private static final System.Logger LOG = System.getLogger(IpcLink.class.getName());

    private final TransportContext context;
    private final CudaContexts cuda;
    private final PeerContext peer;
    private final Consumer<IpcLink> onClose;
    private final SocketChannel channel;
    private final IpcMappings mappings;
    private final DeviceCopies<Target> copies;
    private final Thread reader;
    /** Why the link is closed, or null while it is open. */
    private volatile @Nullable String gone;

    private volatile boolean closing;
    /** {base, limit, device} of the local allocation last looked up. */
    private volatile long @Nullable [] lastAllocation;

    private IpcLink(
            TransportContext context,
            CudaContexts cuda,
            PeerContext peer,
            Consumer<IpcLink> onClose,
            SocketChannel channel) {
        this.context = context;
        this.cuda = cuda;
        this.peer = peer;
        this.onClose = onClose;
        this.channel = channel;
        this.reader = Threads.unstarted(
                "cuda-ipc-link-" + context.engineName() + "-" + peer.remote().name(), this::readLoop);
        this.mappings = new IpcMappings(context, cuda, peer.remote().name(), this::say);
        this.copies = new DeviceCopies<>(
                cuda,
                "cuda-ipc-done-" + context.engineName() + "-" + peer.remote().name(),
                this::completed);
    }

    /** Connects to the peer's socket and says who this engine is. */
    static IpcLink open(TransportContext context, CudaContexts cuda, PeerContext peer, Consumer<IpcLink> onClose) {
        String socket = peer.remote()
                .endpoint(CudaIpcTransport.NAME)
                .orElseThrow(() -> new HiCacheException(
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
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "cuda-ipc cannot connect to " + peer.remote().name() + " at " + socket + ": " + e.getMessage(),
                    e);
        }
        IpcLink link = new IpcLink(context, cuda, peer, onClose, channel);
        link.reader.start();
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
     * The slices of one submission go to each device as one list with one event after it: the small ones in one launch
     * of the address-copy kernel (a fragmented plan is thousands of 32 KiB requests: one {@code cuMemcpyAsync} each
     * costs microseconds apiece), the large ones, which the copy engine moves at full speed, one
     * {@code cuMemcpyAsync} each.
     */
    @Override
    public void submitAll(List<? extends Slice> slices) {
        Map<Integer, List<Target>> byDevice = new HashMap<>();
        for (Slice slice : slices) {
            Target t = target(slice);
            if (t != null) {
                byDevice.computeIfAbsent(t.device(), d -> new ArrayList<>()).add(t);
            }
        }
        byDevice.forEach(this::enqueue);
    }

    /** A slice checked and mapped: its device, both addresses and its length; the mapping counts it as a copy. */
    private record Target(
            Slice slice, IpcMappings.Mapping mapping, int device, long source, long destination, long length)
            implements DeviceCopies.Copy {}

    /** Checks {@code slice} and maps its region; null when the slice was answered already (refused or failed). */
    private @Nullable Target target(Slice slice) {
        try {
            String refusal = refusal(slice);
            if (refusal != null) {
                slice.done(refusal);
                return null;
            }
            long local = slice.local().address();
            int device = deviceOf(local);
            IpcMappings.Mapping mapping = mappings.mapped(slice.region(), device);
            if (!mapping.begin()) {
                slice.done("region " + slice.region().name() + " of "
                        + peer.remote().name() + " was unregistered");
                return null;
            }
            long remote = mapping.address(slice.remoteOffset());
            boolean write = slice.op() == TransferOp.WRITE;
            return new Target(
                    slice,
                    mapping,
                    device,
                    write ? local : remote,
                    write ? remote : local,
                    slice.local().byteSize());
        } catch (CudaException | HiCacheException e) {
            slice.done("cuda-ipc copy failed: " + e.getMessage());
            return null;
        }
    }

    /** Enqueues {@code targets} on the device's stream (one kernel launch when there are enough), then one event. */
    private void enqueue(int device, List<Target> targets) {
        try {
            copies.enqueue(device, targets);
        } catch (CudaException | HiCacheException | IllegalStateException e) { // the last: the link closed meanwhile
            for (Target t : targets) {
                t.mapping().ended();
                t.slice().done("cuda-ipc copy failed: " + e.getMessage());
            }
        }
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

    private @Nullable String refusal(Slice slice) {
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

    /**
     * Reports a launch's copies once its event fired, in the order they were enqueued on the device's stream (a stream
     * runs in order: an event that fired means every earlier copy on it has ended too).
     */
    private void completed(List<Target> targets, @Nullable Throwable failure) {
        String reason = null;
        if (failure instanceof Error) {
            reason = "cuda-ipc completion failed: " + failure;
            LOG.log(Level.ERROR, "cuda-ipc completion error", failure);
        } else if (failure != null) {
            reason = "cuda-ipc copy failed on the device: " + failure.getMessage();
            LOG.log(
                    Level.WARNING,
                    "cuda-ipc: copies to or from " + peer.remote().name() + " failed",
                    failure);
        }
        for (Target t : targets) {
            t.mapping().ended();
            t.slice().done(reason);
        }
    }

    /** Reads the exporter's answers and revocations; on EOF the peer is gone and every mapping is dropped. */
    private void readLoop() {
        try (DataInputStream in = IpcWire.input(channel)) {
            while (true) {
                IpcWire.Message m = IpcWire.read(in);
                switch (m.kind()) {
                    case IpcWire.OPENED, IpcWire.GONE -> mappings.answered(m.region(), m.kind() == IpcWire.OPENED);
                    case IpcWire.REVOKE -> {
                        mappings.unmap(m.region());
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
            mappings.exporterGone();
        }
    }

    private void say(byte kind, int region) {
        synchronized (channel) {
            try {
                IpcWire.write(channel, kind, region, "");
            } catch (IOException e) {
                LOG.log(
                        Level.DEBUG,
                        () -> "cuda-ipc: cannot tell " + peer.remote().name() + ": " + e);
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
        mappings.unmapAll();
        try {
            channel.close();
        } catch (IOException e) {
            LOG.log(Level.DEBUG, "closing a cuda-ipc link", e);
        }
        try {
            reader.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        copies.close(context.sliceTimeoutMillis() + 1_000); // reports the copies still queued (bounded), then frees
        onClose.accept(this);
    }
}
