package io.hicache.storage.file;

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
import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.util.Threads;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntConsumer;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * The {@code file} page store: one file per page under a root folder ({@link PagePaths}), each with a header that
 * names the page and carries its checksum ({@link PageFileHeader}), written to a temporary file and renamed into
 * place. A batch's pages are read and written in parallel on {@code file.io-threads} named threads
 * ({@code hicache-file-io-N}). The store keeps at most {@code file.capacity} bytes of files: a put that would pass
 * it waits for the eviction thread to remove least recently used pages down to {@code file.low-water}
 * ({@link CapacityGate}); a page being read is never evicted.
 *
 * <p>The store owns its root while open (a second store on the same folder is refused) and keeps its index in
 * memory, rebuilt from file names and sizes when it opens. Without {@code file.fsync} a put returns once the
 * page is in the page cache: it survives the process dying but not the machine; a page torn by a power loss reads
 * as CORRUPT, never as wrong bytes. With {@code file.direct-io} pages bypass the page cache.
 *
 * <p>Thread-safe. The opener closes it; closing waits for the I/O in flight, then releases the threads, the bounce
 * buffers and the root.
 */
public final class FilePageStore extends AbstractPageStore {
    private static final System.Logger LOG = System.getLogger(FilePageStore.class.getName());
    private static final int PREFERRED_BATCH = 128;

    private final FileStoreConfig config;
    private final StoreRoot root;
    private final PagePaths paths;
    private final PageFileIo io;
    private final FileIndex index = new FileIndex();
    private final CapacityGate<PageId> gate;
    private final ExecutorService ioThreads;
    private final Set<Path> madeDirs = ConcurrentHashMap.newKeySet();
    private final RootScan.Report openReport;

    private FilePageStore(FileStoreConfig config, StoreRoot root, int blockSize) throws IOException {
        super(
                "file",
                root.path().toString(),
                new StoreCapabilities(
                        Set.of(Capability.PERSISTENT, Capability.EVICTING),
                        PageFormat.MAX_PAGE_BYTES,
                        PREFERRED_BATCH));
        this.config = config;
        this.root = root;
        this.paths = new PagePaths(root.path());
        RootScan scan = new RootScan(paths);
        for (RootScan.Found f : scan.found()) {
            index.addFound(f.id(), f.bytes());
        }
        this.openReport = scan.report();
        long capacity = config.capacityBytes() > 0
                ? config.capacityBytes()
                : (long) (0.9 * (Files.getFileStore(root.path()).getUsableSpace() + openReport.bytes()));
        this.io = new PageFileIo(paths, config.directIo(), config.fsync(), blockSize, config.ioThreads());
        this.ioThreads = Executors.newFixedThreadPool(config.ioThreads(), Threads.factory("file-io"));
        this.gate = new CapacityGate<>(
                "file",
                Math.max(1, capacity),
                CapacityGate.Watermarks.evictPastCapacityDownTo(config.lowWater()),
                index.stored(),
                this::evict);
        gate.start();
        LOG.log(
                Level.INFO,
                () -> "file store at " + root.path() + ": " + openReport + "; capacity "
                        + Units.formatBytes(gate.capacityBytes()) + (config.directIo() ? ", direct I/O" : "")
                        + (config.fsync() ? ", fsync" : ""));
    }

    /**
     * Opens the store {@code config} describes.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the root cannot be used (not empty and not a
     *     file store, in use, unreadable, or without direct I/O support when that is asked for)
     */
    public static FilePageStore open(FileStoreConfig config) {
        StoreRoot root = new StoreRoot(config.root(), "file");
        try {
            int blockSize = (int) Files.getFileStore(root.path()).getBlockSize();
            if (config.directIo()) {
                DirectIoProbe.check(root.path(), blockSize);
            }
            return new FilePageStore(config, root, blockSize);
        } catch (IOException | RuntimeException e) {
            root.close();
            if (e instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE, "cannot open the file store at " + root.path() + ": " + e, e);
        }
    }

    /** What the store found under its root when it opened. */
    RootScan.Report openReport() {
        return openReport;
    }

    /** The file that holds (or would hold) {@code key}'s page: for tests and operators. */
    public Path fileOf(StoreKey key) {
        return paths.pageFile(PageId.of(key));
    }

    /** Bytes evicted since the store opened. */
    public long evictedBytes() {
        return gate.evictedBytes();
    }

    /* ---------------------------------------------------------------- lookups and reads */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        int hits = 0;
        while (hits < keys.size() && !deadline.isOver()) {
            if (!index.stored().contains(PageId.of(keys.get(hits)))) {
                break;
            }
            hits++;
        }
        return CompletableFuture.completedFuture(hits);
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        return inParallel(targets.size(), deadline, i -> read(targets.key(i), targets.page(i)), i -> {})
                .thenApply(r -> lastFirst(targets, r));
    }

    /**
     * Makes the pages of a batch (a chain's, first page first) used last page first, whatever order their reads and
     * writes finished in: a chain's first pages are then its most recent, so eviction takes its suffix first and never
     * leaves a hole in a cached prefix.
     */
    private BatchResult lastFirst(PageBatch batch, BatchResult result) {
        PageUsageIndex<PageId> stored = index.stored();
        for (int i = batch.size() - 1; i >= 0; i--) {
            if (result.status(i) == PageStatus.OK || result.status(i) == PageStatus.EXISTS) {
                stored.touch(PageId.of(batch.key(i)));
            }
        }
        return result;
    }

    private PageOutcome read(StoreKey key, MemorySegment target) throws IOException, InterruptedException {
        PageId id = PageId.of(key);
        PageUsageIndex<PageId> stored = index.stored();
        long entry = stored.pin(id); // fails while the page is being evicted
        if (entry == PageUsageIndex.NO_ENTRY) {
            return PageOutcome.MISS;
        }
        try {
            PageOutcome r = io.read(id, target);
            switch (r.status()) {
                case OK -> stored.touchEntry(entry);
                case MISS -> discard(id, entry); // the file went away behind our back
                case CORRUPT -> {
                    LOG.log(
                            Level.WARNING,
                            () -> "file store: page " + id + " is damaged (" + r.detail() + "); removed");
                    discard(id, entry);
                }
                default -> {
                    // SIZE_MISMATCH: the caller asked with the wrong size; the page is fine.
                }
            }
            return r;
        } finally {
            stored.unpin(entry);
        }
    }

    /* ---------------------------------------------------------------- writes */

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        long reserve = 0;
        for (int i = 0; i < sources.size(); i++) {
            long bytes = io.fileBytes(sources.page(i).byteSize());
            if (bytes > gate.capacityBytes()) {
                return CompletableFuture.completedFuture(tooBig(sources, i));
            }
            reserve += bytes;
        }
        try {
            if (!gate.reserve(reserve, deadline)) {
                return CompletableFuture.completedFuture(BatchResult.all(
                        sources.size(),
                        PageStatus.stoppedBy(deadline),
                        "no room: the store is over its capacity and eviction did not catch up before the deadline"));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return CompletableFuture.completedFuture(BatchResult.all(sources.size(), PageStatus.FAILED, "interrupted"));
        }
        // A page the deadline stops before it starts gives its reservation back.
        return inParallel(
                        sources.size(),
                        deadline,
                        i -> write(sources.key(i), sources.page(i), deadline),
                        i -> gate.release(io.fileBytes(sources.page(i).byteSize())))
                .thenApply(r -> lastFirst(sources, r));
    }

    private BatchResult tooBig(PageBatch sources, int index) {
        BatchResult.Builder b = BatchResult.builder(sources.size());
        for (int i = 0; i < sources.size(); i++) {
            b.set(
                    i,
                    PageStatus.REJECTED,
                    i == index
                            ? "page of " + sources.page(i).byteSize() + " bytes does not fit a store of "
                                    + gate.capacityBytes() + " bytes"
                            : "another page of the batch is too big");
        }
        return b.build();
    }

    /**
     * Writes one page; its file's bytes were reserved by the batch and are given back once the page is in the index
     * (which counts it from then on) or was not written.
     */
    private PageOutcome write(StoreKey key, MemorySegment page, Deadline deadline) {
        PageId id = PageId.of(key);
        long bytes = io.fileBytes(page.byteSize());
        CompletableFuture<Boolean> other = index.beginWrite(id);
        if (other != null) {
            gate.release(bytes);
            return waitForOtherWriter(other, deadline);
        }
        try {
            makeDirs(key, id);
            int crc = PageChecksum.of(page);
            try {
                io.write(id, page, crc);
            } catch (NoSuchFileException folderGone) {
                // A clear removed the folders after makeDirs found them made: make them again, once.
                madeDirs.remove(paths.shardDir(id));
                makeDirs(key, id);
                io.write(id, page, crc);
            }
            index.written(id, bytes);
            return PageOutcome.OK;
        } catch (IOException | RuntimeException | InterruptedException failure) {
            madeDirs.remove(paths.shardDir(id)); // whatever went wrong, the next put checks the folders again
            index.writeFailed(id);
            if (failure instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            return PageOutcome.of(PageStatus.FAILED, "cannot write " + paths.pageFile(id) + ": " + failure);
        } finally {
            gate.release(bytes);
        }
    }

    /** Another put is writing (or has written) the same page: its outcome is ours. */
    private static PageOutcome waitForOtherWriter(CompletableFuture<Boolean> written, Deadline deadline) {
        try {
            boolean stored = written.get(Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
            return stored
                    ? PageOutcome.EXISTS
                    : PageOutcome.of(PageStatus.FAILED, "a concurrent put of this page failed");
        } catch (TimeoutException t) {
            return PageOutcome.of(PageStatus.stoppedBy(deadline), "a concurrent put of this page was still writing");
        } catch (InterruptedException i) {
            Thread.currentThread().interrupt();
            return PageOutcome.of(PageStatus.FAILED, "interrupted");
        } catch (ExecutionException x) {
            return PageOutcome.of(PageStatus.FAILED, "a concurrent put of this page failed: " + x.getCause());
        }
    }

    private void makeDirs(StoreKey key, PageId id) throws IOException {
        Path shard = paths.shardDir(id);
        if (madeDirs.contains(shard)) {
            return;
        }
        Path nsDir = paths.namespaceDir(id.namespaceId());
        Path note = nsDir.resolve(PagePaths.NAMESPACE_NOTE);
        Files.createDirectories(shard);
        if (!Files.exists(note)) {
            describe(key.namespace(), note);
        }
        madeDirs.add(shard);
    }

    /** Says which model and ranks a namespace folder is for, since its name is a digest. */
    private static void describe(Namespace namespace, Path note) {
        try {
            Files.writeString(note, namespace + "\n", StandardCharsets.UTF_8);
        } catch (IOException e) {
            LOG.log(Level.DEBUG, () -> "cannot write " + note + ": " + e);
        }
    }

    /* ---------------------------------------------------------------- removal */

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        BatchResult.Builder result = BatchResult.builder(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            if (deadline.isOver()) {
                result.set(i, PageStatus.stoppedBy(deadline));
                continue;
            }
            PageId id = PageId.of(keys.get(i));
            try {
                result.set(i, discard(id, index.stored().entry(id)) ? PageStatus.OK : PageStatus.MISS);
            } catch (IOException failure) {
                result.set(i, PageStatus.FAILED, "cannot delete " + paths.pageFile(id) + ": " + failure);
            }
        }
        return CompletableFuture.completedFuture(result.build());
    }

    /**
     * Removes the stored page {@code entry} names: true for the one caller that took it out of the index (the index's
     * bytes drop then, so the gate counts the file as gone just before it is).
     */
    private boolean discard(PageId id, long entry) throws IOException {
        if (index.stored().removeEntry(entry) < 0) {
            return false;
        }
        Files.deleteIfExists(paths.pageFile(id));
        return true;
    }

    /** Eviction: the gate claimed the least recently used pages, skipping pages being read. */
    private void evict(List<PageUsageIndex.Claimed<PageId>> pages) throws IOException {
        for (PageUsageIndex.Claimed<PageId> page : pages) {
            if (discard(page.key(), page.entry())) {
                dropped(page.key().namespaceId(), page.key().hash());
            }
        }
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return clearWhere(id -> id.namespaceId().equals(namespace.id()), List.of(namespace.id()));
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        List<String> namespaces = new ArrayList<>();
        try (Stream<Path> dirs = Files.list(paths.root())) {
            dirs.map(p -> p.getFileName().toString())
                    .filter(PageId::isNamespaceId)
                    .forEach(namespaces::add);
        } catch (IOException e) {
            return CompletableFuture.failedFuture(
                    new HiCacheException(ErrorCode.STORE_IO, "cannot list " + paths.root(), e));
        }
        return clearWhere(id -> true, namespaces);
    }

    /** Removes the matching stored pages, then whatever else is in the namespaces' folders but pages being written. */
    private CompletableFuture<Void> clearWhere(Predicate<PageId> which, List<String> namespaces) {
        try {
            for (PageId id : index.stored().keys(which)) {
                discard(id, index.stored().entry(id));
            }
            for (String ns : namespaces) {
                removeFolder(ns);
            }
            return CompletableFuture.completedFuture(null);
        } catch (IOException e) {
            return CompletableFuture.failedFuture(new HiCacheException(ErrorCode.STORE_IO, "clear failed: " + e, e));
        }
    }

    private void removeFolder(String namespaceId) throws IOException {
        if (index.writing(namespaceId)) {
            return; // a put is landing in it: keep the folders, the pages are gone from the index already
        }
        Path dir = paths.namespaceDir(namespaceId);
        madeDirs.removeIf(p -> p.startsWith(dir));
        deleteTree(dir);
    }

    /**
     * Deletes {@code p} and what is under it, as far as it can: what another clear removed first is gone already, and
     * what a put made meanwhile (a folder no longer empty) stays.
     */
    private static void deleteTree(Path p) throws IOException {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
            List<Path> children = new ArrayList<>();
            try (DirectoryStream<Path> in = Files.newDirectoryStream(p)) {
                in.forEach(children::add);
            } catch (NoSuchFileException | NotDirectoryException raced) {
                return;
            }
            for (Path child : children) {
                deleteTree(child);
            }
        }
        try {
            Files.deleteIfExists(p);
        } catch (DirectoryNotEmptyException raced) {
            // a put made something here meanwhile: leave it
        }
    }

    /* ---------------------------------------------------------------- plumbing */

    /** One page's work. */
    @FunctionalInterface
    private interface PageTask {
        PageOutcome run(int index) throws Exception;
    }

    /**
     * Runs {@code task} for each page on the I/O threads; a page not started when the deadline passes is
     * TIMED_OUT or CANCELLED, and so is told to {@code skipped}. Completes when every page has finished, so no
     * memory of the batch is touched after.
     */
    private CompletableFuture<BatchResult> inParallel(int size, Deadline deadline, PageTask task, IntConsumer skipped) {
        PageOutcome[] outcomes = new PageOutcome[size];
        CompletableFuture<?>[] pages = new CompletableFuture<?>[size];
        for (int i = 0; i < size; i++) {
            int page = i;
            Runnable work = () -> outcomes[page] = runOne(task, page, deadline, skipped);
            try {
                pages[i] = CompletableFuture.runAsync(work, ioThreads);
            } catch (RejectedExecutionException closed) {
                skipped.accept(i);
                outcomes[i] = PageOutcome.of(PageStatus.FAILED, "the store is closing");
                pages[i] = CompletableFuture.completedFuture(null);
            }
        }
        return CompletableFuture.allOf(pages).handle((ignored, error) -> {
            BatchResult.Builder result = BatchResult.builder(size);
            for (int i = 0; i < size; i++) {
                result.set(
                        i,
                        outcomes[i] != null ? outcomes[i] : PageOutcome.of(PageStatus.FAILED, "the store is closing"));
            }
            return result.build();
        });
    }

    private PageOutcome runOne(PageTask task, int page, Deadline deadline, IntConsumer skipped) {
        if (deadline.isOver()) {
            skipped.accept(page);
            return PageOutcome.of(PageStatus.stoppedBy(deadline));
        }
        try {
            return task.run(page);
        } catch (Throwable t) {
            LOG.log(Level.WARNING, "file store: page I/O failed", t);
            if (t instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            return PageOutcome.of(PageStatus.FAILED, t.toString());
        }
    }

    @Override
    protected Optional<PageUsageIndex<?>> usageIndex() {
        return Optional.of(index.stored());
    }

    @Override
    protected long capacityBytes() {
        return gate.capacityBytes();
    }

    /** False: a corrupt page file is deleted while it is read. */
    @Override
    protected boolean removesCorruptPages() {
        return false;
    }

    @Override
    protected void doClose() {
        ioThreads.shutdown();
        try {
            if (!ioThreads.awaitTermination(2, TimeUnit.MINUTES)) {
                LOG.log(
                        Level.WARNING,
                        "file store at " + paths.root() + ": I/O still running after 2 minutes; closing anyway");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        gate.close();
        io.close();
        root.close();
    }

    @Override
    public String toString() {
        return "FilePageStore[" + paths.root() + ", "
                + Units.formatBytes(index.stored().bytes()) + " of "
                + Units.formatBytes(gate.capacityBytes()) + (config.directIo() ? ", direct I/O" : "")
                + (config.fsync() ? ", fsync" : "") + "]";
    }
}
