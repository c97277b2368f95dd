package io.hicache.cuda;

import io.hicache.core.util.Checks;
import java.util.Locale;

/**
 * How the CUDA runtime's copies are shaped: which copy kernel, how many streams a load alternates its layers
 * between, and whether a launch walks a {@code page_first_direct} page in host order. {@link #DEFAULT} is what the
 * {@code cuda} bench measured best on an H200 (docs/gpu.md); the other values exist so the bench can measure them
 * side by side. Immutable.
 *
 * @param kernel the copy kernel's index arithmetic and loads in flight
 * @param loadLanes streams a load alternates its per-layer launches between, 1 to 4: one layer's launch then runs
 *     while the previous one drains
 * @param hostOrder true to walk each {@code page_first_direct} page part by part, layer by layer, as it lies in
 *     host memory; false to walk every layout layer by layer, part by part
 * @param layersPerLoadLaunch layers one launch of a load copies, signalled together when it ends: 1 (the default)
 *     lets an engine start on layer 0 once it alone has landed; more launch less often (each launch and its event
 *     cost the calling thread tens of microseconds: docs/benchmarks.md, gpu-replay)
 * @param backupBlocksPerMultiprocessor blocks per multiprocessor a backup's launch takes at most, 1 to 8 (a load's
 *     take up to 8; default 8): a backup's grid-stride launch holds its blocks until it ends, so fewer leave room for
 *     a load launched meanwhile. Measured in the GPU replay (2 with loads prioritized against 8 without): no
 *     difference beyond the runs' spread (docs/benchmarks.md, gpu-replay), so the default stays
 * @param prioritizeLoads whether loads run on streams of the device's greatest priority, so that the block scheduler
 *     starts a load's blocks before a backup's waiting ones (default false; see above)
 */
public record CudaTuning(
        Kernel kernel,
        int loadLanes,
        boolean hostOrder,
        int layersPerLoadLaunch,
        int backupBlocksPerMultiprocessor,
        boolean prioritizeLoads) {
    private static final int DEFAULT_BACKUP_BLOCKS_PER_MULTIPROCESSOR = 8;

    /** The shape the H200 measurements chose. */
    public static final CudaTuning DEFAULT =
            new CudaTuning(Kernel.NARROW, 2, true, 1, DEFAULT_BACKUP_BLOCKS_PER_MULTIPROCESSOR, false);

    /** The copy kernels in the PTX. */
    public enum Kernel {
        /** 64-bit index arithmetic, 4 vectors in flight per thread: any launch size. */
        WIDE("hicache_kv_copy", 4),
        /** 32-bit index arithmetic, 4 vectors in flight; launches of 2^31 vectors or more use {@link #WIDE}. */
        NARROW("hicache_kv_copy_u32", 4),
        /** 32-bit index arithmetic, 8 vectors in flight; launches of 2^31 vectors or more use {@link #WIDE}. */
        NARROW_UNROLL8("hicache_kv_copy_u32_u8", 8),
        /** {@link #NARROW} with loads that ask L2 to fetch 256-byte blocks (PTX {@code .L2::256B}). */
        NARROW_L2_256B("hicache_kv_copy_u32_l2_256", 4),
        /** {@link #NARROW_L2_256B} through the read-only data path ({@code ld.global.nc}). */
        NARROW_NC_L2_256B("hicache_kv_copy_u32_nc_l2_256", 4);

        private final String entryPoint;
        private final int unroll;

        Kernel(String entryPoint, int unroll) {
            this.entryPoint = entryPoint;
            this.unroll = unroll;
        }

        /** The kernel's name in the PTX. */
        public String entryPoint() {
            return entryPoint;
        }

        /** Vectors each thread loads before it stores any. */
        public int unroll() {
            return unroll;
        }
    }

    public CudaTuning {
        Checks.checkNotNull(kernel, "kernel");
        Checks.requireArgument(loadLanes >= 1 && loadLanes <= 4, "loadLanes must be 1 to 4, was %d", loadLanes);
        Checks.requireArgument(
                layersPerLoadLaunch >= 1 && layersPerLoadLaunch <= 1024,
                "layersPerLoadLaunch must be 1 to 1024, was %d",
                layersPerLoadLaunch);
        Checks.requireArgument(
                backupBlocksPerMultiprocessor >= 1 && backupBlocksPerMultiprocessor <= 8,
                "backupBlocksPerMultiprocessor must be 1 to 8, was %d",
                backupBlocksPerMultiprocessor);
    }

    /** One layer per load launch; backups and loads share the device as in {@link #DEFAULT}. */
    public CudaTuning(Kernel kernel, int loadLanes, boolean hostOrder) {
        this(kernel, loadLanes, hostOrder, 1, DEFAULT_BACKUP_BLOCKS_PER_MULTIPROCESSOR, false);
    }

    /** This shape with {@code layers} layers per load launch. */
    public CudaTuning withLayersPerLoadLaunch(int layers) {
        return new CudaTuning(kernel, loadLanes, hostOrder, layers, backupBlocksPerMultiprocessor, prioritizeLoads);
    }

    /** This shape with backups taking at most {@code blocks} blocks per multiprocessor and loads prioritized or not. */
    public CudaTuning withBackupShare(int blocks, boolean prioritize) {
        return new CudaTuning(kernel, loadLanes, hostOrder, layersPerLoadLaunch, blocks, prioritize);
    }

    @Override
    public String toString() {
        return kernel.name().toLowerCase(Locale.ROOT) + ", " + loadLanes + " load lane" + (loadLanes == 1 ? "" : "s")
                + (hostOrder ? ", host order" : ", layer order")
                + (layersPerLoadLaunch == 1 ? "" : ", " + layersPerLoadLaunch + " layers per load launch")
                + ", backups at most " + backupBlocksPerMultiprocessor + " blocks per multiprocessor"
                + (prioritizeLoads ? ", loads prioritized" : "");
    }
}
