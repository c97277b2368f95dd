package io.hicache.storage.rocksdb;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.CapacityGate;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.util.Threads;
import io.hicache.storage.file.PageId;
import io.hicache.storage.file.StoreRoot;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.rocksdb.ByteBufferGetStatus;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Status;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * The {@code rocksdb} page store: pages as values in a RocksDB database ({@link RocksDbHandles} says which options
 * and why), keyed by namespace id then page hash, so a namespace is one key range. A put of a batch is one write
 * batch; a get of a batch is a multi-get per chunk of at least 16 pages, the chunks in parallel on the store's
 * threads, landing each value straight in the caller's memory. Each page's
 * length and CRC-32C sit beside it in a second column family and are checked on every read.
 *
 * <p>Copies on the data path: a put hands the page to RocksDB from the caller's memory (RocksDB copies it into its
 * write batch, then into the memtable, and writes it to the write-ahead log and, at flush, to a blob file); a get
 * copies once, from RocksDB's read buffer into the caller's memory. No page byte passes through the Java heap.
 *
 * <p>The store keeps at most {@code rocksdb.capacity} page bytes, deleting the oldest pages first (down to
 * {@code rocksdb.low-water}) on a background thread ({@link CapacityGate}). Capacity counts page bytes: the space on
 * disk trails deletions until RocksDB's blob garbage collection and compactions run. A read in flight is never
 * disturbed by a deletion (RocksDB reads a consistent version).
 *
 * <p>Thread-safe: reads run concurrently; writes, deletions and evictions take one lock (RocksDB serialises writes
 * anyway). The opener closes it; closing waits for calls in flight and releases every native handle once.
 */
public final class RocksDbPageStore extends AbstractPageStore {
    private static final System.Logger LOG = System.getLogger(RocksDbPageStore.class.getName());
    private static final int PREFERRED_BATCH = 128;
    /** Pages per multi-get below which splitting a get costs more than it saves. */
    private static final int MIN_GET_CHUNK = 16;

    private final RocksDbStoreConfig config;
    private final StoreRoot root;
    private final RocksDbHandles rocks;
    private final ConcurrentHashMap<PageId, PageMeta> metas = new ConcurrentHashMap<>();
    /** The stored pages in the order they were written (by their meta records' sequence numbers): eviction's order. */
    private final PageUsageIndex<PageId> writeOrder =
            PageUsageIndex.<PageId>builder(PageUsageIndex.Order.INSERTION).build();

    private final AtomicLong sequence = new AtomicLong();
    private final ReentrantLock writeLock = new ReentrantLock();
    private final ExecutorService calls;
    private final CapacityGate<PageId> gate;

    private RocksDbPageStore(RocksDbStoreConfig config, StoreRoot root) throws IOException, RocksDBException {
        super(
                "rocksdb",
                root.path().toString(),
                new StoreCapabilities(
                        Set.of(Capability.PERSISTENT, Capability.EVICTING),
                        PageFormat.MAX_PAGE_BYTES,
                        PREFERRED_BATCH));
        this.config = config;
        this.root = root;
        this.rocks = new RocksDbHandles(config, root.path().resolve("db"));
        long start = System.nanoTime();
        loadMeta();
        long capacity = config.capacityBytes() > 0
                ? config.capacityBytes()
                : (long) (0.9 * (Files.getFileStore(root.path()).getUsableSpace() + writeOrder.bytes()));
        this.calls = Executors.newFixedThreadPool(config.ioThreads(), Threads.factory("rocksdb-io"));
        this.gate = new CapacityGate<>(
                "rocksdb",
                Math.max(1, capacity),
                CapacityGate.Watermarks.evictPastCapacityDownTo(config.lowWater()),
                writeOrder,
                this::evict);
        gate.start();
        long millis = (System.nanoTime() - start) / 1_000_000;
        LOG.log(
                Level.INFO,
                () -> "rocksdb store at " + root.path() + ": " + metas.size() + " pages ("
                        + Units.formatBytes(writeOrder.bytes()) + ") loaded in " + millis + " ms; capacity "
                        + Units.formatBytes(gate.capacityBytes()));
    }

    /**
     * Opens the store {@code config} describes.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the folder or the database cannot be used
     */
    public static RocksDbPageStore open(RocksDbStoreConfig config) {
        StoreRoot root = new StoreRoot(config.root(), "rocksdb");
        try {
            return new RocksDbPageStore(config, root);
        } catch (IOException | RocksDBException | RuntimeException e) {
            root.close();
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "cannot open the rocksdb store at " + root.path() + ": " + e.getMessage(),
                    e);
        }
    }

    /** Reads every page's meta record into memory, then indexes the pages oldest first: the index of what is stored. */
    private void loadMeta() throws RocksDBException {
        try (RocksIterator it = rocks.db.newIterator(rocks.meta)) {
            for (it.seekToFirst(); it.isValid(); it.next()) {
                PageId id = PageId.fromBytes(it.key());
                PageMeta m = PageMeta.fromBytes(it.value());
                metas.put(id, m);
                sequence.accumulateAndGet(m.sequence(), Math::max);
            }
            it.status();
        }
        // Records come in key order; the index wants write order. One sort when the store opens, never per eviction.
        List<Map.Entry<PageId, PageMeta>> oldestFirst = new ArrayList<>(metas.entrySet());
        oldestFirst.sort(Comparator.comparingLong(e -> e.getValue().sequence()));
        for (Map.Entry<PageId, PageMeta> e : oldestFirst) {
            writeOrder.insert(e.getKey(), e.getValue().length());
        }
    }

    /* ---------------------------------------------------------------- reads */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        int hits = 0;
        while (hits < keys.size() && !deadline.isOver() && metas.containsKey(PageId.of(keys.get(hits)))) {
            hits++;
        }
        return CompletableFuture.completedFuture(hits);
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        // One multi-get reads its pages one after another: a large batch is split over the store's threads.
        int n = targets.size();
        int chunks = Math.max(1, Math.min(config.ioThreads(), n / MIN_GET_CHUNK));
        BatchResult.Builder result = BatchResult.builder(n);
        CompletableFuture<?>[] parts = new CompletableFuture<?>[chunks];
        for (int c = 0; c < chunks; c++) {
            int from = (int) ((long) n * c / chunks);
            int to = (int) ((long) n * (c + 1) / chunks);
            parts[c] = supply(() -> {
                if (deadline.isOver()) {
                    for (int i = from; i < to; i++) {
                        result.set(i, PageStatus.stoppedBy(deadline));
                    }
                } else {
                    read(targets, from, to, result);
                }
                return null;
            });
        }
        // The chunks set disjoint outcomes; allOf orders their writes before build().
        return CompletableFuture.allOf(parts).thenApply(done -> result.build());
    }

    /** Reads pages [from, to) of {@code targets} with one multi-get, setting their outcomes in {@code result}. */
    private void read(PageBatch targets, int from, int to, BatchResult.Builder result) throws RocksDBException {
        PageMeta[] expected = new PageMeta[to];
        List<Integer> asked = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            PageMeta m = metas.get(PageId.of(targets.key(i)));
            if (m == null) {
                result.set(i, PageStatus.MISS);
            } else if (m.length() != targets.page(i).byteSize()) {
                result.set(
                        i,
                        PageStatus.SIZE_MISMATCH,
                        "stored page is " + m.length() + " bytes, target is "
                                + targets.page(i).byteSize());
            } else {
                expected[i] = m;
                asked.add(i);
            }
        }
        if (asked.isEmpty()) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            List<ByteBuffer> keys = new ArrayList<>(asked.size());
            List<ByteBuffer> values = new ArrayList<>(asked.size());
            for (int i : asked) {
                keys.add(keyBuffer(arena, PageId.of(targets.key(i))));
                values.add(targets.page(i).asByteBuffer());
            }
            List<ByteBufferGetStatus> got = rocks.db.multiGetByteBuffers(
                    rocks.readOptions, Collections.nCopies(asked.size(), rocks.pages), keys, values);
            for (int j = 0; j < asked.size(); j++) {
                int i = asked.get(j);
                ByteBufferGetStatus s = got.get(j);
                Status.Code code = s.status.getCode();
                if (code == Status.Code.NotFound) {
                    result.set(i, PageStatus.MISS); // deleted since the lookup
                } else if (code == Status.Code.Corruption) {
                    result.set(i, PageStatus.CORRUPT, "RocksDB: " + s.status.getState());
                } else if (code != Status.Code.Ok) {
                    result.set(i, PageStatus.FAILED, "RocksDB: " + s.status.getCodeString());
                } else if (s.requiredSize != expected[i].length()) {
                    result.set(
                            i,
                            PageStatus.CORRUPT,
                            "stored value is " + s.requiredSize + " bytes, its record says " + expected[i].length());
                } else if (PageChecksum.of(targets.page(i)) != expected[i].crc()) {
                    result.set(i, PageStatus.CORRUPT, "page checksum mismatch");
                } else {
                    result.set(i, PageStatus.OK);
                }
            }
        }
    }

    private static ByteBuffer keyBuffer(Arena arena, PageId id) {
        MemorySegment key = arena.allocate(PageId.BYTES);
        MemorySegment.copy(id.toBytes(), 0, key, ValueLayout.JAVA_BYTE, 0, PageId.BYTES);
        return key.asByteBuffer();
    }

    /* ---------------------------------------------------------------- writes */

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        for (int i = 0; i < sources.size(); i++) {
            if (sources.page(i).byteSize() > gate.capacityBytes()) {
                return CompletableFuture.completedFuture(BatchResult.all(
                        sources.size(),
                        PageStatus.REJECTED,
                        "page " + i + " of " + sources.page(i).byteSize() + " bytes does not fit a store of "
                                + gate.capacityBytes() + " bytes"));
            }
        }
        return async(sources.size(), deadline, () -> write(sources, deadline));
    }

    private BatchResult write(PageBatch sources, Deadline deadline) throws RocksDBException, InterruptedException {
        int n = sources.size();
        long reserve = sources.totalBytes();
        if (!gate.reserve(reserve, deadline)) {
            return BatchResult.all(
                    n,
                    PageStatus.stoppedBy(deadline),
                    "no room: the store is over its capacity and deletion did not catch up before the deadline");
        }
        PageStatus[] statuses = new PageStatus[n];
        Map<PageId, PageMeta> added = new LinkedHashMap<>();
        // A large batch is written once: into memtables without the log, a chunk at a time so that full memtables
        // flush in the background while later chunks are copied, then flushed before the put returns (see
        // RocksDbHandles). A small one goes through the log in one write, as before.
        boolean writeOnce = sources.totalBytes() >= config.writeBufferBytes() / 4;
        long chunkBytes = writeOnce ? Math.max(1L << 20, config.writeBufferBytes() / 8) : Long.MAX_VALUE;
        WriteOptions options = writeOnce ? rocks.unloggedWrites : rocks.writeOptions;
        writeLock.lock();
        // A batch is a chain's pages, first page first; eviction goes in write order, so the batch is numbered last
        // page
        // first: a chain's suffix goes before its prefix, and a cached prefix keeps no hole (also after a restart,
        // which orders by these numbers).
        long newest = sequence.addAndGet(n);
        try (Arena arena = Arena.ofConfined();
                WriteBatch batch = new WriteBatch()) {
            long inBatch = 0;
            for (int i = 0; i < n; i++) {
                PageId id = PageId.of(sources.key(i));
                if (metas.containsKey(id) || added.containsKey(id)) {
                    statuses[i] = PageStatus.EXISTS;
                    continue;
                }
                MemorySegment page = sources.page(i);
                PageMeta m = new PageMeta(newest - i, page.byteSize(), PageChecksum.of(page));
                ByteBuffer key = keyBuffer(arena, id);
                batch.put(rocks.pages, key, page.asByteBuffer());
                key.rewind();
                batch.put(rocks.meta, key, direct(arena, m.toBytes())); // a page and its record in one write
                added.put(id, m);
                statuses[i] = PageStatus.OK;
                inBatch += page.byteSize();
                if (inBatch >= chunkBytes) {
                    rocks.db.write(options, batch);
                    batch.clear();
                    inBatch = 0;
                }
            }
            if (batch.count() > 0) {
                rocks.db.write(options, batch);
            }
            if (writeOnce && !added.isEmpty()) {
                rocks.db.flush(rocks.flushAndWait, rocks.pageFamilies);
            }
            List<Map.Entry<PageId, PageMeta>> lastFirst = new ArrayList<>(added.entrySet());
            Collections.reverse(lastFirst);
            for (Map.Entry<PageId, PageMeta> e : lastFirst) {
                metas.put(e.getKey(), e.getValue());
                writeOrder.insert(e.getKey(), e.getValue().length());
            }
        } finally {
            writeLock.unlock();
            // The pages written are in the index, which counts them now; the rest were not written.
            gate.release(reserve);
        }
        return BatchResult.of(statuses);
    }

    private static ByteBuffer direct(Arena arena, byte[] bytes) {
        MemorySegment s = arena.allocate(bytes.length);
        MemorySegment.copy(bytes, 0, s, ValueLayout.JAVA_BYTE, 0, bytes.length);
        return s.asByteBuffer();
    }

    /* ---------------------------------------------------------------- removal */

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        return async(keys.size(), deadline, () -> {
            List<PageId> ids = keys.stream().map(PageId::of).toList();
            boolean[] removed = remove(ids);
            PageStatus[] statuses = new PageStatus[ids.size()];
            for (int i = 0; i < statuses.length; i++) {
                statuses[i] = removed[i] ? PageStatus.OK : PageStatus.MISS;
            }
            return BatchResult.of(statuses);
        });
    }

    /** Deletes the pages that are stored, in one write batch; says which were. */
    private boolean[] remove(List<PageId> ids) throws RocksDBException {
        boolean[] removed = new boolean[ids.size()];
        writeLock.lock();
        try (WriteBatch batch = new WriteBatch()) {
            Set<PageId> seen = new HashSet<>();
            for (int i = 0; i < ids.size(); i++) {
                if (!metas.containsKey(ids.get(i)) || !seen.add(ids.get(i))) {
                    continue;
                }
                byte[] key = ids.get(i).toBytes();
                batch.delete(rocks.pages, key);
                batch.delete(rocks.meta, key);
                removed[i] = true;
            }
            if (batch.count() > 0) {
                rocks.db.write(rocks.writeOptions, batch);
                for (int i = 0; i < ids.size(); i++) {
                    if (removed[i]) {
                        forget(ids.get(i));
                    }
                }
            }
        } finally {
            writeLock.unlock();
        }
        return removed;
    }

    private void forget(PageId id) {
        if (metas.remove(id) != null) {
            writeOrder.remove(id);
        }
    }

    /** Oldest-first deletion: the gate claimed the pages, in one write batch. */
    private void evict(List<PageUsageIndex.Claimed<PageId>> pages) throws RocksDBException {
        List<PageId> ids = pages.stream().map(PageUsageIndex.Claimed::key).toList();
        boolean[] removed = remove(ids);
        for (int i = 0; i < ids.size(); i++) {
            if (removed[i]) {
                dropped(ids.get(i).namespaceId(), ids.get(i).hash());
            }
        }
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        byte[] begin = PageId.namespacePrefix(namespace.id());
        return clearRange(begin, rangeEnd(begin), id -> id.namespaceId().equals(namespace.id()));
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        byte[] begin = new byte[Namespace.ID_BYTES];
        byte[] end = new byte[PageId.BYTES + 1];
        Arrays.fill(end, (byte) 0xFF);
        return clearRange(begin, end, id -> true);
    }

    /** A key above every key that starts with {@code prefix}: the prefix, then more 0xFF bytes than a key has. */
    private static byte[] rangeEnd(byte[] prefix) {
        byte[] end = Arrays.copyOf(prefix, PageId.BYTES + 1);
        Arrays.fill(end, prefix.length, end.length, (byte) 0xFF);
        return end;
    }

    private CompletableFuture<Void> clearRange(byte[] begin, byte[] end, Predicate<PageId> which) {
        return supply(() -> {
            writeLock.lock();
            try {
                rocks.db.deleteRange(rocks.pages, rocks.writeOptions, begin, end);
                rocks.db.deleteRange(rocks.meta, rocks.writeOptions, begin, end);
                for (PageId id : List.copyOf(metas.keySet())) {
                    if (which.test(id)) {
                        forget(id);
                    }
                }
            } finally {
                writeLock.unlock();
            }
            return null;
        });
    }

    /* ---------------------------------------------------------------- plumbing */

    /** Work that may throw. */
    @FunctionalInterface
    private interface Call<T> {
        /** Its result: null for work that has none ({@code Call<Void>}). */
        @Nullable
        T run() throws Exception;
    }

    /** Runs a batch call on the store's threads; past its deadline when it starts, it does nothing. */
    private CompletableFuture<BatchResult> async(int size, Deadline deadline, Call<BatchResult> call) {
        return supply(() -> deadline.isOver()
                ? BatchResult.all(size, PageStatus.stoppedBy(deadline), "not started: deadline " + deadline)
                : call.run());
    }

    private <T> CompletableFuture<T> supply(Call<T> call) {
        Supplier<T> wrapped = () -> {
            try {
                return call.run();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                if (e instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                }
                throw new HiCacheException(ErrorCode.STORE_IO, "rocksdb store: " + e.getMessage(), e);
            }
        };
        try {
            return CompletableFuture.supplyAsync(wrapped, calls);
        } catch (RejectedExecutionException e) {
            return CompletableFuture.failedFuture(
                    new HiCacheException(ErrorCode.STORE_CLOSED, "the rocksdb store is closing"));
        }
    }

    @Override
    protected Optional<PageUsageIndex<?>> usageIndex() {
        return Optional.of(writeOrder);
    }

    @Override
    protected long capacityBytes() {
        return gate.capacityBytes();
    }

    /** Native handles still open: 0 after close. For tests. */
    int openHandles() {
        return rocks.openHandles();
    }

    /** The database's handles, for tests in this package (they reach stored values through RocksDB itself). */
    RocksDbHandles handles() {
        return rocks;
    }

    @Override
    protected void doClose() {
        calls.shutdown();
        try {
            if (!calls.awaitTermination(2, TimeUnit.MINUTES)) {
                LOG.log(Level.WARNING, "rocksdb store at " + root.path() + ": calls still running after 2 minutes");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        gate.close();
        writeLock.lock();
        try {
            rocks.close();
        } finally {
            writeLock.unlock();
        }
        root.close();
    }

    @Override
    public String toString() {
        return "RocksDbPageStore[" + root.path() + ", " + Units.formatBytes(writeOrder.bytes()) + " of "
                + Units.formatBytes(gate.capacityBytes()) + (config.fsync() ? ", fsync" : "") + "]";
    }
}
