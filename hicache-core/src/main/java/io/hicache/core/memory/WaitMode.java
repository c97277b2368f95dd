package io.hicache.core.memory;

/**
 * How a thread waits for a {@link KvCopy}. A parked thread costs no CPU, but its wake-up adds the scheduler's
 * latency: about 190 µs on the lent H200 machine (a VM) at the end of a 2.8 ms load, 7% of it. A spinning thread
 * sees the copy end within a microsecond and holds a core until then, as
 * {@code cuStreamSynchronize} does under CUDA's default scheduling. Spin where the wait is on the critical path of a
 * request (a scheduler waiting for a layer before attention) and a core is free for it; park everywhere else.
 */
public enum WaitMode {
    /** Sleep until the copy completes. */
    PARK,
    /** Busy-wait, checking the deadline and the thread's interrupt status as it goes. */
    SPIN
}
