package io.hicache.bench;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * A diagnostic, not a figure: samples the stack of one thread every 200 µs while it is inside a marked call, and
 * counts the innermost project frames (three deep), so that a run on a machine without a profiler (the GPU machine's
 * packed runtime has no JFR) can say where a call spends its time. Thread-safe; {@link #close} stops the sampler.
 */
final class CallSampler implements AutoCloseable {
    private final AtomicReference<Thread> inside = new AtomicReference<>();
    private final Map<String, Integer> counts = new HashMap<>();
    private final Thread sampler;
    private volatile boolean stopped;
    private int samples;

    CallSampler() {
        sampler = Thread.ofPlatform().daemon().name("hicache-bench-sampler").start(this::sample);
    }

    /** Marks the calling thread as inside the sampled call until {@link #leave}. */
    void enter() {
        inside.set(Thread.currentThread());
    }

    void leave() {
        inside.set(null);
    }

    private void sample() {
        while (!stopped) {
            Thread t = inside.get();
            if (t != null) {
                StackTraceElement[] stack = t.getStackTrace();
                if (inside.get() == t) {
                    record(stack);
                }
            }
            LockSupport.parkNanos(200_000);
        }
    }

    private synchronized void record(StackTraceElement[] stack) {
        samples++;
        StringBuilder key = new StringBuilder();
        int project = 0;
        for (StackTraceElement e : stack) {
            boolean ours = e.getClassName().startsWith("io.hicache.");
            if (key.isEmpty() && !ours) {
                key.append(e.getClassName().substring(e.getClassName().lastIndexOf('.') + 1))
                        .append('.')
                        .append(e.getMethodName())
                        .append(" < ");
                continue;
            }
            if (ours) {
                key.append(e.getClassName().substring(e.getClassName().lastIndexOf('.') + 1))
                        .append('.')
                        .append(e.getMethodName())
                        .append(':')
                        .append(e.getLineNumber());
                if (++project == 3) {
                    break;
                }
                key.append(" < ");
            }
        }
        counts.merge(key.toString(), 1, Integer::sum);
    }

    /** The {@code top} most sampled stacks, with their share of the samples. */
    synchronized List<String> top(int top) {
        int all = Math.max(1, samples);
        return counts.entrySet().stream()
                .sorted(Map.Entry.<String, Integer>comparingByValue().reversed())
                .limit(top)
                .map(e -> String.format("%5.1f%% %s", 100.0 * e.getValue() / all, e.getKey()))
                .toList();
    }

    @Override
    public void close() {
        stopped = true;
        try {
            sampler.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
