package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.cuda.ContiguousCopy;
import io.hicache.cuda.CudaTuning;
import java.time.Duration;
import java.util.List;
import java.util.Random;

/**
 * Where a copy's time goes: for copies of 1 to 8192 pages of 16 KiB, each way, one at a time, the median time until
 * the call returns (checks, index upload, launches), until the copy's future completes, and until the waiting
 * thread wakes, against one contiguous pinned copy of the same bytes. Stateless.
 */
final class CudaLatencyExperiment {
    private static final int[] SIZES = {1, 64, 1024, 8192};

    private CudaLatencyExperiment() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new CudaSuite.Progress();
        int pages = CudaSuite.PAGES;
        int reps = quick ? 10 : 60;
        CudaSuite.withPinnedSlab(pages, CudaTuning.DEFAULT, (runtime, slab, arena) -> {
            PageFormat format = new PageFormat(MemorySuite.GEOMETRY, 1, HostLayout.PAGE_FIRST_DIRECT);
            HostSlab host = new HostSlab(slab, format, 2 * pages);
            Random random = new Random(7);
            try (KvPool pool = runtime.createPool(format, 2 * pages);
                    ContiguousCopy contiguous = new ContiguousCopy(runtime, (long) pages * format.pageBytes())) {
                for (boolean toHost : new boolean[] {false, true}) {
                    String dir = toHost ? "d2h" : "h2d";
                    for (int n : SIZES) {
                        int[] device = CudaSuite.pick(random, 2 * pages, n);
                        int[] slots = CudaSuite.pick(random, 2 * pages, n);
                        long bytes = (long) n * format.pageBytes();
                        double[] submitted = new double[reps];
                        double[] completed = new double[reps];
                        double[] woken = new double[reps];
                        double[] reference = new double[reps];
                        for (int rep = -reps / 2; rep < reps; rep++) {
                            long[] done = new long[1];
                            long start = System.nanoTime();
                            KvCopy c = toHost ? pool.backup(device, host, slots) : pool.load(host, slots, device);
                            long returned = System.nanoTime();
                            c.done().thenRun(() -> done[0] = System.nanoTime());
                            if (!c.await(Deadline.after(Duration.ofMinutes(1)))) {
                                throw new IllegalStateException("a copy took over a minute");
                            }
                            long awake = System.nanoTime();
                            long referenceStart = System.nanoTime();
                            contiguous.copy(slab, bytes, toHost);
                            long referenceEnd = System.nanoTime();
                            if (rep >= 0) {
                                submitted[rep] = (returned - start) / 1e3;
                                completed[rep] = (Math.max(done[0], returned) - start) / 1e3;
                                woken[rep] = (awake - start) / 1e3;
                                reference[rep] = (referenceEnd - referenceStart) / 1e3;
                            }
                        }
                        String what = "copy_" + dir + "_" + n + "_pages_16k";
                        double total = Forks.median(woken);
                        rows.add(BenchRow.lowerIsBetter(
                                what + "_call_returned", Forks.median(submitted), "us", "copy_awaited", total));
                        rows.add(BenchRow.lowerIsBetter(
                                what + "_future_completed", Forks.median(completed), "us", "copy_awaited", total));
                        rows.add(BenchRow.lowerIsBetter(
                                what + "_awaited",
                                total,
                                "us",
                                "contiguous_pinned_copy_same_bytes",
                                Forks.median(reference)));
                    }
                }
            }
        });
        return rows;
    }
}
