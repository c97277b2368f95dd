package io.hicache.transfer.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.config.Settings;
import io.hicache.cuda.CudaProbe;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.pd.PdSettings;
import io.hicache.transfer.spi.TransportProvider;
import java.util.List;
import java.util.Optional;
import java.util.ServiceLoader;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** Where CUDA cannot run, asking for cuda-ipc fails the engine's start with the reason, as a missing device should. */
class CudaIpcTransportProviderTest {
    @Test
    void withoutCudaTheEngineRefusesToStartAndSaysWhy() {
        Assumptions.assumeTrue(CudaProbe.unavailableReason().isPresent(), "CUDA is here: the kit covers this machine");
        TransferException e = assertThrows(
                TransferException.class,
                () -> TransferEngine.open(TransferConfig.defaults("no-gpu").withTransports(List.of("cuda-ipc", "shm")))
                        .close());
        assertEquals(ErrorCode.TRANSFER_UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("cuda-ipc needs CUDA"), e.getMessage());
    }

    @Test
    void theAutoBackendListsCudaIpcExactlyWhereCudaRuns() {
        Optional<String> cuda = CudaProbe.unavailableReason();
        assertEquals(cuda.map(why -> "cuda-ipc needs CUDA: " + why), TransferEngine.unavailable("cuda-ipc"));
        List<String> auto =
                PdSettings.from(Settings.builder().build(), "auto").transfer().transports();
        assertEquals(cuda.isEmpty() ? List.of("cuda-ipc", "shm", "tcp") : List.of("shm", "tcp"), auto);
    }

    @Test
    void theProviderIsFoundUnderItsName() {
        assertEquals(
                "cuda-ipc",
                ServiceLoader.load(TransportProvider.class).stream()
                        .map(p -> p.get().name())
                        .filter("cuda-ipc"::equals)
                        .findFirst()
                        .orElse("missing"));
    }
}
