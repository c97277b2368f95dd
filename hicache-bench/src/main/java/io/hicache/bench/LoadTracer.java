package io.hicache.bench;

import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceInfo;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A diagnosis for the GPU replay ({@code -Dhicache.bench.gpu-replay.trace-loads=true}): a runtime whose pools stamp
 * each load's phases, so that a load-back's wait splits into the cache's work before the copy is asked for, the
 * submission (launches), the device until the first and the last layer land (seen by the completion thread), and the
 * waiting thread's wake-up; and which counts the backups in flight when a load starts (they share the device).
 *
 * <p>The stamps are of the latest load: read them after that load ended and before the next starts (the replay
 * loads one request at a time). Thread-safe otherwise; the pools and the delegate are the caller's to close as
 * usual.
 */
final class LoadTracer implements DeviceRuntime {
    private final DeviceRuntime delegate;
    private final AtomicInteger backupsInFlight = new AtomicInteger();
    volatile long entered;
    volatile long returned;
    volatile long firstLayer;
    volatile long done;
    volatile int backupsAtEntry;

    LoadTracer(DeviceRuntime delegate) {
        this.delegate = delegate;
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public DeviceInfo info() {
        return delegate.info();
    }

    @Override
    public KvPool createPool(PageFormat format, int pages) {
        return new Pool(delegate.createPool(format, pages));
    }

    @Override
    public KvPool adoptPool(PageFormat format, int pages, long address, long bytes) {
        return new Pool(delegate.adoptPool(format, pages, address, bytes));
    }

    @Override
    public HostRegistration registerHost(MemorySegment memory) {
        return delegate.registerHost(memory);
    }

    /** Closes nothing: the caller closes the runtime it wrapped. */
    @Override
    public void close() {}

    private KvCopy countBackup(KvCopy copy) {
        backupsInFlight.incrementAndGet();
        copy.done().whenComplete((v, e) -> backupsInFlight.decrementAndGet());
        return copy;
    }

    /**
     * A load whose first layer and end complete only after they were stamped, so that whoever sees them complete sees
     * the stamps too.
     */
    private final class Stamped implements KvCopy {
        private final KvCopy copy;
        private final CompletableFuture<Void> first;
        private final CompletableFuture<Void> end;

        Stamped(KvCopy copy) {
            this.copy = copy;
            this.first = copy.layerDone(0).whenComplete((v, e) -> firstLayer = System.nanoTime());
            this.end = copy.done().whenComplete((v, e) -> done = System.nanoTime());
        }

        @Override
        public int layers() {
            return copy.layers();
        }

        @Override
        public CompletableFuture<Void> layerDone(int layer) {
            return layer == 0 ? first : copy.layerDone(layer);
        }

        @Override
        public CompletableFuture<Void> done() {
            return end;
        }
    }

    private final class Pool implements KvPool {
        private final KvPool pool;

        Pool(KvPool pool) {
            this.pool = pool;
        }

        @Override
        public PageFormat format() {
            return pool.format();
        }

        @Override
        public int pages() {
            return pool.pages();
        }

        @Override
        public PageAllocator allocator() {
            return pool.allocator();
        }

        @Override
        public KvCopy backup(int[] devicePages, HostSlab host, int[] hostSlots) {
            return countBackup(pool.backup(devicePages, host, hostSlots));
        }

        @Override
        public KvCopy load(HostSlab host, int[] hostSlots, int[] devicePages) {
            entered = System.nanoTime();
            backupsAtEntry = backupsInFlight.get();
            KvCopy copy = pool.load(host, hostSlots, devicePages);
            returned = System.nanoTime();
            return new Stamped(copy);
        }

        @Override
        public KvCopy backupLayers(int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount) {
            return countBackup(pool.backupLayers(devicePages, host, hostSlots, firstLayer, layerCount));
        }

        @Override
        public KvCopy loadLayers(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount) {
            return pool.loadLayers(host, hostSlots, devicePages, firstLayer, layerCount);
        }

        @Override
        public void writePage(int devicePage, MemorySegment flat) {
            pool.writePage(devicePage, flat);
        }

        @Override
        public void readPage(int devicePage, MemorySegment flat) {
            pool.readPage(devicePage, flat);
        }

        @Override
        public Optional<MemorySegment> hostVisibleMemory() {
            return pool.hostVisibleMemory();
        }

        @Override
        public DeviceBuffers buffers() {
            return pool.buffers();
        }

        @Override
        public long bytes() {
            return pool.bytes();
        }

        @Override
        public void close() {
            pool.close();
        }
    }
}
