package io.hicache.storage.nixl.posix;

import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A POSIX backend: serves DRAM and FILE. A transfer's descriptors are grouped by file; each file's group runs on one
 * of the I/O threads ({@code hicache-nixl-posix-N}), in descriptor order (so direct I/O's read-modify-write of a
 * shared block cannot race), and different files in parallel. Thread-safe. The agent closes it: closing waits up to
 * ten seconds for I/O in flight, then frees the bounce buffers.
 */
final class PosixBackend implements NixlBackend {
    private static final System.Logger LOG = System.getLogger(PosixBackend.class.getName());
    /** Bounce buffer: one chunk of unaligned direct I/O, plus a block of slack for the alignment. */
    private static final long BOUNCE_BYTES = 1 << 20;

    private final ExecutorService io;
    private final DirectIo directIo;
    private final boolean fsync;
    private final Arena arena = Arena.ofShared();
    private final BlockingQueue<MemorySegment> bounces;

    PosixBackend(String agentName, int ioThreads, int blockBytes, boolean fsync) {
        this.io = Executors.newFixedThreadPool(ioThreads, Threads.factory("nixl-posix"));
        this.directIo = new DirectIo(blockBytes);
        this.fsync = fsync;
        this.bounces = new ArrayBlockingQueue<>(ioThreads);
        for (int i = 0; i < ioThreads; i++) {
            bounces.add(arena.allocate(BOUNCE_BYTES + blockBytes, blockBytes));
        }
        LOG.log(Level.DEBUG, () -> "agent " + agentName + ": POSIX backend with " + ioThreads + " I/O threads");
    }

    @Override
    public String name() {
        return PosixPlugin.NAME;
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return Set.of(MemoryType.DRAM, MemoryType.FILE);
    }

    @Override
    public @Nullable Object register(MemoryRegion region) {
        if (!(region instanceof MemoryRegion.File file)) {
            return null; // DRAM needs nothing: transfers use the segment itself
        }
        if (file.modes().contains(FileMode.DIRECT)) {
            DirectIo.checkAvailable();
        }
        Path parent = file.path().toAbsolutePath().getParent();
        if (file.modes().contains(FileMode.CREATE) && (parent == null || !Files.isDirectory(parent))) {
            throw new NixlException(
                    NixlStatus.ERR_NOT_FOUND,
                    "cannot create " + file.path() + ": folder " + parent + " does not exist");
        }
        if (file.modes().contains(FileMode.WRITE)
                && !file.modes().contains(FileMode.CREATE)
                && !Files.isRegularFile(file.path())) {
            throw new NixlException(
                    NixlStatus.ERR_NOT_FOUND, "no file " + file.path() + " to write (add CREATE to " + "create it)");
        }
        return new FileState(file);
    }

    @Override
    public void deregister(MemoryRegion region, @Nullable Object state) {
        if (state instanceof FileState f) {
            f.dropReadChannel();
        }
    }

    @Override
    public CompletableFuture<List<Boolean>> query(List<MemoryRegion> regions) {
        List<Boolean> exists = new ArrayList<>(regions.size());
        for (MemoryRegion r : regions) {
            exists.add(r instanceof MemoryRegion.File f && Files.isRegularFile(f.path()));
        }
        return CompletableFuture.completedFuture(exists);
    }

    @Override
    public Request prepare(XferOp op, List<Piece> local, List<Piece> remote) {
        Map<FileState, List<Piece[]>> byFile = new IdentityHashMap<>();
        List<FileState> order = new ArrayList<>();
        for (int i = 0; i < local.size(); i++) {
            Piece l = local.get(i);
            Piece r = remote.get(i);
            if (l.region().type() != MemoryType.DRAM) {
                throw new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED,
                        "POSIX moves host memory only (no GDS here); got "
                                + l.region().type());
            }
            if (!(r.state() instanceof FileState f)) {
                throw new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED,
                        "POSIX moves to and from files; got " + r.region().type());
            }
            boolean allowed = op == XferOp.READ
                    ? f.region().modes().contains(FileMode.READ)
                    : f.region().writable();
            if (!allowed) {
                throw new NixlException(
                        NixlStatus.ERR_NOT_ALLOWED,
                        f.region().path() + " was registered with modes "
                                + f.region().modes() + ", which do not allow " + op);
            }
            byFile.computeIfAbsent(f, k -> {
                        order.add(k);
                        return new ArrayList<>();
                    })
                    .add(new Piece[] {l, r});
        }
        List<FileTask> tasks = new ArrayList<>(order.size());
        for (FileState f : order) {
            tasks.add(new FileTask(f, Checks.checkNotNull(byFile.get(f), "a file's pieces")));
        }
        return new PosixRequest(this, op, tasks);
    }

    /* ------------------------------------------------------------- for PosixRequest */

    /** The work of one file in one transfer. */
    record FileTask(FileState file, List<Piece[]> pieces) {}

    ExecutorService io() {
        return io;
    }

    DirectIo directIo() {
        return directIo;
    }

    boolean fsync() {
        return fsync;
    }

    MemorySegment takeBounce() throws InterruptedException {
        return bounces.take();
    }

    void giveBounce(MemorySegment bounce) {
        bounces.add(bounce);
    }

    @Override
    public void close() {
        io.shutdown();
        try {
            if (io.awaitTermination(10, TimeUnit.SECONDS)) {
                arena.close();
            } else {
                LOG.log(
                        Level.WARNING,
                        "POSIX backend: I/O still running after 10 s; its bounce buffers are left to " + "the process");
                io.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            io.shutdownNow();
        }
    }
}
