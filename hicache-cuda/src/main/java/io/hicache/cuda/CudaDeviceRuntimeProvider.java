package io.hicache.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.DeviceRuntimeProvider;
import java.util.List;
import java.util.Optional;

/** Opens {@link CudaDeviceRuntime}s under the name {@code cuda}; preferred over the emulated device. Stateless. */
public final class CudaDeviceRuntimeProvider implements DeviceRuntimeProvider {
    /** Which CUDA device to use. */
    public static final Setting<Integer> ORDINAL = Setting.integer(
            "device.ordinal", 0, 0, 1023, "CUDA device to use (as CUDA numbers them, after CUDA_VISIBLE_DEVICES)");
    /** How copies move: the gather/scatter kernel, or the copy engine (one cuMemcpy2DAsync per page and part). */
    public static final Setting<String> COPY_PATH = Setting.string(
            "device.copy-path",
            "kernel",
            "how CUDA copies move pages: kernel (one launch per batch or layer) or memcpy (the copy engine, per page)");

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public int priority() {
        return 10;
    }

    @Override
    public Optional<String> unavailableReason() {
        return CudaProbe.unavailableReason();
    }

    @Override
    public List<Setting<?>> settings() {
        return List.of(ORDINAL, COPY_PATH);
    }

    @Override
    public DeviceRuntime open(Settings settings) {
        String path = settings.get(COPY_PATH);
        if (!path.equals("kernel") && !path.equals("memcpy")) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID, "setting 'device.copy-path' = '" + path + "': expected kernel or memcpy");
        }
        return new CudaDeviceRuntime(CudaOptions.defaults()
                .withOrdinal(settings.get(ORDINAL))
                .withCopyPath(path.equals("kernel") ? CudaOptions.CopyPath.KERNEL : CudaOptions.CopyPath.COPY_ENGINE));
    }
}
