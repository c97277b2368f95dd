package io.hicache.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;
import jcuda.CudaException;
import jcuda.driver.JCudaDriver;

/**
 * Whether CUDA can run in this process, decided once. It first asks the dynamic linker for
 * {@code libcuda.so.1} (no side effects where there is no driver), and only then lets JCuda load its natives
 * (which throws a {@link LinkageError} without a driver, and extracts its libraries to the temp folder) and
 * counts the devices. Thread-safe. Public for modules that call the driver themselves (the cuda-ipc transport).
 */
public final class CudaProbe {
    private static final Optional<String> REASON = probe();

    private CudaProbe() {}

    /** Why CUDA cannot be used here, or empty when it can. The same answer for the life of the process. */
    public static Optional<String> unavailableReason() {
        return REASON;
    }

    @SuppressWarnings("restricted") // dlopen of the driver library: the question this class asks
    private static Optional<String> probe() {
        try {
            SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return Optional.of("no CUDA driver: libcuda.so.1 cannot be loaded (" + e.getMessage() + ")");
        }
        try {
            JCudaDriver.setExceptionsEnabled(true);
            JCudaDriver.cuInit(0);
            int[] count = {0};
            JCudaDriver.cuDeviceGetCount(count);
            return count[0] > 0 ? Optional.empty() : Optional.of("no CUDA device: the driver reports none");
        } catch (LinkageError e) {
            return Optional.of("JCuda's native libraries cannot be loaded: " + e);
        } catch (CudaException e) {
            return Optional.of("the CUDA driver cannot start: " + e.getMessage());
        }
    }
}
