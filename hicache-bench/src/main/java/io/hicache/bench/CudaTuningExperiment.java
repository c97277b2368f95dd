package io.hicache.bench;

import io.hicache.core.page.HostLayout;
import io.hicache.cuda.CudaTuning;
import io.hicache.cuda.CudaTuning.Kernel;
import java.util.List;
import java.util.Locale;

/**
 * The scattered-page measurement of {@link CudaSuite}, repeated for several {@link CudaTuning}s in one run, each
 * against the contiguous pinned copy measured next to it: what chose {@link CudaTuning#DEFAULT}. Runs
 * page_first_direct at every page size, both directions, one copy at a time and several in flight, and verifies a
 * sample of pages each way for every shape. Stateless.
 */
final class CudaTuningExperiment {
    /**
     * The shapes compared. An earlier matrix (docs/gpu.md) found that the kernel's index width and loads in flight
     * and the walk order change nothing measurable, and that a second load lane matters: these vary the lanes.
     */
    static final List<CudaTuning> SHAPES = List.of(
            new CudaTuning(Kernel.NARROW, 2, true),
            new CudaTuning(Kernel.NARROW, 3, true),
            new CudaTuning(Kernel.NARROW_L2_256B, 2, true),
            new CudaTuning(Kernel.NARROW_L2_256B, 3, true),
            new CudaTuning(Kernel.NARROW_NC_L2_256B, 2, true));

    private CudaTuningExperiment() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new CudaSuite.Progress();
        int pages = quick ? 1024 : CudaSuite.PAGES;
        Comparison comparison = Comparison.forRun(quick, 1, 4, 150);
        for (CudaTuning shape : SHAPES) {
            String prefix = label(shape) + "__";
            System.out.println("shape: " + shape);
            CudaSuite.withPinnedSlab(pages, shape, (runtime, slab, arena) -> {
                for (int tokens : CudaSuite.PAGE_TOKENS) {
                    CudaSuite.scattered(
                            runtime,
                            slab,
                            tokens,
                            pages,
                            List.of(HostLayout.PAGE_FIRST_DIRECT),
                            comparison,
                            null,
                            prefix,
                            rows,
                            arena);
                }
            });
        }
        return rows;
    }

    /** A shape as a metric-name prefix, e.g. {@code narrow_l2_host}. */
    static String label(CudaTuning shape) {
        return shape.kernel().name().toLowerCase(Locale.ROOT) + "_l" + shape.loadLanes()
                + (shape.hostOrder() ? "_host" : "_layer");
    }
}
