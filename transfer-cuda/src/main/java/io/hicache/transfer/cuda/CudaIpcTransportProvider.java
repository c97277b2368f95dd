package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.cuda.CudaProbe;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportProvider;
import java.util.Optional;

/**
 * Creates the {@code cuda-ipc} transport ({@link CudaIpcTransport}); listed in {@code transfer.transports} ahead of
 * {@code shm} and {@code tcp}, it carries device-to-device requests to peers on this host while the others carry host
 * memory. Stateless.
 */
public final class CudaIpcTransportProvider implements TransportProvider {
    @Override
    public String name() {
        return CudaIpcTransport.NAME;
    }

    /** Where CUDA cannot run: why (the driver or the device is missing). */
    @Override
    public Optional<String> unavailableReason() {
        return CudaProbe.unavailableReason().map(why -> "cuda-ipc needs CUDA: " + why);
    }

    /**
     * @throws HiCacheException {@link ErrorCode#TRANSFER_UNAVAILABLE} where CUDA cannot run (no driver, no device)
     */
    @Override
    public Transport create(TransportContext context) {
        unavailableReason().ifPresent(why -> {
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, why);
        });
        return new CudaIpcTransport(context);
    }
}
