package io.hicache.bench;

import io.hicache.core.page.HostLayout;
import io.hicache.cuda.CudaTuning;
import java.util.List;

/**
 * Does the order of a copy's pairs matter to the kernel? The scattered-page measurement at 16 KiB and 64 KiB
 * (layer_first and page_first_direct) with the same random pages handed over in random order, then in ascending
 * host slot order: sorted, a load's reads of host memory walk upwards (in layer_first, through one block per layer
 * and part) instead of jumping about. Stateless.
 */
final class CudaOrderExperiment {
    private CudaOrderExperiment() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new CudaSuite.Progress();
        int pages = quick ? 1024 : CudaSuite.PAGES;
        Comparison comparison = Comparison.forRun(quick, 1, 4, 150);
        CudaSuite.withPinnedSlab(pages, CudaTuning.DEFAULT, (runtime, slab, arena) -> {
            for (int tokens : new int[] {1, 4}) {
                for (boolean ascending : new boolean[] {false, true}) {
                    CudaSuite.scattered(
                            runtime,
                            slab,
                            tokens,
                            pages,
                            List.of(HostLayout.LAYER_FIRST, HostLayout.PAGE_FIRST_DIRECT),
                            comparison,
                            null,
                            ascending ? "host_ascending__" : "random__",
                            rows,
                            arena,
                            ascending);
                }
            }
        });
        return rows;
    }
}
