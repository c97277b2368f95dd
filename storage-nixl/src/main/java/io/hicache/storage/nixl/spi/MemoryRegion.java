package io.hicache.storage.nixl.spi;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;

/**
 * What an agent registers: NIXL's registration descriptor {@code (addr, len, devId, metaInfo)}, one record per memory
 * type, so that each says what it needs instead of overloading four fields. Immutable; the memory or storage it names
 * belongs to the caller.
 */
public sealed interface MemoryRegion {
    /** The kind of memory. */
    MemoryType type();

    /** Bytes in the region: descriptors over it must lie within. */
    long length();

    /** Host memory. The segment must stay alive while it is registered. */
    record Dram(MemorySegment segment) implements MemoryRegion {
        public Dram {
            Objects.requireNonNull(segment, "segment");
            if (!segment.isNative()) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "DRAM regions are off-heap segments; this one is" + " on the heap");
            }
            if (!segment.isAccessibleBy(ANOTHER_THREAD)) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "DRAM regions are moved by I/O threads; this "
                                + "segment is confined to the thread that made it (use a shared or automatic arena)");
            }
        }

        /** Any thread but the caller: a region's memory must be reachable from the plugins' threads. */
        private static final Thread ANOTHER_THREAD = Thread.ofPlatform().unstarted(() -> {});

        @Override
        public MemoryType type() {
            return MemoryType.DRAM;
        }

        @Override
        public long length() {
            return segment.byteSize();
        }
    }

    /** Device memory: {@code length} bytes at {@code address} on device {@code deviceId}, from a device runtime. */
    record Vram(int deviceId, long address, long length) implements MemoryRegion {
        public Vram {
            if (deviceId < 0 || address == 0 || length <= 0) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "a VRAM region needs a device id >= 0, a non-null "
                                + "address and a positive length; got device " + deviceId + ", address " + address
                                + ", length "
                                + length);
            }
        }

        @Override
        public MemoryType type() {
            return MemoryType.VRAM;
        }
    }

    /** A file at {@code path}, used as {@code modes} allow, {@code length} bytes long (to be, for a new file). */
    record File(Path path, Set<FileMode> modes, long length) implements MemoryRegion {
        public File {
            Objects.requireNonNull(path, "path");
            Objects.requireNonNull(modes, "modes");
            modes = modes.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(modes));
            if (length <= 0) {
                throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "file region " + path + " has length " + length);
            }
            if (!modes.contains(FileMode.READ) && !modes.contains(FileMode.WRITE) && !modes.contains(FileMode.CREATE)) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "file region " + path + " allows neither READ, "
                                + "WRITE nor CREATE: nothing could be done with it");
            }
        }

        @Override
        public MemoryType type() {
            return MemoryType.FILE;
        }

        /** Whether WRITE transfers are allowed. */
        public boolean writable() {
            return modes.contains(FileMode.WRITE) || modes.contains(FileMode.CREATE);
        }
    }

    /** The object {@code key} of the plugin's bucket, {@code length} bytes long (to be, for a new object). */
    record Obj(String key, long length) implements MemoryRegion {
        public Obj {
            Objects.requireNonNull(key, "key");
            if (key.isEmpty() || key.length() > 1024 || length <= 0) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "object region '" + key + "' needs a key of 1 to "
                                + "1024 characters and a positive length; length is " + length);
            }
        }

        @Override
        public MemoryType type() {
            return MemoryType.OBJ;
        }
    }
}
