package io.hicache.server.daemon;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.MappedFiles;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * The host slab's space: a file on tmpfs ({@code server.host-dir}) mapped once, its space reserved when it is made
 * ({@link MappedFiles}: a tmpfs that fills up later cannot kill the daemon with SIGBUS on a page write), handed out in
 * contiguous blocks by a {@link BuddyAllocator}, and the bytes each namespace holds against {@code server.namespace-quota}
 * ({@link NamespaceBytes}). It knows blocks and namespaces, not pages: which block holds which page is
 * {@link PageIndex}'s.
 *
 * <p>Thread-safe. Owns the mapping and the file, which it keeps locked while it lives: {@link #close} unmaps the slab
 * and deletes the file, after which no page's bytes may be touched. A slab left by a daemon that died is removed by the
 * next daemon to start in that folder ({@link #removeLeftSlabs}).
 */
final class SlabSpace implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(SlabSpace.class.getName());
    static final String SLAB_PREFIX = "hicache-server-";
    static final String SLAB_SUFFIX = ".slab";
    static final String INDEX_SUFFIX = ".index";
    /** The slabs of the daemons in this JVM (tests run several), which {@link #removeLeftSlabs} must not open. */
    private static final Set<Path> LIVE_SLABS = ConcurrentHashMap.newKeySet();

    private final Path file;
    /** Held for the daemon's life: a daemon starting later tells a live slab from one a dead daemon left. */
    private final FileChannel lockChannel;

    private final Arena arena;
    private final MemorySegment slab;
    private final BuddyAllocator allocator;
    private final long quota;
    /**
     * Slab bytes per namespace for its quota (blocks held until freed, a deleted page a reader still holds included,
     * and rooms taken by puts and reservations in flight, which the usage index does not count); kept only while a
     * namespace holds something.
     */
    private final NamespaceBytes namespaceBytes = new NamespaceBytes();
    /** Slab bytes per tenant, for {@code server.tenant-quota} and the per-tenant gauge. */
    private final ConcurrentHashMap<String, AtomicLong> tenantBytes = new ConcurrentHashMap<>();
    /**
     * Whether tenants' bytes are counted: only on a daemon with tenants, whose names its file fixes (elsewhere a
     * namespace's tenant is any text a client sends, and one entry each would be kept for good).
     */
    private volatile boolean countTenants;
    /** The pages a warm start found in a kept slab's index, until {@link #takeKept} hands them over. */
    private List<KeptPage> kept = List.of();
    /** Set by {@link #keep}: close leaves the file (and its index) for the next daemon. */
    private volatile boolean keeping;

    /** A page a kept slab's index lists: where it is and its CRC-32C. */
    record KeptPage(StoreKey key, long offset, int order, int length, int crc) {}

    private SlabSpace(
            Path file, FileChannel lockChannel, Arena arena, MemorySegment slab, BuddyAllocator allocator, long quota) {
        this.file = file;
        this.lockChannel = lockChannel;
        this.arena = arena;
        this.slab = slab;
        this.allocator = allocator;
        this.quota = quota;
    }

    /**
     * Makes the slab: {@code server.host-size} rounded down to whole largest blocks, in a new file in
     * {@code server.host-dir}, its space reserved.
     *
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_TOO_LARGE} when the slab does not fit the folder's file
     *     system (naming the size, the folder and its free bytes); {@link ErrorCode#HOST_POOL_UNAVAILABLE} when the
     *     file cannot be made, reserved or mapped
     */
    static SlabSpace create(ServerConfig config) {
        long top = ServerConfig.maxBlockBytes(config.maxPageBytes(), config.minBlockBytes());
        long bytes = config.hostBytes() / top * top;
        Path dir = config.hostDir();
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE, "cannot make server.host-dir " + dir + ": " + e, e);
        }
        if (config.hostKeep()) {
            SlabSpace warm = adoptKept(config, dir, bytes, top);
            if (warm != null) {
                removeLeftSlabs(dir);
                return warm;
            }
        }
        removeLeftSlabs(dir);
        long free = MappedFiles.usableBytes(dir);
        if (free >= 0 && bytes > free) {
            throw new HiCacheException(ErrorCode.HOST_POOL_TOO_LARGE, tooLarge(bytes, dir, free));
        }
        Arena arena = Arena.ofShared();
        Path file = null;
        FileChannel lockChannel = null;
        try {
            // A temporary file is its owner's only (mode 0600), and MappedFiles grows it and reserves its space.
            file = Files.createTempFile(dir, SLAB_PREFIX, SLAB_SUFFIX);
            MemorySegment slab = MappedFiles.create(file, bytes, false, arena);
            // Locked after the mapping's own channel is closed: a POSIX lock goes when any of the process's channels
            // to the file closes, so this channel must be the last one this process opens to it.
            LIVE_SLABS.add(file.toAbsolutePath());
            lockChannel = FileChannel.open(file, StandardOpenOption.WRITE);
            if (lockChannel.tryLock() == null) {
                throw new IOException("cannot lock " + file + ", which this daemon just made");
            }
            BuddyAllocator allocator = new BuddyAllocator(
                    bytes, config.minBlockBytes(), Long.numberOfTrailingZeros(top / config.minBlockBytes()));
            return new SlabSpace(file, lockChannel, arena, slab, allocator, config.namespaceQuota());
        } catch (IOException | RuntimeException e) {
            arena.close();
            closeQuietly(lockChannel);
            deleteQuietly(file);
            if (file != null) {
                LIVE_SLABS.remove(file.toAbsolutePath());
            }
            long now = MappedFiles.usableBytes(dir);
            if (e instanceof IOException && now >= 0 && bytes > now) {
                throw new HiCacheException(
                        ErrorCode.HOST_POOL_TOO_LARGE, tooLarge(bytes, dir, now) + " (" + e.getMessage() + ")", e);
            }
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE,
                    "cannot make the host slab of " + Units.formatBytes(bytes) + " in " + dir + ": " + e.getMessage(),
                    e);
        }
    }

    /** The index file a graceful stop with {@code server.host-keep} writes beside its slab. */
    static Path indexOf(Path slab) {
        return slab.resolveSibling(slab.getFileName() + INDEX_SUFFIX);
    }

    /**
     * A slab a daemon kept (its index beside it, its lock free, its size this daemon's), mapped and locked again with
     * its pages to be taken back ({@link #takeKept}); null when there is none. The index is deleted once read: if this
     * daemon is killed, the next start must not trust it.
     */
    private static @Nullable SlabSpace adoptKept(ServerConfig config, Path dir, long bytes, long top) {
        List<Path> indexes;
        try (Stream<Path> files = Files.list(dir)) {
            indexes = files.filter(f -> f.getFileName().toString().endsWith(SLAB_SUFFIX + INDEX_SUFFIX))
                    .toList();
        } catch (IOException e) {
            return null;
        }
        for (Path index : indexes) {
            String name = index.getFileName().toString();
            Path slabFile = index.resolveSibling(name.substring(0, name.length() - INDEX_SUFFIX.length()));
            if (LIVE_SLABS.contains(slabFile.toAbsolutePath()) || !Files.isRegularFile(slabFile)) {
                deleteQuietly(index);
                continue;
            }
            List<KeptPage> pages;
            try {
                if (Files.size(slabFile) != bytes) {
                    LOG.log(
                            Level.WARNING,
                            "not reusing the kept slab " + slabFile + ": it is " + Files.size(slabFile)
                                    + " bytes, server.host-size makes " + bytes);
                    deleteQuietly(index);
                    continue;
                }
                pages = SlabIndexFile.read(index, bytes);
            } catch (IOException | RuntimeException e) {
                LOG.log(
                        Level.WARNING,
                        "not reusing the kept slab " + slabFile + ": its index is unreadable (" + e + ")");
                deleteQuietly(index);
                continue;
            }
            deleteQuietly(index);
            Arena arena = Arena.ofShared();
            FileChannel lockChannel = null;
            try {
                MemorySegment slab = MappedFiles.open(slabFile, bytes, arena);
                LIVE_SLABS.add(slabFile.toAbsolutePath());
                lockChannel = FileChannel.open(slabFile, StandardOpenOption.WRITE);
                if (lockChannel.tryLock() == null) {
                    throw new IOException("another daemon holds it");
                }
                BuddyAllocator allocator = new BuddyAllocator(
                        bytes, config.minBlockBytes(), Long.numberOfTrailingZeros(top / config.minBlockBytes()));
                SlabSpace space = new SlabSpace(slabFile, lockChannel, arena, slab, allocator, config.namespaceQuota());
                space.kept = pages;
                LOG.log(Level.INFO, "reusing the kept slab " + slabFile + " with " + pages.size() + " pages");
                return space;
            } catch (IOException | RuntimeException e) {
                arena.close();
                closeQuietly(lockChannel);
                LIVE_SLABS.remove(slabFile.toAbsolutePath());
                LOG.log(Level.WARNING, "not reusing the kept slab " + slabFile + ": " + e);
            }
        }
        return null;
    }

    /** The pages a warm start found, once (then none); the caller takes each back or drops it. */
    List<KeptPage> takeKept() {
        List<KeptPage> out = kept;
        kept = List.of();
        return out;
    }

    /**
     * Takes a kept page's block back: true when it was free (the index named no block twice) and is the caller's now.
     */
    boolean allocateAt(long offset, int order) {
        return allocator.allocateAt(offset, order);
    }

    /**
     * Writes the index of {@code pages} beside the slab and leaves the file at close, for the next daemon
     * ({@code server.host-keep}). Call once nothing writes to the slab any more (after the write-behind stopped).
     */
    void keep(List<SlabPage> pages) {
        try {
            SlabIndexFile.write(indexOf(file), slab.byteSize(), pages);
            keeping = true;
            LOG.log(Level.INFO, "kept the host slab " + file + " with " + pages.size() + " pages for the next start");
        } catch (IOException e) {
            LOG.log(Level.WARNING, "could not keep the host slab (" + e + "); it is removed as usual");
        }
    }

    /**
     * Removes the slabs in {@code dir} that daemons which stopped without closing (killed, crashed) left behind, saying
     * so: a slab's index lived in its daemon's memory, so no later daemon can serve from it, and on tmpfs it holds
     * memory until removed. A slab whose lock is held belongs to a live daemon (here or in another process) and stays.
     */
    static void removeLeftSlabs(Path dir) {
        List<Path> slabs;
        try (Stream<Path> files = Files.list(dir)) {
            slabs = files.filter(f -> {
                        String name = f.getFileName().toString();
                        return name.startsWith(SLAB_PREFIX) && name.endsWith(SLAB_SUFFIX);
                    })
                    .toList();
        } catch (IOException e) {
            return; // the slab's own creation reports what is wrong with the folder
        }
        for (Path slab : slabs) {
            if (LIVE_SLABS.contains(slab.toAbsolutePath())) {
                continue; // a daemon in this JVM: opening and closing its file here would drop that daemon's lock
            }
            try (FileChannel channel = FileChannel.open(slab, StandardOpenOption.WRITE)) {
                FileLock lock;
                try {
                    lock = channel.tryLock();
                } catch (OverlappingFileLockException e) {
                    continue; // held in this JVM after all
                }
                if (lock == null) {
                    continue; // a daemon in another process holds it
                }
                long size = channel.size();
                Files.deleteIfExists(indexOf(slab));
                Files.delete(slab);
                LOG.log(
                        Level.WARNING,
                        "removed " + slab + " (" + Units.formatBytes(size) + "): the host slab of a daemon that "
                                + "stopped without closing (killed or crashed). It is not reused, because its index "
                                + "lived in that daemon's memory; its pages are in L3 if they were written behind");
            } catch (IOException e) {
                LOG.log(Level.WARNING, "cannot remove " + slab + ", which a stopped daemon seems to have left: " + e);
            }
        }
    }

    private static void closeQuietly(@Nullable FileChannel channel) {
        try {
            if (channel != null) {
                channel.close();
            }
        } catch (IOException e) {
            // closing releases the lock whatever happens
        }
    }

    private static String tooLarge(long bytes, Path dir, long free) {
        return "the host slab (server.host-size) needs " + Units.formatBytes(bytes) + " (" + bytes + " bytes) in "
                + dir + ", which has " + Units.formatBytes(free) + " (" + free + " bytes) free; lower server.host-size "
                + "or point server.host-dir at a larger tmpfs";
    }

    private static void deleteQuietly(@Nullable Path file) {
        if (file == null) {
            return;
        }
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            LOG.log(Level.WARNING, "cannot delete " + file, e);
        }
    }

    /** The slab's file: what a same-host client maps. */
    Path file() {
        return file;
    }

    long slabBytes() {
        return slab.byteSize();
    }

    long freeBytes() {
        return allocator.freeBytes();
    }

    /** {@code server.namespace-quota}: the most slab bytes one namespace may hold; 0 for none. */
    long quota() {
        return quota;
    }

    /* ---------------------------------------------------------------- blocks */

    /** The order of the smallest block that holds {@code length} bytes, or -1 if none does. */
    int orderFor(long length) {
        return allocator.orderFor(length);
    }

    long blockBytes(int order) {
        return allocator.blockBytes(order);
    }

    /** A free block of {@code order}'s offset, or -1 when there is none (nothing is evicted here). */
    long allocate(int order) {
        return allocator.allocate(order);
    }

    /** Gives back the block of a page that held {@code order} at {@code offset}, and its bytes to the namespace. */
    void free(Namespace ns, long offset, int order) {
        allocator.free(offset, order);
        discharge(ns, allocator.blockBytes(order));
    }

    /** Gives back a block no namespace was charged for (a promotion's, before its page is admitted). */
    void freeBlock(long offset, int order) {
        allocator.free(offset, order);
    }

    /** Frees a room whose page will not be stored. */
    void free(Room room) {
        free(room.key().namespace(), room.offset(), room.order());
    }

    /* ---------------------------------------------------------------- namespaces */

    /** Charges {@code bytes} to {@code ns}; returns what it holds now (compared with {@link #quota} by the caller). */
    long charge(Namespace ns, long bytes) {
        if (countTenants && !ns.tenant().isEmpty()) {
            tenantBytes.computeIfAbsent(ns.tenant(), t -> new AtomicLong()).addAndGet(bytes);
        }
        return namespaceBytes.charge(ns, bytes);
    }

    /** Gives back bytes {@link #charge}d to {@code ns}. */
    void discharge(Namespace ns, long bytes) {
        if (countTenants && !ns.tenant().isEmpty()) {
            AtomicLong t = tenantBytes.get(ns.tenant());
            if (t != null) {
                t.addAndGet(-bytes);
            }
        }
        namespaceBytes.discharge(ns, bytes);
    }

    /** Counts tenants' bytes from now on (set once at start, before any page: the daemon has tenants). */
    void countTenants() {
        countTenants = true;
    }

    /**
     * Slab bytes held by the namespaces of tenant {@code tenant} together (docs/security.md); tenants' entries stay
     * (a daemon has the few its tenants file names).
     */
    long tenantBytes(String tenant) {
        AtomicLong t = tenantBytes.get(tenant);
        return t == null ? 0 : t.get();
    }

    /** Slab bytes held by a namespace's pages (blocks, so a little more than the pages' lengths). */
    long namespaceBytes(Namespace ns) {
        return namespaceBytes.bytes(ns);
    }

    /** Namespaces the slab keeps anything for: those holding pages or room now. */
    int namespacesHeld() {
        return namespaceBytes.namespaces();
    }

    /* ---------------------------------------------------------------- bytes */

    /** The bytes of {@code length} at {@code offset}. */
    MemorySegment bytes(long offset, int length) {
        return slab.asSlice(offset, length);
    }

    /** The bytes of a room, where its page is written. */
    MemorySegment bytes(Room room) {
        return slab.asSlice(room.offset(), room.length());
    }

    /** The bytes of a pinned page, in the slab or its spill buffer. */
    MemorySegment bytes(SlabPage p) {
        return p.inSlab() ? slab.asSlice(p.offset, p.length) : MemorySegment.ofBuffer(spill(p).nioBuffer(0, p.length));
    }

    /** A buffer over the bytes of a pinned page, without a copy: valid while the page stays pinned. */
    ByteBuf body(SlabPage p) {
        return p.inSlab() ? Unpooled.wrappedBuffer(bytes(p).asByteBuffer()) : spill(p).retainedSlice(0, p.length);
    }

    /** The buffer of a page not in the slab. */
    private static ByteBuf spill(SlabPage p) {
        return Checks.checkNotNull(p.spill, "a spilled page's buffer");
    }

    /** Unmaps the slab and deletes its file. */
    @Override
    public void close() {
        arena.close();
        if (!keeping) {
            deleteQuietly(file);
        }
        closeQuietly(lockChannel);
        LIVE_SLABS.remove(file.toAbsolutePath());
    }
}
