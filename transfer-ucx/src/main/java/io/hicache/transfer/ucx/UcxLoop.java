package io.hicache.transfer.ucx;

import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.openucx.jucx.ucp.UcpContext;
import org.openucx.jucx.ucp.UcpWorker;
import org.openucx.jucx.ucp.UcpWorkerParams;

/**
 * One UCP worker and the named thread that owns it ({@code hicache-ucx-<engine>-<n>}): every call on the worker, its
 * endpoints and their remote keys happens on that thread. Others hand it work with {@link #execute}, which wakes it.
 * After its last work it keeps polling for {@code spinNanos} (UCX's shared-memory and TCP transports emulate a peer's
 * reads and writes in this worker, and a wake-up per message would cost more than the copy); idle longer, it sleeps in
 * UCX's blocking wait on the worker's event descriptor (armed for RMA, send and receive events). The transport's sweep
 * wakes it periodically so that deadlines hold even when UCX reports nothing.
 *
 * <p>The loop never dies silently: a failing task or progress call is logged and the loop goes on. Thread-safe through
 * {@link #execute}; closed by the transport, which waits for the thread to close the worker.
 */
final class UcxLoop implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(UcxLoop.class.getName());
    private static final int FENCE_BUFFERS = 4096;

    private final UcpWorker worker;
    private final String address;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    /** Lanes with work to issue; touched on the loop thread only. */
    private final Set<UcxLane> dirty = new LinkedHashSet<>();
    /** Every lane on this loop; loop thread only. */
    private final Set<UcxLane> lanes = new LinkedHashSet<>();

    private final Arena arena = Arena.ofShared();
    private final ArrayDeque<MemorySegment> fenceBuffers = new ArrayDeque<>();
    private final CountDownLatch stopped = new CountDownLatch(1);
    private final long spinNanos;
    /** Guards {@link #running} turning false, the last drain of the tasks and the worker's destruction. */
    private final Object lifecycle = new Object();

    private volatile boolean running = true;
    private boolean workerClosed;

    UcxLoop(UcpContext ucp, String engineName, int index, long spinNanos) {
        this.spinNanos = spinNanos;
        this.worker = ucp.newWorker(
                new UcpWorkerParams().requestWakeupRMA().requestWakeupTX().requestWakeupRX());
        this.address = UcxTransport.hex(worker.getAddress());
        MemorySegment block = arena.allocate((long) FENCE_BUFFERS * Long.BYTES, 64);
        for (int i = 0; i < FENCE_BUFFERS; i++) {
            fenceBuffers.add(block.asSlice((long) i * Long.BYTES, Long.BYTES));
        }
        this.thread = Thread.ofPlatform()
                .name("hicache-ucx-" + engineName + "-" + index)
                .daemon(true)
                .unstarted(this::run);
        thread.start();
    }

    /** This worker's UCP address, hex: what peers connect to. */
    String address() {
        return address;
    }

    UcpWorker worker() {
        return worker;
    }

    boolean onLoop() {
        return Thread.currentThread() == thread;
    }

    /**
     * Runs {@code task} on the loop thread, soon. False when the loop has stopped: the task will never run, and the
     * caller ends what it carried.
     */
    boolean execute(Runnable task) {
        synchronized (lifecycle) {
            if (!running) {
                return false;
            }
            tasks.add(task);
            try {
                worker.signal();
            } catch (RuntimeException e) {
                // UCX refused the wake-up: the sweep wakes the loop within its period, and the task runs then
            }
            return true;
        }
    }

    /**
     * Waits (at most {@code millis}) until this loop ran its worker's progress to idle once more: what peers already
     * sent into this worker (UCX's shared-memory and TCP transports apply peers' writes here) has landed. False when
     * it did not happen in time or the loop has stopped.
     */
    boolean drain(long millis) {
        if (onLoop()) {
            return false;
        }
        CountDownLatch done = new CountDownLatch(1);
        if (!execute(() -> {
            try {
                for (int i = 0; i < 10_000 && worker.progress() > 0; i++) {
                    // until idle
                }
            } catch (Exception e) {
                LOG.log(Level.WARNING, "ucx progress failed while draining", e);
            } finally {
                done.countDown();
            }
        })) {
            return false;
        }
        try {
            return done.await(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Loop thread: {@code lane} has work to issue after the current progress call returns. */
    void markDirty(UcxLane lane) {
        dirty.add(lane);
    }

    /** Loop thread: {@code lane} lives here until it closes. */
    void attach(UcxLane lane) {
        lanes.add(lane);
    }

    /** Loop thread. */
    void detach(UcxLane lane) {
        lanes.remove(lane);
        dirty.remove(lane);
    }

    /** Loop thread: an 8-byte buffer for a fence read, or null when all are in use. */
    MemorySegment takeFenceBuffer() {
        return fenceBuffers.poll();
    }

    /** Loop thread. */
    void giveFenceBuffer(MemorySegment b) {
        fenceBuffers.add(b);
    }

    /** Loop thread: deadlines, dead peers and unwanted slices of every lane. */
    void sweep() {
        for (UcxLane lane : List.copyOf(lanes)) {
            lane.sweep();
        }
    }

    private void run() {
        long lastWorkNanos = System.nanoTime();
        try {
            while (running) {
                try {
                    boolean busy = false;
                    for (Runnable t = tasks.poll(); t != null; t = tasks.poll()) {
                        t.run();
                        busy = true;
                    }
                    while (worker.progress() > 0) {
                        busy = true;
                    }
                    while (!dirty.isEmpty()) {
                        List<UcxLane> now = new ArrayList<>(dirty);
                        dirty.clear();
                        for (UcxLane lane : now) {
                            lane.pump();
                        }
                        busy = true;
                    }
                    if (busy) {
                        lastWorkNanos = System.nanoTime();
                    } else if (System.nanoTime() - lastWorkNanos < spinNanos) {
                        Thread.onSpinWait();
                    } else if (tasks.isEmpty() && running) {
                        worker.waitForEvents(); // returns at once when an event or a signal came since the last arm
                        lastWorkNanos = System.nanoTime();
                    }
                } catch (Throwable e) {
                    LOG.log(Level.WARNING, Thread.currentThread().getName() + ": step failed; the loop goes on", e);
                    Thread.sleep(10);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            shutdown();
        }
    }

    private void shutdown() {
        try {
            List<Runnable> last = new ArrayList<>();
            synchronized (lifecycle) { // running is false: nothing is added after this
                for (Runnable t = tasks.poll(); t != null; t = tasks.poll()) {
                    last.add(t);
                }
            }
            for (Runnable t : last) {
                try {
                    t.run();
                } catch (RuntimeException e) {
                    LOG.log(Level.WARNING, "ucx task failed at close", e);
                }
            }
            for (UcxLane lane : List.copyOf(lanes)) {
                lane.closeOnLoop("the ucx transport closed");
            }
            for (int i = 0; i < 100 && worker.progress() > 0; i++) {
                // let forced endpoint closes finish
            }
        } catch (Exception e) {
            LOG.log(Level.WARNING, "ucx worker did not close cleanly", e);
        } finally {
            try {
                synchronized (lifecycle) {
                    workerClosed = true;
                    worker.close();
                }
            } finally {
                arena.close();
                stopped.countDown();
            }
        }
    }

    /** Stops the loop and waits for it; false when it did not stop within 10 s (its worker is then left open). */
    boolean stop() {
        synchronized (lifecycle) {
            running = false;
            if (!workerClosed) {
                try {
                    worker.signal();
                } catch (RuntimeException e) {
                    // the loop may be busy; it sees running turn false at its next step
                }
            }
        }
        try {
            if (stopped.await(10, TimeUnit.SECONDS)) {
                return true;
            }
            LOG.log(Level.WARNING, thread.getName() + " did not stop within 10 s");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return false;
    }

    @Override
    public void close() {
        stop();
    }
}
