package io.hicache.cuda;

import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import jcuda.driver.CUcontext;
import jcuda.driver.CUevent;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * Work enqueued on CUDA streams, reported in the order it was recorded: {@link #record} records an event on a stream
 * after the work enqueued there and queues the caller's item with it; one thread ({@code hicache-ROLE}) waits for the
 * events in that order and hands each item to the {@link Completion}, with what waiting for its event threw, if
 * anything. Events are recycled once their item has been reported. A pool's copies ({@link CudaStream}) and the cuda-ipc
 * transport's copies are reported through it.
 *
 * <p>Thread-safe. Items reach the completion in the order {@link #record} was called: a caller whose reports must follow
 * a stream's order records under the lock it enqueues that stream's work with. The thread never dies: a completion that
 * throws is logged and the thread goes on. The creator closes the queue once nothing more is recorded; closing reports
 * everything recorded before (bounded), then destroys the spare events.
 *
 * @param <T> what the caller reports when an event fired: its copies, its layer signals
 */
public final class CompletionQueue<T> implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CompletionQueue.class.getName());
    /** How long {@link #close()} waits for the work recorded before it: a pool's longest copies end well within it. */
    private static final long CLOSE_WAIT_MILLIS = TimeUnit.MINUTES.toMillis(2);

    /** Reports one item once its event fired, or waiting for it failed. Runs on the queue's thread: keep it short. */
    @FunctionalInterface
    public interface Completion<T> {
        /**
         * The work recorded before {@code item}'s event has ended ({@code failure} null), or waiting for the event threw
         * {@code failure} (the work or an earlier one on the stream failed).
         */
        void completed(T item, @Nullable Throwable failure);
    }

    /** One event to wait for and what to report then; {@link #STOP} ends the thread. */
    private record Entry<T>(CUevent event, T item) {}

    @SuppressWarnings("NullAway") // the end marker, only compared by identity: its null event and item are never read
    private static final Entry<Object> STOP = new Entry<>(null, null);

    private final CUcontext context;
    private final int eventFlags;
    private final Completion<T> completion;
    private final BlockingQueue<Entry<?>> pending = new LinkedBlockingQueue<>();
    private final ConcurrentLinkedQueue<CUevent> spareEvents = new ConcurrentLinkedQueue<>();
    private final Thread thread;
    /** Set under this queue's lock, so that nothing is queued behind {@link #STOP}. */
    private volatile boolean closed;

    /**
     * Starts the completion thread {@code hicache-<role>}, which makes {@code context} current; events are created with
     * {@code eventFlags} ({@code CUevent_flags}: {@code CU_EVENT_DISABLE_TIMING}, and {@code CU_EVENT_BLOCKING_SYNC} for
     * a thread that should sleep rather than spin while it waits).
     */
    public CompletionQueue(CUcontext context, String role, int eventFlags, Completion<T> completion) {
        this.context = context;
        this.eventFlags = eventFlags;
        this.completion = completion;
        this.thread = Threads.start(role, this::completeInOrder);
    }

    /**
     * Records an event on {@code stream} after the work enqueued there so far, and queues {@code item} to be reported
     * when it fires. The caller made the stream's context current. Returns the event, on which other streams may wait
     * until its item has been reported (then it is recorded again for later work).
     *
     * @throws IllegalStateException once the queue is closed
     * @throws jcuda.CudaException   when the event cannot be created or recorded (nothing is queued then)
     */
    public CUevent record(CUstream stream, T item) {
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("the completion queue is closed");
            }
            CUevent event = spareEvents.poll();
            if (event == null) {
                event = new CUevent();
                JCudaDriver.cuEventCreate(event, eventFlags);
            }
            JCudaDriver.cuEventRecord(event, stream);
            pending.add(new Entry<>(event, item));
            return event;
        }
    }

    @SuppressWarnings("unchecked")
    private void completeInOrder() {
        JCudaDriver.cuCtxSetCurrent(context);
        while (true) {
            Entry<T> e;
            try {
                e = (Entry<T>) pending.take();
            } catch (InterruptedException interrupted) {
                if (closed) {
                    return;
                }
                continue;
            }
            if (e == STOP) {
                return;
            }
            Throwable failure = null;
            try {
                JCudaDriver.cuEventSynchronize(e.event());
            } catch (Throwable t) {
                failure = t;
            }
            try {
                completion.completed(e.item(), failure);
            } catch (Throwable t) {
                LOG.log(Level.ERROR, "reporting a CUDA completion failed; the queue goes on", t);
            } finally {
                spareEvents.add(e.event());
            }
        }
    }

    /** Closes within {@value #CLOSE_WAIT_MILLIS} ms: see {@link #close(long)}. */
    @Override
    public void close() {
        close(CLOSE_WAIT_MILLIS);
    }

    /**
     * Refuses new records, waits up to {@code waitMillis} until everything recorded before has been reported, stops the
     * thread and destroys the spare events. Idempotent.
     */
    public void close(long waitMillis) {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            pending.add(STOP);
        }
        try {
            thread.join(waitMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        JCudaDriver.cuCtxSetCurrent(context);
        for (CUevent e; (e = spareEvents.poll()) != null; ) {
            JCudaDriver.cuEventDestroy(e);
        }
    }
}
