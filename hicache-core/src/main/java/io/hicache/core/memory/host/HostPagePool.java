package io.hicache.core.memory.host;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.MappedFiles;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
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
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.jspecify.annotations.Nullable;

/**
 * The host tier (L2): a slab of page slots in a file on tmpfs, mapped with FFM, with a Chronicle Map index of
 * store key to slot, checksum and state beside it. After a restart or a crash the pool reopens both, drops
 * entries that were not ready or whose page no longer matches its checksum, and serves the rest: the host tier
 * comes back warm.
 *
 * <p>Files in {@code host.dir}, named by {@code host.name}: {@code .slab} (the pages), {@code .index} (Chronicle
 * Map), {@code .slots} (the {@link SlotJournal}: what each slot durably holds), {@code .meta} (the format the
 * files were made for, and whether they were closed cleanly), {@code .lock} (held while open, so one process
 * owns the pool).
 *
 * <p>Slots move through {@link SlotStates}: a writer reserves slots, claims each for a key
 * ({@link #beginWrite}), fills it (a device backup, a store get, {@link #writePage}) and commits it; a reader
 * pins a ready page ({@link #pin}) and unpins it when done. A slot being written or read cannot be released.
 * Durability order, which is what makes a killed process safe: a page's bytes are written before its journal
 * record says READY, and the record says FREE before the slot can be reused. On every open the journal decides
 * which pages survive and the index is reconciled with it, so the pool does not depend on Chronicle Map's
 * recovery after a kill being exact (its documentation calls recovery best effort). The reconcile also closes
 * the window between the journal and the index for the one change in flight when a process died.
 *
 * <p>Thread-safe. The opener closes it; closing unregisters the slab from the device runtime, unmaps it and
 * marks the files clean.
 */
public final class HostPagePool implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(HostPagePool.class.getName());
    private static final int PIN_ATTEMPTS = 4;

    /**
     * What opening the pool found.
     *
     * @param reopened            true when existing files were reused, false when the pool started empty
     * @param restoredPages       ready pages served again
     * @param droppedUnfinished   writes a previous owner never committed
     * @param droppedCorrupt      ready pages whose bytes no longer match their checksum
     * @param droppedStale        index entries the journal does not back (an older or removed value)
     * @param repairedEntries     index entries rebuilt from the journal (a committed page the index had lost)
     * @param recovered           true when the previous owner did not close cleanly and the index was recovered
     * @param openMillis          time to open, recovery and checks included
     */
    public record OpenReport(
            boolean reopened,
            int restoredPages,
            int droppedUnfinished,
            int droppedCorrupt,
            int droppedStale,
            int repairedEntries,
            boolean recovered,
            long openMillis) {}

    private final HostPoolConfig config;
    private final PageFormat format;
    private final int capacity;
    private final Path slabFile;
    private final Path metaFile;
    private final FileChannel lockChannel;
    private final FileLock lock;
    private final Arena arena;
    private final HostSlab slab;
    private final HostIndex index;
    private final SlotJournal journal;
    private final SlotStates states;
    private final PageAllocator allocator;
    private final HostRegistration registration;
    private final OpenReport openReport;
    private final AtomicBoolean closed = new AtomicBoolean();

    private HostPagePool(HostPoolConfig config, PageFormat format, int capacity, DeviceRuntime runtime) {
        long started = System.nanoTime();
        this.config = config;
        this.format = format;
        this.capacity = capacity;
        Path dir = config.dir();
        this.slabFile = dir.resolve(config.name() + ".slab");
        this.metaFile = dir.resolve(config.name() + ".meta");
        Path indexFile = dir.resolve(config.name() + ".index");
        Path journalFile = dir.resolve(config.name() + ".slots");
        long slabBytes = HostSlab.bytesFor(format, capacity);
        long journalBytes = SlotJournal.bytesFor(capacity);
        try {
            Files.createDirectories(dir);
            lockChannel = FileChannel.open(
                    dir.resolve(config.name() + ".lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new HiCacheException(ErrorCode.HOST_POOL_UNAVAILABLE, "cannot use host.dir " + dir + ": " + e, e);
        }
        this.lock = lockOrFail(dir);
        boolean opened = false;
        Arena mappings = null;
        HostIndex openedIndex = null;
        try {
            PoolMeta previous = PoolMeta.read(metaFile);
            String fingerprint = PoolMeta.fingerprint(format, capacity);
            boolean reuse = previous != null
                    && previous.fingerprint().equals(fingerprint)
                    && Files.exists(indexFile)
                    && sized(slabFile, slabBytes)
                    && sized(journalFile, journalBytes);
            if (!reuse) {
                if (previous != null) {
                    LOG.log(
                            Level.WARNING,
                            "host pool " + slabFile + " was made for " + previous.fingerprint()
                                    + "; the configuration is now " + fingerprint + ", so it starts empty");
                }
                for (Path f : List.of(slabFile, journalFile, indexFile)) {
                    Files.deleteIfExists(f);
                }
            }
            HostPoolSizing.checkFits(config, slabBytes + journalBytes, reuse ? slabBytes + journalBytes : 0);
            boolean recover = reuse && previous != null && !previous.closedCleanly();
            PoolMeta.write(metaFile, fingerprint, false);
            mappings = Arena.ofShared();
            MemorySegment memory = map(slabFile, slabBytes, reuse, mappings);
            this.journal = new SlotJournal(map(journalFile, journalBytes, reuse, mappings), capacity);
            openedIndex = HostIndex.open(indexFile, capacity, recover);
            this.arena = mappings;
            this.index = openedIndex;
            this.slab = new HostSlab(memory, format, capacity);
            this.states = new SlotStates(capacity);
            BitSet ready = new BitSet(capacity);
            int[] counts = reuse ? restore(ready) : new int[4];
            this.allocator = PageAllocator.withAllocated("host pool " + config.name(), capacity, ready);
            this.registration = runtime.registerHost(memory);
            this.openReport = new OpenReport(
                    reuse,
                    ready.cardinality(),
                    counts[0],
                    counts[1],
                    counts[2],
                    counts[3],
                    recover,
                    (System.nanoTime() - started) / 1_000_000);
            opened = true;
        } catch (IOException e) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE, "cannot open the host pool in " + dir + ": " + e, e);
        } finally {
            if (!opened) {
                if (openedIndex != null) {
                    openedIndex.close();
                }
                if (mappings != null) {
                    mappings.close();
                }
                releaseLock();
                if (!config.keep()) {
                    removeFiles();
                }
            }
        }
        LOG.log(
                Level.INFO,
                () -> "host pool " + slabFile + ": " + capacity + " pages of "
                        + Units.formatBytes(format.pageBytes()) + " (" + Units.formatBytes(slabBytes) + ", "
                        + format.layout()
                        + "), " + openReport);
    }

    /**
     * Slots of a host pool for a device pool of {@code devicePages} pages, sized as SGLang sizes it:
     * {@code hicache-size} if set, else {@code hicache-ratio} times the device pool, and always more than the device
     * pool.
     *
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_TOO_LARGE} when {@code hicache-size} gives no more pages than
     *     the device pool
     */
    public static int slotsFor(HostPoolConfig config, PageFormat format, int devicePages) {
        return HostPoolSizing.slots(config, format, devicePages);
    }

    /**
     * Opens the pool that {@code config} names for {@code capacity} pages of {@code format}, reusing its files if
     * they were made for the same format and capacity, and registers the slab with {@code runtime}.
     *
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_IN_USE} when another process has it open,
     *     {@link ErrorCode#HOST_POOL_TOO_LARGE} when it does not fit, {@link ErrorCode#HOST_POOL_UNAVAILABLE}
     *     when its files cannot be made
     */
    public static HostPagePool open(HostPoolConfig config, PageFormat format, int capacity, DeviceRuntime runtime) {
        Checks.checkNotNull(config, "config");
        HostIndex.requireJvmFlags(); // before any file is made
        Checks.checkNotNull(format, "format");
        Checks.checkNotNull(runtime, "runtime");
        Checks.checkPositive(capacity, "capacity");
        Checks.requireArgument(
                format.layout() == config.layout(),
                "the page format's layout %s differs from hicache-mem-layout %s",
                format.layout(),
                config.layout());
        return new HostPagePool(config, format, capacity, runtime);
    }

    private FileLock lockOrFail(Path dir) {
        try {
            FileLock l = lockChannel.tryLock();
            if (l != null) {
                return l;
            }
        } catch (OverlappingFileLockException e) {
            // this process holds it already: fall through
        } catch (IOException e) {
            closeQuietly();
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE, "cannot lock the host pool in " + dir + ": " + e, e);
        }
        closeQuietly();
        throw new HiCacheException(
                ErrorCode.HOST_POOL_IN_USE,
                "the host pool '" + config.name() + "' in " + dir
                        + " is open in another process (or elsewhere in this one); give each its own host.name");
    }

    private void closeQuietly() {
        try {
            lockChannel.close();
        } catch (IOException ignored) {
            // nothing to do
        }
    }

    private static boolean sized(Path file, long bytes) throws IOException {
        return Files.exists(file) && Files.size(file) == bytes;
    }

    /** Maps {@code file}, creating it at {@code bytes} (its space reserved up front) unless {@code existing}. */
    private static MemorySegment map(Path file, long bytes, boolean existing, Arena arena) throws IOException {
        return existing ? MappedFiles.open(file, bytes, arena) : MappedFiles.create(file, bytes, false, arena);
    }

    /**
     * Rebuilds the pool from the journal: keeps READY slots whose bytes match their checksum, frees the rest, then
     * makes the index agree. Returns {unfinished, corrupt, stale, repaired}.
     */
    private int[] restore(BitSet ready) {
        int unfinished = 0;
        for (int s = 0; s < capacity; s++) {
            int state = journal.state(s);
            if (state == SlotStates.WRITING) {
                unfinished++;
                journal.free(s);
            } else if (state == SlotStates.READY) {
                ready.set(s);
            }
        }
        // Verify every kept page against its checksum, on all cores: this is most of a warm reopen.
        int[] corrupt = ready.stream()
                .parallel()
                .filter(s -> checksum(s) != journal.checksum(s))
                .toArray();
        for (int s : corrupt) {
            journal.free(s);
            ready.clear(s);
        }
        // The index must say exactly what the journal says.
        BitSet indexed = new BitSet(capacity);
        int stale = 0;
        for (HostIndex.Entry e : index.entries()) {
            int s = e.slot();
            // A claimed entry (WRITING) stands for the page its slot's journal holds, if the journal says ready.
            boolean backed = (e.state() == SlotStates.READY || e.state() == SlotStates.WRITING)
                    && s >= 0
                    && s < capacity
                    && ready.get(s)
                    && !indexed.get(s)
                    && journal.hasKey(s, e.key())
                    && (e.state() == SlotStates.WRITING || journal.checksum(s) == e.checksum());
            if (backed) {
                indexed.set(s);
            } else {
                index.remove(e.key());
                // Not a write the crash interrupted (its slot was freed above): an entry for a page gone or moved.
                if (e.state() != SlotStates.WRITING || (s >= 0 && s < capacity && ready.get(s))) {
                    stale++;
                }
            }
        }
        int repaired = 0;
        for (int s = ready.nextSetBit(0); s >= 0; s = ready.nextSetBit(s + 1)) {
            states.set(s, SlotStates.READY);
            if (!indexed.get(s)) {
                index.markReady(journal.key(s), s, journal.checksum(s));
                repaired++;
            }
        }
        return new int[] {unfinished, corrupt.length, stale, repaired};
    }

    /* ---------------------------------------------------------------- allocation */

    /** {@code count} free slots, now reserved, or {@code null} (nothing reserved) when fewer are free. */
    public int @Nullable [] tryReserve(int count) {
        checkOpen();
        int[] slots = allocator.tryAllocate(count);
        if (slots != null) {
            for (int s : slots) {
                states.transition(s, SlotStates.FREE, SlotStates.RESERVED, "be reserved");
            }
        }
        return slots;
    }

    /**
     * Frees slots that are reserved, or ready and not being read. A ready page is gone from the journal and the
     * index before its slot can be handed out again.
     *
     * @throws IllegalStateException for a slot being written, being read, or already free
     */
    public void release(int... slots) {
        checkOpen();
        for (int s : slots) {
            int was = states.release(s);
            if (was == SlotStates.READY) {
                journal.free(s);
                index.remove(journal.key(s));
            }
            allocator.free(s);
        }
    }

    /* ---------------------------------------------------------------- writing */

    /**
     * Claims reserved {@code slot} for the page {@code key}, which the caller then writes. Returns false, and
     * leaves the slot reserved, when {@code key} is already stored or being written.
     */
    public boolean beginWrite(int slot, StoreKey key) {
        checkOpen();
        byte[] k = HostIndex.key(key);
        states.transition(slot, SlotStates.RESERVED, SlotStates.WRITING, "begin a write");
        if (!index.claimForWrite(k, slot)) {
            states.transition(slot, SlotStates.WRITING, SlotStates.RESERVED, "give up a write");
            return false;
        }
        journal.writing(slot, k);
        return true;
    }

    /**
     * Marks a written page ready: checksums it, commits it in the journal, then lets readers in. The index entry was
     * written when the write was claimed; the commit leaves it alone (no Chronicle Map update per page).
     */
    public void commitWrite(int slot) {
        checkOpen();
        Checks.requireState(
                SlotStates.state(states.word(slot)) == SlotStates.WRITING,
                "host slot %d cannot be committed: it is %s",
                slot,
                SlotStates.describe(states.word(slot)));
        int checksum = checksum(slot);
        journal.ready(slot, checksum);
        states.transition(slot, SlotStates.WRITING, SlotStates.READY, "be committed");
    }

    /** Abandons a write: the key is no longer claimed and the slot is reserved again. */
    public void abortWrite(int slot) {
        checkOpen();
        Checks.requireState(
                SlotStates.state(states.word(slot)) == SlotStates.WRITING,
                "host slot %d has no write to abort: it is %s",
                slot,
                SlotStates.describe(states.word(slot)));
        journal.free(slot);
        index.remove(journal.key(slot));
        states.transition(slot, SlotStates.WRITING, SlotStates.RESERVED, "abort its write");
    }

    /** Writes a flat page into a slot being written (in the format's flat order). */
    public void writePage(int slot, MemorySegment flat) {
        checkOpen();
        Checks.requireState(
                SlotStates.state(states.word(slot)) == SlotStates.WRITING,
                "host slot %d is not being written: it is %s",
                slot,
                SlotStates.describe(states.word(slot)));
        slab.writePage(slot, flat);
    }

    /* ---------------------------------------------------------------- reading */

    /**
     * Pins the ready page {@code key} for reading and returns its slot, or -1 when it is not here. The caller
     * unpins it with {@link #unpin}; until then the slot is neither released nor rewritten.
     */
    public int pin(StoreKey key) {
        checkOpen();
        byte[] k = HostIndex.key(key);
        for (int attempt = 0; attempt < PIN_ATTEMPTS; attempt++) {
            int slot = index.slotOf(k);
            if (slot < 0) {
                return -1;
            }
            if (states.tryBeginRead(slot)) {
                if (journal.hasKey(slot, k)) {
                    return slot;
                }
                // The slot was freed and refilled with another page between the lookup and the pin.
                states.endRead(slot);
            }
        }
        return -1;
    }

    /** Ends a read begun by {@link #pin}. */
    public void unpin(int slot) {
        states.endRead(slot);
    }

    /** The slot of ready page {@code key}, or -1; a hint, as the page may be released at any time unless pinned. */
    public int find(StoreKey key) {
        checkOpen();
        byte[] k = HostIndex.key(key);
        int slot = index.slotOf(k);
        return isReady(slot, k) ? slot : -1;
    }

    /** Whether {@code slot} (from the index) holds ready page {@code k} now. */
    private boolean isReady(int slot, byte[] k) {
        return slot >= 0 && SlotStates.state(states.word(slot)) == SlotStates.READY && journal.hasKey(slot, k);
    }

    /**
     * Whether {@code slot} holds page {@code key} intact now: ready, its journal record naming {@code key} (the
     * identity check, a 48-byte compare), and, with {@code checksum}, its bytes matching the CRC-32C recorded at commit
     * (one pass over the page). The caller keeps the slot from being released meanwhile (the tree's load-back path, an
     * upload's pin).
     */
    public boolean holdsIntact(int slot, StoreKey key, boolean checksum) {
        checkOpen();
        if (slot < 0 || slot >= capacity() || !isReady(slot, HostIndex.key(key))) {
            return false;
        }
        return !checksum || checksum(slot) == journal.checksum(slot);
    }

    /**
     * Takes the name away from a ready page found damaged: no lookup finds it any more and {@link #holdsIntact} fails
     * for it, so the cache drops it (and what hangs below it) at its next load-back; the slot itself goes back to the
     * pool through {@link #release} as usual.
     */
    public void condemn(int slot) {
        checkOpen();
        if (SlotStates.state(states.word(slot)) == SlotStates.READY) {
            index.remove(journal.key(slot));
            journal.forgetKey(slot);
        }
    }

    /** How many of {@code keys}, from the first, are ready here: stops at the first that is not. */
    public int leadingReady(List<StoreKey> keys) {
        checkOpen();
        int n = 0;
        while (n < keys.size()) {
            byte[] k = HostIndex.key(keys.get(n));
            if (!isReady(index.slotOf(k), k)) {
                break;
            }
            n++;
        }
        return n;
    }

    /** Copies a pinned page out in the format's flat order (gathering for layer_first). */
    public void readPage(int slot, MemorySegment flat) {
        checkOpen();
        int w = states.word(slot);
        Checks.requireState(
                SlotStates.state(w) == SlotStates.READY && SlotStates.readers(w) > 0,
                "host slot %d is not pinned for reading: it is %s",
                slot,
                SlotStates.describe(w));
        slab.readPage(slot, flat);
    }

    /** Visits every ready page with its index key (namespace id, then page hash; 48 bytes). */
    public void forEachReady(ReadyPageVisitor visitor) {
        for (int s = 0; s < capacity; s++) {
            if (SlotStates.state(states.word(s)) == SlotStates.READY) {
                visitor.visit(s, journal.key(s));
            }
        }
    }

    /** Receives ready pages from {@link #forEachReady}. */
    @FunctionalInterface
    public interface ReadyPageVisitor {
        void visit(int slot, byte[] indexKey);
    }

    /** The 48-byte index key of {@code key}: what {@link #forEachReady} reports. */
    public static byte[] indexKey(StoreKey key) {
        return HostIndex.key(key);
    }

    /* ---------------------------------------------------------------- state */

    /** The slab, for device copies and for zero-copy store I/O. */
    public HostSlab slab() {
        return slab;
    }

    public PageFormat format() {
        return format;
    }

    /** Slots in the pool. */
    public int capacity() {
        return capacity;
    }

    /** Slots not reserved, written or ready. */
    public int freeSlots() {
        return allocator.available();
    }

    /** Ready pages now. */
    public int readyPages() {
        int n = 0;
        for (int s = 0; s < capacity; s++) {
            if (SlotStates.state(states.word(s)) == SlotStates.READY) {
                n++;
            }
        }
        return n;
    }

    /** What opening found. */
    public OpenReport openReport() {
        return openReport;
    }

    /** The slab file. */
    public Path slabFile() {
        return slabFile;
    }

    private int checksum(int slot) {
        CRC32C crc = new CRC32C();
        if (slab.pagesContiguous()) {
            crc.update(slab.page(slot).asByteBuffer());
        } else {
            int parts = format.geometry().attention().parts();
            for (int part = 0; part < parts; part++) {
                for (int layer = 0; layer < format.geometry().layers(); layer++) {
                    crc.update(slab.memory()
                            .asSlice(slab.chunkOffset(slot, layer, part), slab.chunkBytes())
                            .asByteBuffer());
                }
            }
        }
        return (int) crc.getValue();
    }

    private void checkOpen() {
        Checks.requireState(!closed.get(), "the host pool %s is closed", slabFile);
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            registration.close();
            index.close();
            arena.close();
            PoolMeta.write(metaFile, PoolMeta.fingerprint(format, capacity), true);
        } catch (IOException e) {
            LOG.log(
                    Level.WARNING,
                    "host pool " + slabFile + ": could not mark it closed cleanly; the next open will" + " recover it",
                    e);
        } finally {
            releaseLock();
            if (!config.keep()) {
                removeFiles();
            }
        }
    }

    /** {@code host.keep=false}: the pool's files go with it, and its folder too if that is left empty. */
    private void removeFiles() {
        Path dir = config.dir();
        for (String suffix : List.of(".slab", ".slots", ".index", ".meta", ".lock")) {
            Path f = dir.resolve(config.name() + suffix);
            try {
                Files.deleteIfExists(f);
            } catch (IOException e) {
                LOG.log(Level.WARNING, "host pool: cannot delete " + f + " (host.keep=false): " + e);
            }
        }
        try (Stream<Path> left = Files.list(dir)) {
            if (left.findAny().isEmpty()) {
                Files.deleteIfExists(dir);
            }
        } catch (IOException e) {
            // a folder that cannot be listed or removed is left as it is: it held more than this pool
        }
    }

    private void releaseLock() {
        try {
            if (lock != null) {
                lock.release();
            }
        } catch (IOException e) {
            // closing the channel releases it too
        }
        closeQuietly();
    }
}
