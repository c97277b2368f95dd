package io.hicache.server.daemon;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.MappedFiles;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * The host slab's space: a file on tmpfs ({@code server.host-dir}) mapped once, its space reserved when it is made
 * ({@link MappedFiles}: a tmpfs that fills up later cannot kill the daemon with SIGBUS on a page write), handed out in
 * contiguous blocks by a {@link BuddyAllocator}, and the bytes each namespace holds against {@code server.namespace-quota}
 * ({@link NamespaceBytes}). It knows blocks and namespaces, not pages: which block holds which page is
 * {@link PageIndex}'s.
 *
 * <p>Thread-safe. Owns the mapping and the file: {@link #close} unmaps the slab and deletes the file, after which no
 * page's bytes may be touched.
 */
final class SlabSpace implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(SlabSpace.class.getName());

    private final Path file;
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

    private SlabSpace(Path file, Arena arena, MemorySegment slab, BuddyAllocator allocator, long quota) {
        this.file = file;
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
        long free = MappedFiles.usableBytes(dir);
        if (free >= 0 && bytes > free) {
            throw new HiCacheException(ErrorCode.HOST_POOL_TOO_LARGE, tooLarge(bytes, dir, free));
        }
        Arena arena = Arena.ofShared();
        Path file = null;
        try {
            // A temporary file is its owner's only (mode 0600), and MappedFiles grows it and reserves its space.
            file = Files.createTempFile(dir, "hicache-server-", ".slab");
            MemorySegment slab = MappedFiles.create(file, bytes, false, arena);
            BuddyAllocator allocator = new BuddyAllocator(
                    bytes, config.minBlockBytes(), Long.numberOfTrailingZeros(top / config.minBlockBytes()));
            return new SlabSpace(file, arena, slab, allocator, config.namespaceQuota());
        } catch (IOException | RuntimeException e) {
            arena.close();
            deleteQuietly(file);
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
        namespaceBytes.discharge(ns, allocator.blockBytes(order));
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
        return namespaceBytes.charge(ns, bytes);
    }

    /** Gives back bytes {@link #charge}d to {@code ns}. */
    void discharge(Namespace ns, long bytes) {
        namespaceBytes.discharge(ns, bytes);
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
        deleteQuietly(file);
    }
}
