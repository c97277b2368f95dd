package io.hicache.cuda;

import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.LayerSignals;
import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicLong;
import jcuda.driver.CUcontext;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * An ordered queue of copies on one or more CUDA streams ("lanes"), with its completion thread. Copies are enqueued
 * in submission order under a lock; after each launch an event is recorded on its lane, and the completion thread
 * ("hicache-cuda-NAME", a {@link CompletionQueue}) waits on the events in the order they were recorded and signals the
 * copy's layers (one event may signal a group of them). With several lanes a copy's launches alternate between them,
 * so one launch overlaps the previous one's tail; each copy's index list is uploaded on the first lane once the
 * previous copy's last event has fired, and the other lanes wait for that upload, so copies still run in submission
 * order. The thread never dies on a failed copy: it fails that copy's signals, logs and counts, and goes on.
 *
 * <p>Thread-safe. The owning pool closes it after its copies are done.
 */
final class CudaStream implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CudaStream.class.getName());

    /**
     * What one event completes: layers [layer, layer + layers) (or layer -1: all; -2: nothing but itself), and whether
     * it ends its copy.
     */
    private record Pending(LayerSignals signals, int layer, int layers, boolean endsCopy, String what) {
        Pending(LayerSignals signals, int layer, boolean endsCopy, String what) {
            this(signals, layer, 1, endsCopy, what);
        }
    }

    /** Enqueues the launches of one copy; called with the stream lock held and the context current. */
    @FunctionalInterface
    interface Launches {
        void enqueue(CudaStream stream, long indexAddress, LayerSignals signals);
    }

    private final CUcontext context;
    private final CUstream[] lanes;
    /** The event that ends the last copy submitted, or null before the first. */
    private @Nullable CUevent previousLast;

    private final IndexRing indices;
    private final AtomicLong failures = new AtomicLong();
    private final CompletionQueue<Pending> completions;
    private volatile boolean closed;

    /** Lanes of the device's default priority, or of its greatest where {@code prioritized}. */
    CudaStream(CUcontext context, String name, int laneCount, long indexCapacityInts, boolean prioritized) {
        this.context = context;
        JCudaDriver.cuCtxSetCurrent(context);
        int priority = 0;
        if (prioritized) {
            int[] least = new int[1];
            int[] greatest = new int[1];
            JCudaDriver.cuCtxGetStreamPriorityRange(least, greatest);
            priority = greatest[0]; // numerically the lowest
        }
        this.lanes = new CUstream[laneCount];
        for (int i = 0; i < laneCount; i++) {
            lanes[i] = new CUstream();
            JCudaDriver.cuStreamCreateWithPriority(lanes[i], CUstream_flags.CU_STREAM_NON_BLOCKING, priority);
        }
        this.indices = new IndexRing(indexCapacityInts);
        this.completions =
                new CompletionQueue<>(context, "cuda-" + name, CUevent_flags.CU_EVENT_DISABLE_TIMING, this::completed);
    }

    /** The lane that launch number {@code launch} of a copy goes on. */
    CUstream lane(int launch) {
        return lanes[launch % lanes.length];
    }

    /**
     * Submits one copy of {@code layers} layers whose page index list is {@code pairs} (device pages, then host
     * slots); {@code launches} enqueues its work and calls {@link #recordLayers} or {@link #recordAll}.
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
                // The first lane waits for the previous copy, uploads the index list, and the other lanes wait for
                // that upload: so this copy starts after the previous one ends, on every lane.
                if (lanes.length > 1 && previousLast != null) {
                    JCudaDriver.cuStreamWaitEvent(lanes[0], previousLast, 0);
                }
                long indexAddress = indices.upload(pairs, lanes[0]);
                if (lanes.length > 1) {
                    CUevent uploaded = record(lanes[0], new Pending(signals, -2, false, what));
                    for (int i = 1; i < lanes.length; i++) {
                        JCudaDriver.cuStreamWaitEvent(lanes[i], uploaded, 0);
                    }
                }
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

    /**
     * Records that layers [{@code layer}, {@code layer + layers}) of the copy, launched as launch number {@code launch},
     * are enqueued: one event signals them all; {@code last} when it is the copy's last launch.
     */
    void recordLayers(LayerSignals signals, int layer, int layers, int launch, boolean last, String what) {
        if (last) {
            joinLanesInto(lane(launch), signals, what);
        }
        record(lane(launch), new Pending(signals, layer, layers, last, what));
    }

    /**
     * Makes {@code target} wait for everything enqueued so far on the other lanes, so that the event recorded on it next
     * means the whole copy is done: the next copy waits on that one event.
     */
    private void joinLanesInto(CUstream target, LayerSignals signals, String what) {
        for (CUstream lane : lanes) {
            if (lane != target) {
                CUevent done = record(lane, new Pending(signals, -2, false, what));
                JCudaDriver.cuStreamWaitEvent(target, done, 0);
            }
        }
    }

    /** Records that the whole copy, launched on the first lane, is enqueued (a backup). */
    void recordAll(LayerSignals signals, String what) {
        record(lanes[0], new Pending(signals, -1, true, what));
    }

    private void recordEnd(LayerSignals signals, String what) {
        // The end marker follows everything this copy enqueued, on every lane.
        joinLanesInto(lanes[0], signals, what);
        record(lanes[0], new Pending(signals, -2, true, what));
    }

    /** Records {@code p}'s event on {@code lane}, to be completed in order; the event ending a copy is the next one's. */
    private CUevent record(CUstream lane, Pending p) {
        CUevent event = completions.record(lane, p);
        if (p.endsCopy()) {
            previousLast = event;
        }
        return event;
    }

    /** On the completion thread, in the order the events were recorded: signals the layer, or fails the copy. */
    private void completed(Pending p, @Nullable Throwable failure) {
        try {
            if (failure == null) {
                try {
                    if (p.layer() >= 0) {
                        for (int l = p.layer(); l < p.layer() + p.layers(); l++) {
                            p.signals().landed(l);
                        }
                    } else if (p.layer() == -1) {
                        p.signals().allLanded();
                    }
                } catch (Throwable t) {
                    failure = t;
                }
            }
            if (failure != null) {
                failures.incrementAndGet();
                LOG.log(Level.ERROR, "CUDA copy failed: " + p.what(), failure);
                p.signals().fail(p.what(), failure);
            }
        } finally {
            if (p.endsCopy()) {
                indices.releaseOldest();
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
        completions.close(); // reports every copy enqueued before (bounded), then frees its events
        JCudaDriver.cuCtxSetCurrent(context);
        for (CUstream lane : lanes) {
            JCudaDriver.cuStreamSynchronize(lane);
        }
        indices.close();
        for (CUstream lane : lanes) {
            JCudaDriver.cuStreamDestroy(lane);
        }
    }
}
