package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import io.hicache.cuda.DevicePointer;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.TransportContext;
import java.lang.System.Logger.Level;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import jcuda.CudaException;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.JCudaDriver;

/**
 * One peer's device regions as an importer maps them: each opened on first use ({@code cuIpcOpenMemHandle}) once the
 * exporter recorded the mapping (OPEN, answered OPENED; GONE when it is being unregistered), and the copies into each
 * counted, so that unmapping it (a REVOKE, the link closing or the peer gone) stops new copies, waits for those in
 * flight (bounded by the slice timeout), then closes the handle. CUDA cannot revoke a mapping: this accounting is what
 * keeps the exporter from freeing memory a copy still reaches.
 *
 * <p>Thread-safe. Owned by its {@link IpcLink}, which tells the exporter through {@code say}.
 */
final class IpcMappings {
    private static final System.Logger LOG = System.getLogger(IpcMappings.class.getName());

    /** Sends one message of {@link IpcWire} to the exporter. */
    @FunctionalInterface
    interface Say {
        void say(byte kind, int region);
    }

    /** A peer's region mapped here: where it is, and the copies into it while they run. */
    static final class Mapping {
        private final int device;
        private final DevicePointer base;
        private final long offset;
        private int copies;
        private boolean revoked;

        private Mapping(int device, DevicePointer base, long offset) {
            this.device = device;
            this.base = base;
            this.offset = offset;
        }

        /** The device address of byte {@code at} of the region. */
        long address(long at) {
            return base.address() + offset + at;
        }

        /** Counts a copy into the region: false (nothing counted) once it is being unmapped. */
        synchronized boolean begin() {
            if (revoked) {
                return false;
            }
            copies++;
            return true;
        }

        /** A copy {@link #begin} counted ended. */
        synchronized void ended() {
            copies--;
            notifyAll();
        }
    }

    private final TransportContext context;
    private final CudaContexts cuda;
    private final String peer;
    private final Say say;
    private final Map<Integer, Mapping> mappings = new ConcurrentHashMap<>();
    private final Map<Integer, CompletableFuture<Boolean>> opening = new ConcurrentHashMap<>();

    IpcMappings(TransportContext context, CudaContexts cuda, String peer, Say say) {
        this.context = context;
        this.cuda = cuda;
        this.peer = peer;
        this.say = say;
    }

    /**
     * The mapping of {@code region} for the local {@code device}, opened on first use after the exporter recorded it.
     *
     * @throws HiCacheException {@code TRANSFER_UNAVAILABLE} when it is not exported, was unregistered, is mapped for
     *     another device, or the exporter does not answer within the connect timeout
     * @throws CudaException    when CUDA cannot open the handle
     */
    Mapping mapped(RegionDescriptor region, int device) {
        Mapping m = mappings.get(region.id());
        if (m != null) {
            if (m.device != device) {
                throw new HiCacheException(
                        ErrorCode.TRANSFER_UNAVAILABLE,
                        "region " + region.name() + " is mapped " + "for device " + m.device
                                + ", the local memory is on device " + device);
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
                throw new HiCacheException(
                        ErrorCode.TRANSFER_UNAVAILABLE,
                        "region " + region.name() + " of " + peer + " is not exported over cuda-ipc");
            }
            if (!askToOpen(region.id())) {
                throw new HiCacheException(
                        ErrorCode.TRANSFER_UNAVAILABLE,
                        "region " + region.name() + " of " + peer + " was unregistered");
            }
            DevicePointer base = new DevicePointer();
            try {
                cuda.makeCurrent(device);
                JCudaDriver.cuIpcOpenMemHandle(
                        base,
                        CudaContexts.decode(keys.get("handle")),
                        CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
            } catch (CudaException e) {
                say.say(IpcWire.CLOSED, region.id());
                throw e;
            }
            m = new Mapping(device, base, Long.parseLong(keys.get("offset")));
            mappings.put(region.id(), m);
            return m;
        }
    }

    private boolean askToOpen(int region) {
        CompletableFuture<Boolean> answer = new CompletableFuture<>();
        opening.put(region, answer);
        try {
            say.say(IpcWire.OPEN, region);
            return answer.get(context.connectTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    peer + " did not answer a cuda-ipc OPEN within " + context.connectTimeoutMillis() + " ms");
        } catch (ExecutionException e) {
            // a future that failed has its cause
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "cuda-ipc OPEN failed: "
                            + Checks.checkNotNull(e.getCause(), "a failed future's cause")
                                    .getMessage(),
                    e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "interrupted while mapping a region");
        } finally {
            opening.remove(region, answer);
        }
    }

    /** The exporter answered an OPEN of {@code region}: recorded ({@code opened}), or the region is going away. */
    void answered(int region, boolean opened) {
        CompletableFuture<Boolean> f = opening.get(region);
        if (f != null) {
            f.complete(opened);
        }
    }

    /** The exporter is gone: every OPEN still waiting is refused, and every region unmapped. */
    void exporterGone() {
        opening.values().forEach(f -> f.complete(false));
        unmapAll();
    }

    /** Unmaps every region (see {@link #unmap}). */
    void unmapAll() {
        for (int region : List.copyOf(mappings.keySet())) {
            unmap(region);
        }
    }

    /** Stops new copies into {@code region}, waits (bounded) for those in flight, then unmaps it. */
    void unmap(int region) {
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
                LOG.log(
                        Level.WARNING,
                        "cuda-ipc: " + m.copies + " copies into region " + region + " of " + peer
                                + " still running after " + context.sliceTimeoutMillis() + " ms; unmapping anyway");
            }
        }
        if (!mappings.remove(region, m)) {
            return; // the reader and close() both unmap on the way out: one closes the handle
        }
        try {
            cuda.makeCurrent(m.device);
            JCudaDriver.cuIpcCloseMemHandle(m.base);
        } catch (CudaException e) {
            LOG.log(Level.WARNING, "cuda-ipc: unmapping region " + region + " of " + peer + " failed", e);
        }
    }
}
