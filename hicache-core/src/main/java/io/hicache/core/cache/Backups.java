package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.tree.TreeNode;
import io.hicache.core.util.Checks;
import java.lang.System.Logger.Level;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * Backups of a cache's device pages to its host tier (L1 to L2): starting one (host slots reserved and claimed, the
 * copy submitted, the node pending), committing its host pages when the copy finished (checksums, journal, index) on
 * the {@code hicache-host-commit} loop, off the thread that saw the copy finish (on CUDA that thread signals every
 * copy of its stream, loads included, and a 2 MiB page's checksum takes about a tenth of a millisecond), and applying
 * it to the tree (on the completion loop, or, for ranks that agree, at a settle), which queues its upload.
 *
 * <p>Thread-safe: {@link #start} and the applies run under the cache's lock; commits run on the loop. Owns the loop;
 * {@link #close} stops it.
 */
final class Backups {
    private static final System.Logger LOG = System.getLogger(Backups.class.getName());
    /** Threads of the {@code hicache-host-commit} loop. */
    private static final int HOST_COMMIT_THREADS =
            Math.max(1, Math.min(4, Runtime.getRuntime().availableProcessors() / 2));

    private final CacheCore cache;
    private final Loop<BackupOp> hostCommits;

    Backups(CacheCore cache) {
        this.cache = cache;
        this.hostCommits = new Loop<>(
                "host-commit",
                cache.config.queueCapacity(),
                this::commitBackup,
                cache.metrics,
                null,
                HOST_COMMIT_THREADS);
    }

    /** Starts backing {@code n} up to the host; null when there is no room or a page cannot be claimed. */
    @Nullable
    BackupOp start(TreeNode n) {
        int[] slots = cache.hostTier.reserve(n.pages());
        if (slots == null) {
            cache.metrics.backupsSkipped.increment();
            return null;
        }
        PageHashes hashes = n.hashes();
        int claimed = 0;
        while (claimed < slots.length) {
            StoreKey key = cache.namespace.key(hashes.get(claimed));
            if (!cache.host().beginWrite(slots[claimed], key)
                    && !(cache.leftovers.drop(key) && cache.host().beginWrite(slots[claimed], key))) {
                break;
            }
            claimed++;
        }
        // A key can be claimed here by a prefetch still writing it and not on another rank: all start it, or none.
        if (!cache.agreement.allAgree(RankAgreement.Site.BACKUP_CLAIM, claimed == slots.length)) {
            for (int j = 0; j < claimed; j++) {
                cache.host().abortWrite(slots[j]);
            }
            cache.host().release(slots);
            cache.metrics.backupsSkipped.increment();
            cache.metrics.fail("backup: host page already claimed");
            return null;
        }
        TreeNode.PendingCopy pending = cache.tree.beginBackup(n, slots);
        cache.outstanding.incrementAndGet();
        KvCopy copy = cache.device.backup(
                Checks.checkNotNull(n.devicePages(), "a backed-up node's device pages"),
                cache.host().slab(),
                slots);
        pending.attach(copy);
        cache.metrics.backupsStarted.increment();
        BackupOp op = new BackupOp(n, pending, slots, copy);
        RankAgreement.@Nullable Entry settling = cache.agreement.enabled()
                ? cache.agreement.add(RankAgreement.Lane.COPIES, 0, ok -> finishBackup(op, ok))
                : null;
        op.settling = settling;
        long start = System.nanoTime();
        copy.done().whenComplete((v, error) -> {
            if (error != null) {
                backupCommitted(op, false);
                return;
            }
            cache.export.backupSeconds.observe((System.nanoTime() - start) / 1e9);
            if (!hostCommits.put(op)) {
                commitBackup(op); // closing: here, then
            }
        });
        return op;
    }

    /**
     * Commits the host pages of a backup whose copy finished (checksums and the host index, not under the cache's
     * lock), then hands it to be applied: on the completion loop, or, for ranks that agree, at a settle.
     */
    private void commitBackup(BackupOp op) {
        boolean ok;
        try {
            op.commitOnce();
            ok = true;
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "committing a backup's host pages failed", e);
            ok = false;
        }
        backupCommitted(op, ok);
    }

    private void backupCommitted(BackupOp op, boolean ok) {
        if (op.settling != null) {
            op.settling.done(ok); // applied when every rank's is done: see RankAgreement
        } else {
            cache.complete(() -> finishBackup(op, ok));
        }
    }

    /** Applies a finished backup, once: commits the host pages, or gives the slots back when the copy failed. */
    void finishBackup(BackupOp op, boolean ok) {
        if (!op.finish(ok)) {
            return;
        }
        try {
            applyBackup(op, ok);
        } finally {
            cache.outstanding.decrementAndGet();
        }
    }

    private void applyBackup(BackupOp op, boolean ok) {
        if (ok) {
            op.commitOnce(); // done already, unless this runs first: then here
            op.committed.join();
            cache.tree.finishBackup(op.pending, op.node, true);
            cache.deviceTier.maybeKeepFree(); // its device pages may now be demoted ahead of need
            cache.metrics.backupsCompleted.increment();
            cache.metrics.bytesDeviceToHost.add((long) op.slots.length * cache.format.pageBytes());
            for (TreeNode n : op.pending.nodes()) {
                cache.events.stored(n, Medium.CPU);
                if (cache.stores.writesAccepted() && (cache.uploadsHere || cache.agreement.enabled())) {
                    // an MLA rank that does not upload still queues what the uploading rank protects, unwritten, so
                    // that the ranks' queues and host pins stay the same
                    cache.uploader.upload(n, cache.uploadsHere);
                } else if (cache.uploadsHere && cache.stores.attached()) { // a detach began: counted, as the docs say
                    cache.metrics.uploadSkippedPages.add(n.pages());
                }
            }
        } else {
            cache.metrics.fail("backup: copy failed");
            if (!op.committed.isDone() || op.committed.isCompletedExceptionally()) {
                // (else it worked here and failed on another rank: its pages are ready, and released below)
                for (int s : op.slots) {
                    cache.host().abortWrite(s);
                }
            }
            cache.host().release(cache.tree.finishBackup(op.pending, op.node, false));
        }
    }

    /** A backup in flight. */
    final class BackupOp {
        final TreeNode node;
        final TreeNode.PendingCopy pending;
        final int[] slots;
        final KvCopy copy;
        /** Done once the host pages are committed (checksum, journal, index): see {@link #commitOnce}. */
        final CompletableFuture<Void> committed = new CompletableFuture<>();

        private final AtomicBoolean commitClaimed = new AtomicBoolean();
        /** Its place in the queue of copies the ranks apply together; null for one rank. */
        RankAgreement.@Nullable Entry settling;

        private boolean finished;
        private boolean finishedOk;

        BackupOp(TreeNode node, TreeNode.PendingCopy pending, int[] slots, KvCopy copy) {
            this.node = node;
            this.pending = pending;
            this.slots = slots;
            this.copy = copy;
        }

        /**
         * Commits the host pages of a copy that finished well, once, by whichever thread comes first: the copy's
         * completion (so that the checksums and the Chronicle Map puts of the host index stay off the cache's lock)
         * or the one applying the backup. The other waits on {@link #committed}.
         */
        void commitOnce() {
            if (!commitClaimed.compareAndSet(false, true)) {
                return;
            }
            try {
                for (int s : slots) {
                    cache.host().commitWrite(s);
                }
                committed.complete(null);
            } catch (RuntimeException e) {
                committed.completeExceptionally(e);
                throw e;
            }
        }

        /** True for the first caller only. */
        boolean finish(boolean ok) {
            if (finished) {
                return false;
            }
            finished = true;
            finishedOk = ok;
            return true;
        }

        /** Waits for the copy (with the lock held: the copy does not need it) and applies it; true if it worked. */
        boolean awaitAndFinish(Deadline deadline) {
            if (settling != null) {
                // Every rank waits for its own copies up to this one, then all apply what all of them finished (a
                // settle applies a bounded number of copies: again while it applies some and this one waits).
                cache.agreement.awaitDone(RankAgreement.Lane.COPIES, settling, deadline);
                do {
                    cache.settle();
                } while (!finished && cache.agreement.copiesApplied() > 0);
                return finished && finishedOk;
            }
            try {
                copy.await(deadline);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (HiCacheException e) {
                // the copy failed: its outcome below says so
            }
            if (!copy.done().isDone()) {
                return false; // still running: the completion loop will apply it
            }
            // The copy's own outcome, not the wait's: its completion may be committing the pages right now.
            boolean ok = !copy.done().isCompletedExceptionally();
            finishBackup(this, ok);
            return ok;
        }
    }

    /** Whether its loop's thread has ended: for tests. */
    boolean ended() {
        return hostCommits.ended();
    }

    /** Stops the commit loop, letting queued commits run for up to {@code waitMillis}. */
    void close(long waitMillis) {
        hostCommits.close(waitMillis);
    }
}
