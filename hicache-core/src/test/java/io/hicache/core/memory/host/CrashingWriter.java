package io.hicache.core.memory.host;

import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.TestPages;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The child process of {@link HostPagePoolCrashTest}: opens the pool and writes pages (and releases some) until it
 * is killed. It reports "ready RUN COUNTER" after each commit and "free HEXKEY" before each release, so the parent
 * knows which pages must survive.
 */
public final class CrashingWriter {
    private CrashingWriter() {}

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        HostLayout layout = HostLayout.parse(args[1]);
        int run = Integer.parseInt(args[2]);
        SplittableRandom random = new SplittableRandom(Long.parseLong(args[3]));
        PrintStream out = new PrintStream(System.out, true);
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(1 << 20, 1);
                HostPagePool pool = HostPagePool.open(
                        HostPoolConfig.inDir(dir, layout),
                        HostPagePoolCrashTest.format(layout),
                        HostPagePoolCrashTest.CAPACITY,
                        runtime);
                Arena arena = Arena.ofConfined()) {
            out.println("open " + pool.openReport());
            MemorySegment flat = arena.allocate(pool.format().pageBytes());
            int counter = 0;
            while (true) {
                if (pool.freeSlots() < 8 || random.nextInt(6) == 0) {
                    releaseSome(pool, random, out);
                }
                int[] slots = pool.tryReserve(1 + random.nextInt(4));
                if (slots == null) {
                    continue;
                }
                for (int slot : slots) {
                    StoreKey key = HostPagePoolCrashTest.key(run, counter++);
                    if (!pool.beginWrite(slot, key)) {
                        pool.release(slot);
                        continue;
                    }
                    long seed = TestPages.seedOf(HostPagePool.indexKey(key));
                    if (pool.slab().pagesContiguous()) {
                        // Straight into the slab, so a kill can leave a torn page behind.
                        TestPages.fill(pool.slab().page(slot), seed);
                    } else {
                        TestPages.fill(flat, seed);
                        pool.writePage(slot, flat);
                    }
                    pool.commitWrite(slot);
                    out.println("ready " + run + " " + (counter - 1) + " " + slot);
                }
            }
        }
    }

    private static void releaseSome(HostPagePool pool, SplittableRandom random, PrintStream out) {
        List<int[]> ready = new ArrayList<>();
        List<byte[]> keys = new ArrayList<>();
        pool.forEachReady((slot, key) -> {
            ready.add(new int[] {slot});
            keys.add(key);
        });
        for (int i = 0; i < Math.min(6, ready.size()); i++) {
            int pick = random.nextInt(ready.size());
            byte[] key = keys.get(pick);
            if (key == null) {
                continue;
            }
            out.println("free " + HexFormat.of().formatHex(key) + " " + ready.get(pick)[0]);
            pool.release(ready.get(pick)[0]);
            keys.set(pick, null);
        }
    }
}
