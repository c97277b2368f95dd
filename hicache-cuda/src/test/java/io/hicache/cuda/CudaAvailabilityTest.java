package io.hicache.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.DeviceRuntimes;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Without a GPU, CUDA says why once and clearly, and the service falls back to the emulated device. */
class CudaAvailabilityTest {
    private final CudaDeviceRuntimeProvider provider = new CudaDeviceRuntimeProvider();

    @Test
    void theAnswerIsDecidedOnceAndNamesTheCause() {
        Optional<String> first = provider.unavailableReason();
        assertSame(first, provider.unavailableReason(), "the answer is cached");
        assumeTrue(first.isPresent(), "this machine has a usable CUDA device");
        assertTrue(
                first.get().contains("libcuda.so.1")
                        || first.get().contains("no CUDA device")
                        || first.get().contains("JCuda"),
                first.get());
    }

    @Test
    void autoFallsBackToTheEmulatedDeviceWithoutAGpu() {
        assumeTrue(provider.unavailableReason().isPresent(), "this machine has a usable CUDA device");
        try (DeviceRuntime runtime = DeviceRuntimes.open(Settings.empty())) {
            assertEquals("emulated", runtime.name());
        }
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> DeviceRuntimes.open(Settings.empty().with("device.runtime", "cuda")));
        assertEquals(ErrorCode.DEVICE_UNAVAILABLE, e.code());
        assertTrue(
                e.getMessage()
                        .contains("cannot run here: "
                                + provider.unavailableReason().get()),
                e.getMessage());
        HiCacheException direct =
                assertThrows(HiCacheException.class, () -> new CudaDeviceRuntime(CudaOptions.defaults()));
        assertEquals(ErrorCode.DEVICE_UNAVAILABLE, direct.code());
    }

    @Test
    void badSettingsAreRefused() {
        HiCacheException unknown = assertThrows(
                HiCacheException.class,
                () -> DeviceRuntimes.open(Settings.empty().with("device.runtime", "tpu")));
        assertTrue(unknown.getMessage().contains("available: auto, cuda, emulated"), unknown.getMessage());
        HiCacheException path = assertThrows(
                HiCacheException.class, () -> provider.open(Settings.empty().with("device.copy-path", "teleport")));
        assertTrue(path.getMessage().contains("expected kernel or memcpy"), path.getMessage());
    }
}
