package io.hicache.storage.rocksdb;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.CompressionType;
import org.rocksdb.DBOptions;
import org.rocksdb.FlushOptions;
import org.rocksdb.InfoLogLevel;
import org.rocksdb.LRUCache;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksObject;
import org.rocksdb.WriteOptions;

/**
 * The RocksDB objects behind a {@link RocksDbPageStore}, opened with options chosen for KV pages, and closed in
 * reverse order of creation, each exactly once (they are native handles: a double close or a missed one is a crash
 * or a leak).
 *
 * <p>Two column families: {@code pages} maps a page id to the page's bytes, {@code meta} maps it to
 * {@link PageMeta} (insertion number, length, CRC-32C). The checksum lives apart from the bytes so that a read can
 * land the value straight in the caller's memory and still be verified.
 *
 * <p>Why these options:
 * <ul>
 *   <li><b>Blob files</b> for values of {@code rocksdb.blob-min-size} and up: pages are 16 KiB to 1 MiB, and in the
 *       LSM tree every compaction would rewrite them; in blob files a page is written once (plus garbage collection
 *       of files mostly deleted).
 *   <li><b>No compression</b>, in the tree and in blob files: KV tensors in bf16 or fp8 are close to random and barely
 *       compress, and compressing costs CPU on every put and get.
 *   <li><b>A modest block cache</b> holding index and filter blocks, with a Bloom filter: the tree holds only keys and
 *       blob references, and the page bytes are cached one tier up (the host pool), so caching them again is waste.
 *   <li><b>Write-ahead log kept</b>, synced per put when {@code rocksdb.fsync}: a killed process loses no page whose
 *       put returned.
 *   <li><b>Direct I/O</b> for reads, flushes and compactions when {@code rocksdb.direct-io}: no double caching.
 *   <li><b>Large batches written once</b>: a put of at least a quarter memtable skips the write-ahead log, goes into
 *       the memtables in chunks (full memtables flush in the background while later chunks are copied) and is flushed
 *       (blob file, key table, synced) before it returns, so its bytes reach the disk once instead of twice
 *       (log, then blob file); small puts keep the log. {@code atomic_flush} flushes pages and their records together,
 *       so a crash never leaves one without the other.
 * </ul>
 * Not thread-safe to open or close; the handles themselves are used concurrently by the store.
 */
final class RocksDbHandles implements AutoCloseable {
    static final byte[] PAGES = "pages".getBytes(StandardCharsets.US_ASCII);
    static final byte[] META = "meta".getBytes(StandardCharsets.US_ASCII);

    private final Deque<AutoCloseable> opened = new ArrayDeque<>();
    final RocksDB db;
    final ColumnFamilyHandle pages;
    final ColumnFamilyHandle meta;
    final WriteOptions writeOptions;
    /** For puts flushed before they return: no write-ahead log. */
    final WriteOptions unloggedWrites;

    final FlushOptions flushAndWait;
    /** The families a write-once put flushes, together. */
    final List<ColumnFamilyHandle> pageFamilies;

    final ReadOptions readOptions;

    RocksDbHandles(RocksDbStoreConfig config, Path dbDir) throws RocksDBException {
        RocksDB.loadLibrary();
        try {
            LRUCache cache = track(new LRUCache(config.blockCacheBytes()));
            BloomFilter bloom = track(new BloomFilter(10));
            BlockBasedTableConfig table = new BlockBasedTableConfig()
                    .setBlockCache(cache)
                    .setFilterPolicy(bloom)
                    .setCacheIndexAndFilterBlocks(true);
            ColumnFamilyOptions pageOptions = track(new ColumnFamilyOptions())
                    .setTableFormatConfig(table)
                    .setCompressionType(CompressionType.NO_COMPRESSION)
                    .setEnableBlobFiles(true)
                    .setMinBlobSize(config.blobMinBytes())
                    .setBlobFileSize(256L << 20)
                    .setBlobCompressionType(CompressionType.NO_COMPRESSION)
                    .setEnableBlobGarbageCollection(true)
                    .setBlobGarbageCollectionAgeCutoff(0.5)
                    .setWriteBufferSize(config.writeBufferBytes())
                    .setMaxWriteBufferNumber(4);
            ColumnFamilyOptions metaOptions = track(new ColumnFamilyOptions())
                    .setTableFormatConfig(new BlockBasedTableConfig()
                            .setBlockCache(cache)
                            .setFilterPolicy(bloom)
                            .setCacheIndexAndFilterBlocks(true))
                    .setCompressionType(CompressionType.NO_COMPRESSION)
                    .setWriteBufferSize(8L << 20);
            DBOptions dbOptions = track(new DBOptions())
                    .setCreateIfMissing(true)
                    .setCreateMissingColumnFamilies(true)
                    .setAtomicFlush(true)
                    .setMaxBackgroundJobs(4)
                    .setBytesPerSync(1L << 20)
                    .setUseDirectReads(config.directIo())
                    .setUseDirectIoForFlushAndCompaction(config.directIo())
                    .setInfoLogLevel(InfoLogLevel.WARN_LEVEL)
                    .setKeepLogFileNum(4);
            List<ColumnFamilyDescriptor> families = List.of(
                    new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY, metaOptions),
                    new ColumnFamilyDescriptor(PAGES, pageOptions),
                    new ColumnFamilyDescriptor(META, metaOptions));
            List<ColumnFamilyHandle> handles = new ArrayList<>();
            this.db = track(RocksDB.open(dbOptions, dbDir.toString(), families, handles));
            handles.forEach(this::track);
            this.pages = handles.get(1);
            this.meta = handles.get(2);
            this.writeOptions = track(new WriteOptions()).setSync(config.fsync());
            this.unloggedWrites = track(new WriteOptions()).setDisableWAL(true);
            this.flushAndWait = track(new FlushOptions()).setWaitForFlush(true).setAllowWriteStall(true);
            this.pageFamilies = List.of(pages, meta);
            this.readOptions = track(new ReadOptions()).setFillCache(false);
        } catch (RocksDBException | RuntimeException e) {
            close();
            throw e;
        }
    }

    private <T extends AutoCloseable> T track(T handle) {
        opened.push(handle);
        return handle;
    }

    /** Closes every handle, newest first; column families before the database, the database before its options. */
    @Override
    public void close() {
        while (!opened.isEmpty()) {
            AutoCloseable h = opened.pop();
            try {
                if (h instanceof RocksDB database) {
                    database.closeE();
                } else {
                    h.close();
                }
            } catch (Exception e) {
                System.getLogger(RocksDbHandles.class.getName())
                        .log(
                                System.Logger.Level.WARNING,
                                "closing " + h.getClass().getSimpleName() + " failed",
                                e);
            }
        }
    }

    /** Handles still open: for the test that checks close releases them all. */
    int openHandles() {
        int n = 0;
        for (AutoCloseable h : opened) {
            if (h instanceof RocksObject o && o.isOwningHandle()) {
                n++;
            }
        }
        return n;
    }
}
