package io.hicache.core.memory.emulated;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.memory.DeviceInfo;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A device emulated in host memory, so that the whole cache runs, and is tested, on machines without a GPU. It
 * models what the CUDA runtime does as far as a caller can see: a fixed amount of device memory, pools laid
 * out as {@link DeviceLayout} says, copies that complete asynchronously in stream order with a signal per
 * layer, and the same errors. Copies run on a small pool of named copy threads.
 *
 * <p>Thread-safe. Closing it closes its pools and stops its threads.
 */
public final class EmulatedDeviceRuntime implements DeviceRuntime {
    /** What adopted memory must be aligned to: CUDA's allocations are (at least) 256-byte aligned. */
    static final long ADOPTED_ALIGNMENT = 256;

    private static final System.Logger LOG = System.getLogger(EmulatedDeviceRuntime.class.getName());
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private final long memoryBytes;
    private final int copyThreads;
    private final ExecutorService copyExecutor;
    private final AtomicLong usedBytes = new AtomicLong();
    private final AtomicLong copyFailures = new AtomicLong();
    private final Set<EmulatedKvPool> pools = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();

    /** An emulated device of {@code memoryBytes} bytes whose copies use {@code copyThreads} threads. */
    public EmulatedDeviceRuntime(long memoryBytes, int copyThreads) {
        this.memoryBytes = Checks.checkPositive(memoryBytes, "memoryBytes");
        this.copyThreads = Checks.checkPositive(copyThreads, "copyThreads");
        int instance = INSTANCES.incrementAndGet();
        this.copyExecutor = Executors.newFixedThreadPool(copyThreads, Threads.factory("copy-" + instance));
    }

    @Override
    public String name() {
        return "emulated";
    }

    @Override
    public DeviceInfo info() {
        return new DeviceInfo(
                "emulated",
                "emulated device in host memory (" + copyThreads + " copy threads)",
                0,
                memoryBytes,
                memoryBytes - usedBytes.get());
    }

    @Override
    public KvPool createPool(PageFormat format, int pages) {
        Checks.requireState(!closed.get(), "the emulated device runtime is closed");
        Checks.checkNotNull(format, "format");
        Checks.checkPositive(pages, "pages");
        long bytes = DeviceLayout.poolBytes(format, pages);
        long used = usedBytes.addAndGet(bytes);
        if (used > memoryBytes) {
            usedBytes.addAndGet(-bytes);
            throw new HiCacheException(
                    ErrorCode.DEVICE_OUT_OF_MEMORY,
                    "a KV pool of " + pages + " pages of "
                            + Units.formatBytes(format.pageBytes()) + " needs " + Units.formatBytes(bytes)
                            + "; the emulated device has "
                            + Units.formatBytes(memoryBytes - used + bytes) + " free of "
                            + Units.formatBytes(memoryBytes)
                            + " (device.memory)");
        }
        try {
            EmulatedKvPool pool = new EmulatedKvPool(this, format, pages);
            pools.add(pool);
            return pool;
        } catch (OutOfMemoryError | RuntimeException e) {
            usedBytes.addAndGet(-bytes);
            throw new HiCacheException(
                    ErrorCode.DEVICE_OUT_OF_MEMORY,
                    "cannot allocate " + Units.formatBytes(bytes) + " of host memory for the emulated device: " + e,
                    e);
        }
    }

    @Override
    @SuppressWarnings("restricted") // the engine's memory, by address: what adopting means
    public KvPool adoptPool(PageFormat format, int pages, long address, long bytes) {
        Checks.requireState(!closed.get(), "the emulated device runtime is closed");
        Checks.checkNotNull(format, "format");
        Checks.checkPositive(pages, "pages");
        long needed = DeviceLayout.poolBytes(format, pages);
        Checks.requireArgument(
                address != 0 && address % ADOPTED_ALIGNMENT == 0,
                "the adopted memory's address 0x%s is not aligned to %s bytes",
                Long.toHexString(address),
                ADOPTED_ALIGNMENT);
        Checks.requireArgument(
                bytes >= needed,
                "the adopted memory has %s bytes; %s pages of %s need %s",
                bytes,
                pages,
                format.pageBytes(),
                needed);
        // The engine's memory, as the engine's kernels see it: the pool copies into it and never frees it.
        EmulatedKvPool pool = new EmulatedKvPool(
                this, format, pages, MemorySegment.ofAddress(address).reinterpret(needed));
        pools.add(pool);
        return pool;
    }

    @Override
    public HostRegistration registerHost(MemorySegment memory) {
        Checks.checkNotNull(memory, "memory");
        long bytes = memory.byteSize();
        // Host memory is already device memory here: nothing to pin.
        return new HostRegistration() {
            @Override
            public long bytes() {
                return bytes;
            }

            @Override
            public boolean pinned() {
                return false;
            }

            @Override
            public void close() {}
        };
    }

    /** Copies that failed since the runtime started; each one was also logged and failed its copy. */
    public long copyFailures() {
        return copyFailures.get();
    }

    int copyThreads() {
        return copyThreads;
    }

    ExecutorService copyExecutor() {
        return copyExecutor;
    }

    void copyFailed(Throwable t) {
        copyFailures.incrementAndGet();
        LOG.log(Level.ERROR, "emulated device: a copy failed", t);
    }

    void released(EmulatedKvPool pool) {
        if (pools.remove(pool) && pool.ownsMemory()) {
            usedBytes.addAndGet(-pool.bytes());
        }
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (EmulatedKvPool pool : List.copyOf(pools)) {
            pool.close();
        }
        copyExecutor.shutdown();
    }
}
