package io.hicache.storage.nixl.posix;

import io.hicache.storage.nixl.agent.FileMode;
import io.hicache.storage.nixl.agent.MemoryRegion;
import io.hicache.storage.nixl.agent.NixlBackend;
import io.hicache.storage.nixl.agent.NixlException;
import io.hicache.storage.nixl.agent.NixlStatus;
import io.hicache.storage.nixl.agent.Piece;
import io.hicache.storage.nixl.agent.XferOp;
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
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A prepared POSIX transfer: one task per file, run on the backend's I/O threads. A post ends when every task has
 * ended; cancelling stops each task before its next descriptor. Thread-safe as {@link NixlBackend.Request} requires.
 */
final class PosixRequest implements NixlBackend.Request {
    private final PosixBackend backend;
    private final XferOp op;
    private final List<PosixBackend.FileTask> tasks;
    private volatile Post current;

    PosixRequest(PosixBackend backend, XferOp op, List<PosixBackend.FileTask> tasks) {
        this.backend = backend;
        this.op = op;
        this.tasks = tasks;
    }

    @Override
    public void post(NixlBackend.Completion done) {
        Post post = new Post(done, tasks.size());
        current = post;
        for (PosixBackend.FileTask task : tasks) {
            try {
                backend.io().execute(() -> run(post, task));
            } catch (RejectedExecutionException e) {
                post.fail(NixlStatus.ERR_BACKEND, "the POSIX backend is closed");
                post.taskEnded();
            }
        }
    }

    @Override
    public void cancel() {
        Post post = current;
        if (post != null) {
            post.cancelled = true;
        }
    }

    @Override
    public void release() {
        current = null;
    }

    private void run(Post post, PosixBackend.FileTask task) {
        try {
            if (post.cancelled) {
                post.skipped = true;
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
            post.taskEnded();
        }
    }

    private void read(Post post, PosixBackend.FileTask task) throws IOException, InterruptedException {
        FileState file = task.file();
        try {
            FileChannel ch = file.readChannel();
            long size = ch.size();
            if (size != file.region().length()) {
                throw new NixlException(NixlStatus.ERR_MISMATCH, file.region().path() + " is " + size
                        + " bytes, registered as " + file.region().length());
            }
            withBounce(file.direct(), bounce -> {
                for (Piece[] pair : task.pieces()) {
                    if (post.cancelled) {
                        post.skipped = true;
                        return;
                    }
                    backend.directIo().read(ch, file.direct(), pair[0].dram(), pair[1].offset(), bounce);
                }
            });
        } catch (IOException | RuntimeException e) {
            file.dropReadChannel(); // it may be what broke
            throw e;
        }
    }

    private void write(Post post, PosixBackend.FileTask task) throws IOException, InterruptedException {
        FileState file = task.file();
        MemoryRegion.File region = file.region();
        boolean atomic = region.modes().contains(FileMode.ATOMIC);
        Path path = region.path();
        Path target = atomic ? path.resolveSibling("." + path.getFileName() + "."
                + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp") : path;
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
            withBounce(file.direct(), bounce -> {
                for (Piece[] pair : task.pieces()) {
                    if (post.cancelled) {
                        post.skipped = true;
                        return;
                    }
                    backend.directIo().write(ch, file.direct(), pair[0].dram(), pair[1].offset(), bounce);
                }
            });
            if (post.skipped) {
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

    /** Runs {@code body} with a bounce buffer when direct I/O needs one. */
    private void withBounce(boolean direct, BounceBody body) throws IOException, InterruptedException {
        if (!direct) {
            body.run(null);
            return;
        }
        MemorySegment bounce = backend.takeBounce();
        try {
            body.run(bounce);
        } finally {
            backend.giveBounce(bounce);
        }
    }

    @FunctionalInterface
    private interface BounceBody {
        void run(MemorySegment bounce) throws IOException;
    }

    /** One post's progress. */
    private static final class Post {
        private final NixlBackend.Completion done;
        private final AtomicInteger remaining;
        private volatile boolean cancelled;
        private volatile boolean skipped;
        private NixlStatus error;
        private String detail;

        Post(NixlBackend.Completion done, int tasks) {
            this.done = done;
            this.remaining = new AtomicInteger(tasks);
            if (tasks == 0) {
                done.complete(NixlStatus.SUCCESS, null);
            }
        }

        synchronized void fail(NixlStatus status, String why) {
            if (error == null) {
                error = status;
                detail = why;
            }
            cancelled = true; // the transfer has failed: the other files need not be touched
        }

        void taskEnded() {
            if (remaining.decrementAndGet() != 0) {
                return;
            }
            NixlStatus status;
            String why;
            synchronized (this) {
                status = error != null ? error : skipped ? NixlStatus.ERR_CANCELED : NixlStatus.SUCCESS;
                why = error != null ? detail : skipped ? "cancelled" : null;
            }
            done.complete(status, why);
        }
    }
}
