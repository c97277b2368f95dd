package io.hicache.storage.nixl.posix;

import io.hicache.storage.nixl.spi.FanInCompletion;
import io.hicache.storage.nixl.spi.FanInRequest;
import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import org.jspecify.annotations.Nullable;

/**
 * A prepared POSIX transfer: one task per file, run on the backend's I/O threads, fanned in by a
 * {@link FanInCompletion}. A post ends when every task has ended; cancelling, or a task failing, stops each task
 * before its next descriptor. Thread-safe as {@link FanInRequest} is.
 */
final class PosixRequest extends FanInRequest<PosixBackend.FileTask> {
    private final PosixBackend backend;
    private final XferOp op;

    PosixRequest(PosixBackend backend, XferOp op, List<PosixBackend.FileTask> tasks) {
        super(tasks);
        this.backend = backend;
        this.op = op;
    }

    @Override
    protected void start(FanInCompletion post, PosixBackend.FileTask task) {
        try {
            backend.io().execute(() -> run(post, task));
        } catch (RejectedExecutionException e) {
            post.fail(NixlStatus.ERR_BACKEND, "the POSIX backend is closed");
            post.partEnded();
        }
    }

    private void run(FanInCompletion post, PosixBackend.FileTask task) {
        try {
            if (post.isCancelled()) {
                post.stopped();
            } else if (op == XferOp.READ) {
                read(post, task);
            } else {
                write(post, task);
            }
        } catch (NixlException e) {
            post.fail(e.status(), e.getMessage());
        } catch (NoSuchFileException e) {
            post.fail(NixlStatus.ERR_NOT_FOUND, "no file " + e.getFile());
        } catch (IOException | RuntimeException e) {
            post.fail(NixlStatus.ERR_BACKEND, task.file().region().path() + ": " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            post.fail(NixlStatus.ERR_BACKEND, "interrupted");
        } finally {
            post.partEnded();
        }
    }

    private void read(FanInCompletion post, PosixBackend.FileTask task) throws IOException, InterruptedException {
        FileState file = task.file();
        try {
            FileChannel ch = file.readChannel();
            long size = ch.size();
            if (size != file.region().length()) {
                throw new NixlException(
                        NixlStatus.ERR_MISMATCH,
                        file.region().path() + " is " + size + " bytes, registered as "
                                + file.region().length());
            }
            eachPiece(
                    post,
                    task,
                    (memory, offset, bounce) -> backend.directIo().read(ch, file.direct(), memory, offset, bounce));
        } catch (IOException | RuntimeException e) {
            file.dropReadChannel(); // it may be what broke
            throw e;
        }
    }

    private void write(FanInCompletion post, PosixBackend.FileTask task) throws IOException, InterruptedException {
        FileState file = task.file();
        MemoryRegion.File region = file.region();
        boolean atomic = region.modes().contains(FileMode.ATOMIC);
        Path path = region.path();
        Path target = atomic
                ? path.resolveSibling("." + path.getFileName() + "."
                        + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp")
                : path;
        List<OpenOption> options = new ArrayList<>(List.of(StandardOpenOption.WRITE));
        options.add(atomic ? StandardOpenOption.CREATE_NEW : StandardOpenOption.CREATE);
        if (!atomic && !region.modes().contains(FileMode.CREATE)) {
            options.remove(StandardOpenOption.CREATE);
        }
        if (file.direct()) {
            options.add(DirectIo.DIRECT);
            options.add(StandardOpenOption.READ); // partial blocks are read before they are written
        }
        boolean landed = false;
        try (FileChannel ch = FileChannel.open(target, options.toArray(OpenOption[]::new))) {
            eachPiece(
                    post,
                    task,
                    (memory, offset, bounce) -> backend.directIo().write(ch, file.direct(), memory, offset, bounce));
            if (post.isCancelled()) {
                post.stopped(); // a descriptor may have been left out: this file must not land
                return;
            }
            if (atomic && ch.size() != region.length()) {
                ch.truncate(region.length()); // direct I/O rounds the last block up
            }
            if (backend.fsync()) {
                ch.force(true);
            }
            landed = true;
        } finally {
            if (atomic && !landed) {
                Files.deleteIfExists(target);
            }
        }
        if (atomic) {
            try {
                Files.move(target, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(target);
                throw e;
            }
        }
        file.dropReadChannel();
    }

    /**
     * Moves the task's descriptors in order with {@code move}, with a bounce buffer when direct I/O needs one (null
     * otherwise); stops before the next descriptor once the post is cancelled.
     */
    private void eachPiece(FanInCompletion post, PosixBackend.FileTask task, PieceMove move)
            throws IOException, InterruptedException {
        MemorySegment bounce = task.file().direct() ? backend.takeBounce() : null;
        try {
            for (Piece[] pair : task.pieces()) {
                if (post.isCancelled()) {
                    post.stopped();
                    return;
                }
                move.run(pair[0].dram(), pair[1].offset(), bounce);
            }
        } finally {
            if (bounce != null) {
                backend.giveBounce(bounce);
            }
        }
    }

    /** One descriptor's move between {@code memory} and the file at {@code offset}. */
    @FunctionalInterface
    private interface PieceMove {
        void run(MemorySegment memory, long offset, @Nullable MemorySegment bounce) throws IOException;
    }
}
