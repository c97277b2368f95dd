package io.hicache.transfer.cuda;

import io.hicache.cuda.AddressCopyKernel;
import io.hicache.cuda.CompletionQueue;
import io.hicache.cuda.DevicePointer;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import jcuda.CudaException;
import jcuda.driver.CUDA_MEMCPY2D;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUmemorytype;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * Copies between device addresses, enqueued per local device: on that device's non-blocking stream, the copies of up
 * to {@value #KERNEL_MAX_BYTES} bytes in a list go in one launch of the address-copy kernel when there are
 * {@value #KERNEL_MIN_COPIES} or more of them, the others to the copy engines (a strided run as one 2D copy, else one
 * {@code cuMemcpyAsync} each); then one event is recorded on the device's {@link CompletionQueue} (hicache-cuda's, the
 * one a pool's copies use), whose thread hands each list back, in the order it was enqueued, once its event fired (a
 * stream runs in order: every earlier copy on it has ended too).
 *
 * <p>Thread-safe: a device's copies are enqueued under its lane's lock, so its queue sees the events in stream order.
 * The owner closes it once nothing more is enqueued ({@link #close}): closing reports what is still queued (bounded),
 * then frees the kernels, streams and events.
 *
 * @param <T> the copies, as their owner reports them
 */
final class DeviceCopies<T extends DeviceCopies.Copy> {
    private static final System.Logger LOG = System.getLogger(DeviceCopies.class.getName());
    /**
     * {@code -Dhicache.cuda-ipc.trace=true}: each list logs where enqueueing it spent its time (a diagnosis). Logged
     * after the list's event is recorded, so the line costs the submitting thread but not the copies.
     */
    private static final boolean TRACE = Boolean.getBoolean("hicache.cuda-ipc.trace");
    /**
     * The completion thread spins while copies are in flight (the driver's default for a context with fewer than a
     * core each), as the pool's copies do: the end of a handoff waits for this thread to notice it.
     * {@code -Dhicache.cuda-ipc.blocking-wait=true} has it sleep instead. No timing either way.
     */
    private static final int EVENT_FLAGS = Boolean.getBoolean("hicache.cuda-ipc.blocking-wait")
            ? CUevent_flags.CU_EVENT_BLOCKING_SYNC | CUevent_flags.CU_EVENT_DISABLE_TIMING
            : CUevent_flags.CU_EVENT_DISABLE_TIMING;
    /** A list of at least this many copies for one device goes in one kernel launch. */
    static final int KERNEL_MIN_COPIES = 4;
    /** Copies larger than this are for the copy engines. */
    static final long KERNEL_MAX_BYTES = 1L << 20;
    /** Copies one launch takes; longer lists go in several. */
    private static final int KERNEL_CAPACITY = 1 << 16;
    /** A 2D copy's largest pitch (CUDA's limit for 2D copies is 2^31 - 1 bytes on current devices). */
    private static final long MAX_PITCH = Integer.MAX_VALUE;

    /** One copy: {@code length} bytes from device address {@code source} to {@code destination}. */
    interface Copy {
        long source();

        long destination();

        long length();
    }

    /** A device's stream and the queue that reports its copies; its lock orders enqueueing. */
    private record Lane<T>(CUstream stream, CompletionQueue<List<T>> completions) {}

    private final CudaContexts cuda;
    private final String role;
    private final CompletionQueue.Completion<List<T>> completed;
    private final Map<Integer, Lane<T>> lanes = new ConcurrentHashMap<>();
    /** Each device's address-copy kernel, used under that device's lane lock. */
    private final Map<Integer, AddressCopyKernel> kernels = new ConcurrentHashMap<>();
    /** Set once the driver refused a 2D copy: strided copies then go one by one. */
    private volatile boolean stridedRefused;
    /** Why the kernel cannot load (then copies go one by one), or null while it can. */
    private volatile @Nullable String kernelProblem;

    /**
     * Copies in the devices' primary contexts; each device's completion thread is {@code hicache-<role>-<device>} and
     * hands {@code completed} every list enqueued, with the failure of its copies or null.
     */
    DeviceCopies(CudaContexts cuda, String role, CompletionQueue.Completion<List<T>> completed) {
        this.cuda = cuda;
        this.role = role;
        this.completed = completed;
    }

    /**
     * Enqueues {@code copies} on {@code device}'s stream (the small ones in one kernel launch when there are enough),
     * then one event; {@code completed} gets them once it fired.
     *
     * @throws CudaException when they cannot be enqueued (none is reported then); any enqueued before the failure have
     *     finished when it is thrown, unless waiting for them failed too (that failure is suppressed in the one thrown,
     *     and the context is then broken anyway)
     * @throws IllegalStateException once this is closed
     */
    void enqueue(int device, List<T> copies) {
        Lane<T> lane = lane(device);
        CUstream stream = lane.stream();
        synchronized (lane) {
            try {
                enqueueOn(device, stream, lane, copies);
            } catch (RuntimeException e) {
                // Copies enqueued before the failure still run; the caller ends their mappings when this throws, and a
                // REVOKE may then let the exporter free memory they write: wait for them first (a failure path only).
                try {
                    JCudaDriver.cuStreamSynchronize(stream);
                } catch (RuntimeException sync) {
                    e.addSuppressed(sync);
                }
                throw e;
            }
        }
    }

    private void enqueueOn(int device, CUstream stream, Lane<T> lane, List<T> copies) {
        long start = TRACE ? System.nanoTime() : 0;
        cuda.makeCurrent(device);
        // The small copies, when there are enough, in one kernel launch; the others to the copy engines. One event
        // after all of them: the stream runs in order, so it reports every copy of the list.
        List<T> small = new ArrayList<>();
        List<T> large = new ArrayList<>();
        for (T c : copies) {
            (c.length() <= KERNEL_MAX_BYTES ? small : large).add(c);
        }
        AddressCopyKernel kernel = small.size() >= KERNEL_MIN_COPIES ? kernel(device) : null;
        if (kernel != null) {
            int n = small.size();
            long[] sources = new long[n];
            long[] destinations = new long[n];
            long[] lengths = new long[n];
            for (int i = 0; i < n; i++) {
                T c = small.get(i);
                sources[i] = c.source();
                destinations[i] = c.destination();
                lengths[i] = c.length();
            }
            kernel.enqueue(sources, destinations, lengths, n, stream);
        } else {
            large.addAll(small);
        }
        long launched = TRACE ? System.nanoTime() : 0;
        copyEngine(stream, large);
        long copied = TRACE ? System.nanoTime() : 0;
        lane.completions().record(stream, copies);
        if (TRACE) {
            long end = System.nanoTime();
            LOG.log(
                    Level.INFO,
                    "cuda-ipc trace: {0} copies ({1} small): context and kernel {2} us, copy engines {3} us, event {4} us",
                    copies.size(),
                    kernel == null ? 0 : small.size(),
                    (launched - start) / 1000,
                    (copied - launched) / 1000,
                    (end - copied) / 1000);
        }
    }

    /**
     * One {@code cuMemcpyAsync} each, except that a run of copies of one length whose addresses step by the same
     * amounts on both sides (a layer-major pool's layers: 64 copies at 4K tokens of Llama-3.1-8B) goes as one 2D
     * copy: one driver call instead of 64, in a handoff of 1.4 ms whose submitting thread was traced at 0.9 ms and
     * more (docs/benchmarks.md, pd-gpu-nvlink).
     */
    private void copyEngine(CUstream stream, List<T> large) {
        int n = large.size();
        int i = 0;
        while (i < n) {
            T a = large.get(i);
            int run = 1;
            long sourcePitch = 0;
            long destinationPitch = 0;
            if (!stridedRefused && i + 1 < n) {
                T b = large.get(i + 1);
                sourcePitch = b.source() - a.source();
                destinationPitch = b.destination() - a.destination();
                if (b.length() == a.length()
                        && sourcePitch >= a.length()
                        && destinationPitch >= a.length()
                        && sourcePitch <= MAX_PITCH
                        && destinationPitch <= MAX_PITCH) {
                    run = 2;
                    while (i + run < n && steps(a, large.get(i + run), run, sourcePitch, destinationPitch)) {
                        run++;
                    }
                }
            }
            if (run > 1 && strided(stream, a, sourcePitch, destinationPitch, run)) {
                i += run;
                continue;
            }
            JCudaDriver.cuMemcpyAsync(
                    DevicePointer.at(a.destination()), DevicePointer.at(a.source()), a.length(), stream);
            i++;
        }
    }

    private static boolean steps(Copy first, Copy c, int index, long sourcePitch, long destinationPitch) {
        return c.length() == first.length()
                && c.source() == first.source() + index * sourcePitch
                && c.destination() == first.destination() + index * destinationPitch;
    }

    /**
     * {@code rows} copies of {@code first}'s length as one 2D copy; false, with nothing enqueued, where the driver
     * refuses it (then no 2D copy is tried again, and they go one by one).
     */
    private boolean strided(CUstream stream, Copy first, long sourcePitch, long destinationPitch, int rows) {
        CUDA_MEMCPY2D c = new CUDA_MEMCPY2D();
        c.WidthInBytes = first.length();
        c.Height = rows;
        c.srcMemoryType = CUmemorytype.CU_MEMORYTYPE_UNIFIED;
        c.srcDevice = DevicePointer.at(first.source());
        c.srcPitch = sourcePitch;
        c.dstMemoryType = CUmemorytype.CU_MEMORYTYPE_UNIFIED;
        c.dstDevice = DevicePointer.at(first.destination());
        c.dstPitch = destinationPitch;
        try {
            JCudaDriver.cuMemcpy2DAsync(c, stream);
            return true;
        } catch (CudaException e) {
            stridedRefused = true;
            LOG.log(
                    Level.WARNING,
                    "cuda-ipc: a 2D copy was refused (" + e.getMessage() + "); strided copies go one by one");
            return false;
        }
    }

    /**
     * The address-copy kernel of {@code device}, loaded on first use; null where it cannot load (the reason is logged
     * once, and copies go one by one). The caller holds the device's lane lock and made its context current.
     */
    private @Nullable AddressCopyKernel kernel(int device) {
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
                LOG.log(
                        Level.WARNING,
                        "cuda-ipc: the address-copy kernel cannot be loaded (" + e.getMessage()
                                + "); small requests are copied one by one");
                return null;
            }
        }
        return k;
    }

    /** The device's lane, created on first use: a non-blocking stream, and a completion queue with its thread. */
    private Lane<T> lane(int device) {
        return lanes.computeIfAbsent(device, d -> {
            cuda.makeCurrent(d);
            CUstream s = new CUstream();
            JCudaDriver.cuStreamCreate(s, CUstream_flags.CU_STREAM_NON_BLOCKING);
            return new Lane<>(s, new CompletionQueue<>(cuda.context(d), role + "-" + d, EVENT_FLAGS, completed));
        });
    }

    /**
     * Reports the copies still queued (waiting up to {@code waitMillis} per device), stops the completion threads, then
     * frees each device's kernel (once its stream is idle), stream and events.
     */
    void close(long waitMillis) {
        for (Map.Entry<Integer, Lane<T>> l : lanes.entrySet()) {
            try {
                l.getValue().completions().close(waitMillis);
                cuda.makeCurrent(l.getKey());
                CUstream stream = l.getValue().stream();
                AddressCopyKernel kernel = kernels.remove(l.getKey());
                if (kernel != null) {
                    JCudaDriver.cuStreamSynchronize(stream); // its lists may still be read
                    kernel.close();
                }
                JCudaDriver.cuStreamDestroy(stream);
            } catch (CudaException e) {
                LOG.log(Level.DEBUG, "destroying a cuda-ipc stream", e);
            }
        }
    }
}
