package io.hicache.transfer.shm;

import io.hicache.core.util.Threads;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The shared-memory transport, for two processes on one host: the peer's regions live in files under a tmpfs
 * folder; this side maps them and the thread that moves a slice copies it directly between its memory and the
 * mapping, so a handoff costs one memory copy. Reaches a peer on the same boot of the same host whose regions are
 * all shared and whose files this process can open.
 *
 * <p>Thread-safe. The engine closes it, which stops its copy threads.
 */
final class ShmTransport implements Transport {
    static final String NAME = "shm";

    private final TransportContext context;
    private final ExecutorService copiers;

    ShmTransport(TransportContext context) {
        this.context = context;
        int threads = context.ioThreads();
        this.copiers = new ThreadPoolExecutor(
                threads,
                threads,
                30,
                TimeUnit.SECONDS,
                new LinkedBlockingQueue<>(),
                Threads.factory("transfer-shm-" + context.engineName()));
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
        List<RegionDescriptor> host = remote.regions().stream()
                .filter(r -> r.kind() == MemoryKind.HOST)
                .toList();
        if (!local.hostId().equals(remote.hostId()) || host.isEmpty()) {
            return false;
        }
        // device regions are another transport's business
        for (RegionDescriptor r : host) {
            if (!r.shared() || !Files.isReadable(Path.of(r.shmPath()))) {
                return false;
            }
        }
        return true;
    }

    @Override
    public TransportLink link(PeerContext peer) {
        return new ShmLink(peer, copiers, context.sliceTimeoutMillis());
    }

    @Override
    public void close() {
        copiers.shutdownNow();
        try {
            copiers.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
