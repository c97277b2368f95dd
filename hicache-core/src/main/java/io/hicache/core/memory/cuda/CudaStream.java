package io.hicache.core.memory.cuda;

import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.LayerSignals;
import java.lang.System.Logger.Level;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import jcuda.driver.CUcontext;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * A CUDA stream with its completion thread. Copies are enqueued in submission order under a lock; after each
 * launch an event is recorded, and the completion thread ("hicache-cuda-NAME") waits on the events in order and
 * signals the copy's layers, so per-layer futures complete in stream order. The thread never dies on a failed
 * copy: it fails that copy's signals, logs and counts, and goes on.
 *
 * <p>Thread-safe. The owning pool closes it after its copies are done.
 */
final class CudaStream implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CudaStream.class.getName());

    /** One event to wait for: the layer it completes (or -1: all), and whether it ends its copy. */
    private record Pending(CUevent event, LayerSignals signals, int layer, boolean endsCopy, String what) {
    }

    /** Enqueues the launches of one copy; called with the stream lock held and the context current. */
    @FunctionalInterface
    interface Launches {
        void enqueue(CudaStream stream, long indexAddress, LayerSignals signals);
    }

    private static final Pending STOP = new Pending(null, null, 0, false, "stop");

    private final CUcontext context;
    private final CUstream stream = new CUstream();
    private final IndexRing indices;
    private final BlockingQueue<Pending> pending = new LinkedBlockingQueue<>();
    private final ConcurrentLinkedQueue<CUevent> freeEvents = new ConcurrentLinkedQueue<>();
    private final AtomicLong failures = new AtomicLong();
    private final Thread completions;
    private volatile boolean closed;

    CudaStream(CUcontext context, String name, long indexCapacityInts) {
        this.context = context;
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING);
        this.indices = new IndexRing(indexCapacityInts);
        this.completions = Thread.ofPlatform().daemon().name("hicache-cuda-" + name).start(this::completeInOrder);
    }

    CUstream handle() {
        return stream;
    }

    /**
     * Submits one copy of {@code layers} layers whose page index list is {@code pairs} (device pages, then host
     * slots); {@code launches} enqueues its work and calls {@link #recordLayer} or {@link #recordAll}.
     */
    KvCopy submit(int layers, int[] pairs, Launches launches, String what) {
        LayerSignals signals = new LayerSignals(layers);
        if (pairs.length == 0) {
            signals.allLanded();
            return signals;
        }
        synchronized (this) {
            if (closed) {
                signals.fail(what, new IllegalStateException("the CUDA stream is closed"));
                return signals;
            }
            try {
                JCudaDriver.cuCtxSetCurrent(context);
                long indexAddress = indices.upload(pairs);
                try {
                    launches.enqueue(this, indexAddress, signals);
                } catch (RuntimeException e) {
                    // Whatever was enqueued still runs; the region goes back when the queue reaches this marker.
                    recordEnd(signals, what);
                    throw e;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                signals.fail(what, e);
            } catch (RuntimeException e) {
                failures.incrementAndGet();
                signals.fail(what, e);
            }
        }
        return signals;
    }

    /** Records that layer {@code layer} of the copy is enqueued; {@code last} when it is the copy's last launch. */
    void recordLayer(LayerSignals signals, int layer, boolean last, String what) {
        pending.add(new Pending(record(), signals, layer, last, what));
    }

    /** Records that the whole copy is enqueued (a backup). */
    void recordAll(LayerSignals signals, String what) {
        pending.add(new Pending(record(), signals, -1, true, what));
    }

    private void recordEnd(LayerSignals signals, String what) {
        pending.add(new Pending(record(), signals, -2, true, what));
    }

    private CUevent record() {
        CUevent event = freeEvents.poll();
        if (event == null) {
            event = new CUevent();
            JCudaDriver.cuEventCreate(event, CUevent_flags.CU_EVENT_DISABLE_TIMING);
        }
        JCudaDriver.cuEventRecord(event, stream);
        return event;
    }

    private void completeInOrder() {
        JCudaDriver.cuCtxSetCurrent(context);
        while (true) {
            Pending p;
            try {
                p = pending.take();
            } catch (InterruptedException e) {
                if (closed) {
                    return;
                }
                continue;
            }
            if (p == STOP) {
                return;
            }
            try {
                JCudaDriver.cuEventSynchronize(p.event());
                if (p.layer() >= 0) {
                    p.signals().landed(p.layer());
                } else if (p.layer() == -1) {
                    p.signals().allLanded();
                }
            } catch (Throwable t) {
                failures.incrementAndGet();
                LOG.log(Level.ERROR, "CUDA copy failed: " + p.what(), t);
                p.signals().fail(p.what(), t);
            } finally {
                freeEvents.add(p.event());
                if (p.endsCopy()) {
                    indices.releaseOldest();
                }
            }
        }
    }

    /** Copies on this stream that failed (each also failed its futures and was logged). */
    long failures() {
        return failures.get();
    }

    /** Waits until every enqueued copy has completed, then frees the stream, its events and its index ring. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        pending.add(STOP);
        try {
            completions.join(TimeUnit.MINUTES.toMillis(2));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuStreamSynchronize(stream);
        for (CUevent e : freeEvents) {
            JCudaDriver.cuEventDestroy(e);
        }
        indices.close();
        JCudaDriver.cuStreamDestroy(stream);
    }
}
