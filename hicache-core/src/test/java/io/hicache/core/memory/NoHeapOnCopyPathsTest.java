package io.hicache.core.memory;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.management.ThreadMXBean;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.memory.host.HostPagePool;
import io.hicache.core.memory.host.HostPoolConfig;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Page bytes never pass through the Java heap on the copy paths: while 64 MiB of pages move through device
 * backups and loads, host page writes and reads, and checksums, the whole JVM allocates a small fraction of
 * that on the heap (bookkeeping objects, not page bytes).
 */
class NoHeapOnCopyPathsTest {
    private static final int PAGES = 64;

    @ParameterizedTest
    @EnumSource(HostLayout.class)
    void copiesAllocateAlmostNothingOnTheHeap(HostLayout layout) throws Exception {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        assumeTrue(
                threads.isThreadAllocatedMemorySupported() && threads.isThreadAllocatedMemoryEnabled(),
                "this JVM cannot count allocations per thread");
        // 32 layers, one KV head of 128, bf16, 64 tokens: 1 MiB pages.
        PageFormat format = new PageFormat(KvGeometry.mha(32, 1, 128, KvDtype.BFLOAT16), 64, layout);
        Namespace ns = Namespace.of("no-heap", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        try (ShmDir dir = ShmDir.create("hicache-no-heap");
                EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2);
                KvPool pool = runtime.createPool(format, PAGES);
                HostPagePool host =
                        HostPagePool.open(HostPoolConfig.inDir(dir.path(), layout), format, 2 * PAGES, runtime);
                Arena arena = Arena.ofShared()) {
            int[] device = pool.allocator().allocate(PAGES);
            int[] slots = host.tryReserve(PAGES);
            MemorySegment flat = arena.allocate(format.pageBytes());
            run(pool, host, device, slots, flat, ns); // warm up: class loading and JIT allocate too
            host.release(slots);
            slots = host.tryReserve(PAGES);
            long before = totalAllocated(threads);
            long moved = run(pool, host, device, slots, flat, ns);
            long allocated = totalAllocated(threads) - before;
            assertTrue(
                    allocated < moved / 64,
                    "moving " + moved + " page bytes allocated " + allocated
                            + " bytes on the heap: page bytes went through it");
        }
    }

    /** Backs up, loads, writes, commits (checksum), pins and reads every page; returns the page bytes moved. */
    private static long run(KvPool pool, HostPagePool host, int[] device, int[] slots, MemorySegment flat, Namespace ns)
            throws InterruptedException {
        Deadline deadline = Deadline.after(Duration.ofMinutes(1));
        assertTrue(pool.backup(device, host.slab(), slots).await(deadline));
        assertTrue(pool.load(host.slab(), slots, device).await(deadline));
        long moved = 2L * device.length * pool.format().pageBytes();
        for (int i = 0; i < slots.length; i++) {
            byte[] hash = new byte[PageHash.BYTES];
            hash[0] = (byte) i;
            hash[1] = (byte) System.nanoTime();
            var key = ns.key(PageHash.fromBytes(hash, 0));
            host.beginWrite(slots[i], key);
            host.writePage(slots[i], flat);
            host.commitWrite(slots[i]);
            int pinned = host.pin(key);
            host.readPage(pinned, flat);
            host.unpin(pinned);
            pool.readPage(device[i], flat);
            moved += 4L * flat.byteSize();
        }
        return moved;
    }

    private static long totalAllocated(ThreadMXBean threads) {
        long total = 0;
        for (long allocated : threads.getThreadAllocatedBytes(threads.getAllThreadIds())) {
            total += Math.max(0, allocated);
        }
        return total;
    }
}
