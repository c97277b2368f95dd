package io.hicache.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.memory.DeviceInfo;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.io.IOException;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import jcuda.CudaException;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * The device runtime on a CUDA GPU, through JCuda's driver API. It works in the device's primary context (the
 * one PyTorch and other libraries in the same process use), pins host slabs with {@code cuMemHostRegister} in
 * slices of at most 1 GiB, mapped for device access, and loads the copy kernel from PTX shipped as a resource.
 * The kernel reaches a slab through unified addresses whatever the slices; a copy through the copy engine is cut
 * where it would cross from one slice into the next, since the driver wants one registration per copy.
 * Where the PTX cannot be loaded (a driver older than the nvcc that built it) it falls back to the copy engine and
 * says so in its log and in {@link #info()}.
 *
 * <p>Thread-safe: every entry point makes the context current on the calling thread. Closing it closes its pools,
 * unregisters what is still registered and releases the context.
 */
public final class CudaDeviceRuntime implements DeviceRuntime {
    private static final System.Logger LOG = System.getLogger(CudaDeviceRuntime.class.getName());
    /** The most host memory one {@code cuMemHostRegister} call pins. */
    public static final long REGISTER_SLICE_BYTES = 1L << 30;

    private static final String PTX = "kv_transfer.ptx";

    private final int ordinal;
    private final long registerSliceBytes;
    private final CUdevice device = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final String name;
    private final int multiprocessors;
    private final CudaTuning tuning;
    /** The copy kernels' module, or null where copies use the copy engine. */
    private final @Nullable CUmodule module;

    private final Map<CudaTuning.Kernel, CUfunction> kernels;
    /** Why copies do not use the kernel, or null where they do. */
    private final @Nullable String kernelProblem;

    private final Set<CudaKvPool> pools = ConcurrentHashMap.newKeySet();
    private final List<Registration> registrations = new CopyOnWriteArrayList<>();
    private final AtomicBoolean closed = new AtomicBoolean();

    /**
     * Opens the device {@code options} names, its copies shaped as they say.
     *
     * @throws HiCacheException {@link ErrorCode#DEVICE_UNAVAILABLE} when CUDA cannot be used or the device does not
     *     exist
     */
    public CudaDeviceRuntime(CudaOptions options) {
        Checks.checkNotNull(options, "options");
        CudaTuning tuning = options.tuning();
        int ordinal = options.ordinal();
        long registerSliceBytes = options.registerSliceBytes();
        boolean useKernel = options.copyPath() == CudaOptions.CopyPath.KERNEL;
        this.tuning = tuning;
        CudaProbe.unavailableReason().ifPresent(why -> {
            throw new HiCacheException(ErrorCode.DEVICE_UNAVAILABLE, why);
        });
        this.registerSliceBytes = registerSliceBytes;
        this.ordinal = ordinal;
        try {
            JCudaDriver.cuDeviceGet(device, ordinal);
            JCudaDriver.cuDevicePrimaryCtxRetain(context, device);
            JCudaDriver.cuCtxSetCurrent(context);
            byte[] nameBytes = new byte[256];
            JCudaDriver.cuDeviceGetName(nameBytes, nameBytes.length, device);
            int length = 0;
            while (length < nameBytes.length && nameBytes[length] != 0) {
                length++;
            }
            this.name = new String(nameBytes, 0, length, StandardCharsets.UTF_8);
            int[] sms = {0};
            JCudaDriver.cuDeviceGetAttribute(sms, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
            this.multiprocessors = sms[0];
        } catch (CudaException e) {
            throw new HiCacheException(
                    ErrorCode.DEVICE_UNAVAILABLE, "CUDA device " + ordinal + " cannot be used: " + e.getMessage(), e);
        }
        CUmodule loaded = null;
        Map<CudaTuning.Kernel, CUfunction> functions = new EnumMap<>(CudaTuning.Kernel.class);
        String problem = useKernel ? null : "copy kernels turned off (device.copy-path = memcpy)";
        if (useKernel) {
            CUmodule candidate = new CUmodule();
            try {
                JCudaDriver.cuModuleLoadData(candidate, ptx());
                loaded = candidate;
                for (CudaTuning.Kernel k : CudaTuning.Kernel.values()) {
                    CUfunction function = new CUfunction();
                    JCudaDriver.cuModuleGetFunction(function, loaded, k.entryPoint());
                    functions.put(k, function);
                }
            } catch (CudaException | IOException e) {
                if (loaded != null) {
                    JCudaDriver.cuModuleUnload(loaded);
                }
                loaded = null;
                functions.clear();
                problem = "the copy kernel cannot be loaded (" + e.getMessage() + "); copies use the copy engine";
                LOG.log(Level.WARNING, "CUDA device " + ordinal + ": " + problem);
            }
        }
        this.module = loaded;
        this.kernels = Collections.unmodifiableMap(functions);
        this.kernelProblem = problem;
    }

    static String ptx() throws IOException {
        try (InputStream in = CudaDeviceRuntime.class.getResourceAsStream(PTX)) {
            if (in == null) {
                throw new IOException(PTX + " is missing from the class path");
            }
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        }
    }

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public DeviceInfo info() {
        makeCurrent();
        long[] free = {0};
        long[] total = {0};
        JCudaDriver.cuMemGetInfo(free, total);
        return new DeviceInfo(
                "cuda", name + (kernelProblem == null ? "" : " (" + kernelProblem + ")"), ordinal, total[0], free[0]);
    }

    @Override
    public KvPool createPool(PageFormat format, int pages) {
        return createPool(format, pages, usesKernel());
    }

    /**
     * A pool whose copies use the kernel ({@code useKernel}) or the copy engine, whatever this runtime's default:
     * the benchmark measures both on one registered slab.
     */
    public KvPool createPool(PageFormat format, int pages, boolean useKernel) {
        Checks.requireState(!closed.get(), "the CUDA device runtime is closed");
        Checks.checkNotNull(format, "format");
        Checks.checkPositive(pages, "pages");
        Checks.requireState(!useKernel || usesKernel(), "the copy kernel is not available: %s", kernelProblem);
        Checks.requireArgument(
                !useKernel || format.rowBytes() % 16 == 0,
                "the copy kernel moves 16-byte vectors: a row of %d bytes (%s) does not divide; use device.copy-path=memcpy",
                format.rowBytes(),
                format.geometry());
        CudaKvPool pool = new CudaKvPool(this, format, pages, useKernel, 0);
        pools.add(pool);
        LOG.log(
                Level.DEBUG,
                () -> "CUDA KV pool: " + pages + " pages, " + Units.formatBytes(DeviceLayout.poolBytes(format, pages)));
        return pool;
    }

    @Override
    public KvPool adoptPool(PageFormat format, int pages, long address, long bytes) {
        Checks.requireState(!closed.get(), "the CUDA device runtime is closed");
        Checks.checkNotNull(format, "format");
        Checks.checkPositive(pages, "pages");
        long needed = DeviceLayout.poolBytes(format, pages);
        Checks.requireArgument(
                address != 0 && address % 256 == 0,
                "the adopted device address 0x%s is not aligned to 256 bytes",
                Long.toHexString(address));
        Checks.requireArgument(
                bytes >= needed,
                "the adopted memory has %s bytes; %s pages of %s need %s",
                bytes,
                pages,
                format.pageBytes(),
                needed);
        boolean kernel = usesKernel() && format.rowBytes() % 16 == 0;
        CudaKvPool pool = new CudaKvPool(this, format, pages, kernel, address);
        pools.add(pool);
        return pool;
    }

    @Override
    public HostRegistration registerHost(MemorySegment memory) {
        Checks.checkNotNull(memory, "memory");
        Checks.requireArgument(memory.isNative(), "only native memory can be registered");
        makeCurrent();
        Registration r = new Registration(memory.address(), memory.byteSize());
        registrations.add(r);
        return r;
    }

    /**
     * The end of the registration slice that holds {@code address}, or -1 when it is not registered. A copy through
     * the copy engine must not cross it: the driver finds one registration per copy.
     */
    long sliceEnd(long address) {
        for (Registration r : registrations) {
            if (!r.closed.get() && address >= r.address && address < r.address + r.bytes) {
                long slice = (address - r.address) / registerSliceBytes;
                return Math.min(r.address + r.bytes, r.address + (slice + 1) * registerSliceBytes);
            }
        }
        return -1;
    }

    /** True when {@code memory} lies inside one registered range. */
    boolean isRegistered(MemorySegment memory) {
        long start = memory.address();
        long end = start + memory.byteSize();
        for (Registration r : registrations) {
            if (!r.closed.get() && start >= r.address && end <= r.address + r.bytes) {
                return true;
            }
        }
        return false;
    }

    /** Host memory pinned in slices (at most 1 GiB each), each mapped for device access. */
    private final class Registration implements HostRegistration {
        final long address;
        final long bytes;
        final List<Long> slices = new ArrayList<>();
        final AtomicBoolean closed = new AtomicBoolean();

        Registration(long address, long bytes) {
            this.address = address;
            this.bytes = bytes;
            try {
                for (long offset = 0; offset < bytes; offset += registerSliceBytes) {
                    long length = Math.min(registerSliceBytes, bytes - offset);
                    JCudaDriver.cuMemHostRegister(
                            RawPointers.host(address + offset),
                            length,
                            JCudaDriver.CU_MEMHOSTREGISTER_DEVICEMAP | JCudaDriver.CU_MEMHOSTREGISTER_PORTABLE);
                    slices.add(address + offset);
                    checkSameAddressOnDevice(address + offset);
                }
            } catch (CudaException e) {
                unregister();
                throw new HiCacheException(
                        ErrorCode.DEVICE_UNAVAILABLE,
                        "cannot pin " + Units.formatBytes(bytes)
                                + " of host memory for CUDA (" + e.getMessage()
                                + "); a memory-mapped slab must be on tmpfs or"
                                + " hugetlbfs, not on a disk",
                        e);
            }
        }

        /** The kernel reads host memory at its host address: unified addressing must map it there. */
        private void checkSameAddressOnDevice(long hostAddress) {
            DevicePointer mapped = new DevicePointer();
            JCudaDriver.cuMemHostGetDevicePointer(mapped, RawPointers.host(hostAddress), 0);
            Checks.requireState(
                    mapped.address() == hostAddress,
                    "registered host memory at 0x%x is mapped at 0x%x on the device: unified addressing is off",
                    hostAddress,
                    mapped.address());
        }

        private void unregister() {
            makeCurrent();
            for (long slice : slices) {
                try {
                    JCudaDriver.cuMemHostUnregister(RawPointers.host(slice));
                } catch (CudaException e) {
                    LOG.log(Level.WARNING, "cannot unregister host memory at 0x" + Long.toHexString(slice), e);
                }
            }
            slices.clear();
        }

        @Override
        public long bytes() {
            return bytes;
        }

        @Override
        public boolean pinned() {
            return true;
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                unregister();
                registrations.remove(this);
            }
        }
    }

    void makeCurrent() {
        JCudaDriver.cuCtxSetCurrent(context);
    }

    CUcontext context() {
        return context;
    }

    int multiprocessors() {
        return multiprocessors;
    }

    /** True when copies use the kernel; false when they use the copy engine. */
    public boolean usesKernel() {
        return !kernels.isEmpty();
    }

    /** How copies are shaped. */
    public CudaTuning tuning() {
        return tuning;
    }

    /** The loaded entry point of {@code k}; only while {@link #usesKernel()}. */
    @Nullable
    CUfunction kernel(CudaTuning.Kernel k) {
        return kernels.get(k);
    }

    void released(CudaKvPool pool) {
        pools.remove(pool);
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (CudaKvPool pool : List.copyOf(pools)) {
            pool.close();
        }
        for (Registration r : List.copyOf(registrations)) {
            r.close();
        }
        makeCurrent();
        if (module != null) {
            JCudaDriver.cuModuleUnload(module);
        }
        JCudaDriver.cuDevicePrimaryCtxRelease(device);
    }
}
