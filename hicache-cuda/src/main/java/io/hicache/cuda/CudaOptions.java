package io.hicache.cuda;

import io.hicache.core.util.Checks;

/**
 * How a {@link CudaDeviceRuntime} opens: which device, how copies move, how host memory is pinned and how the copy
 * kernel is shaped. Start from {@link #defaults()} and change what differs with the {@code with*} methods. Immutable.
 *
 * @param ordinal the CUDA device, as CUDA numbers them after {@code CUDA_VISIBLE_DEVICES}
 * @param copyPath the copy kernel, or the copy engine (one {@code cuMemcpy2DAsync} per page and part)
 * @param registerSliceBytes the most host memory one {@code cuMemHostRegister} call pins: a multiple of 4 KiB, at
 *     most {@link CudaDeviceRuntime#REGISTER_SLICE_BYTES}; small slices let tests cover copies across slice ends
 * @param tuning the copy kernel's shape (the bench compares shapes with it)
 */
public record CudaOptions(int ordinal, CopyPath copyPath, long registerSliceBytes, CudaTuning tuning) {
    /** How copies between host and device move. */
    public enum CopyPath {
        /** The gather/scatter kernel: one launch per backup, one per layer of a load. */
        KERNEL,
        /** The copy engine, one 2D copy per page and part. */
        COPY_ENGINE
    }

    public CudaOptions {
        Checks.requireArgument(ordinal >= 0, "ordinal must be >= 0, was %d", ordinal);
        Checks.checkNotNull(copyPath, "copyPath");
        Checks.checkNotNull(tuning, "tuning");
        Checks.requireArgument(
                registerSliceBytes > 0
                        && registerSliceBytes % 4096 == 0
                        && registerSliceBytes <= CudaDeviceRuntime.REGISTER_SLICE_BYTES,
                "registerSliceBytes must be a multiple of 4 KiB up to 1 GiB, was %d",
                registerSliceBytes);
    }

    /** Device 0, the copy kernel in its default shape, 1 GiB registration slices. */
    public static CudaOptions defaults() {
        return new CudaOptions(0, CopyPath.KERNEL, CudaDeviceRuntime.REGISTER_SLICE_BYTES, CudaTuning.DEFAULT);
    }

    /** These options on another device. */
    public CudaOptions withOrdinal(int newOrdinal) {
        return new CudaOptions(newOrdinal, copyPath, registerSliceBytes, tuning);
    }

    /** These options with copies on another path. */
    public CudaOptions withCopyPath(CopyPath newPath) {
        return new CudaOptions(ordinal, newPath, registerSliceBytes, tuning);
    }

    /** These options pinning host memory in slices of {@code bytes}. */
    public CudaOptions withRegisterSliceBytes(long bytes) {
        return new CudaOptions(ordinal, copyPath, bytes, tuning);
    }

    /** These options with the copy kernel shaped by {@code newTuning}. */
    public CudaOptions withTuning(CudaTuning newTuning) {
        return new CudaOptions(ordinal, copyPath, registerSliceBytes, newTuning);
    }
}
