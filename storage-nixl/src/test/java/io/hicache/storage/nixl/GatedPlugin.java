package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A test plugin between DRAM and FILE whose transfers finish only when the test opens the gate (or cancels them), so
 * that "in progress" is a state a test can hold. Moves no bytes.
 */
final class GatedPlugin implements NixlPlugin {
    final AtomicBoolean backendClosed = new AtomicBoolean();
    private volatile CountDownLatch gate = new CountDownLatch(1);

    /** Lets every waiting and future transfer finish. */
    void open() {
        gate.countDown();
    }

    /** Holds transfers again. */
    void close() {
        gate = new CountDownLatch(1);
    }

    @Override
    public String name() {
        return "GATED";
    }

    @Override
    public int priority() {
        return 99;
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return Set.of(MemoryType.DRAM, MemoryType.FILE);
    }

    @Override
    public Map<String, String> defaultParams() {
        return Map.of();
    }

    @Override
    public Optional<String> unavailableReason(Map<String, String> params) {
        return Optional.empty();
    }

    @Override
    public NixlBackend create(String agentName, Map<String, String> params) {
        return new NixlBackend() {
            @Override
            public String name() {
                return "GATED";
            }

            @Override
            public Set<MemoryType> memoryTypes() {
                return Set.of(MemoryType.DRAM, MemoryType.FILE);
            }

            @Override
            public Object register(MemoryRegion region) {
                return null;
            }

            @Override
            public void deregister(MemoryRegion region, Object state) {}

            @Override
            public CompletableFuture<List<Boolean>> query(List<MemoryRegion> regions) {
                return CompletableFuture.completedFuture(
                        regions.stream().map(r -> false).toList());
            }

            @Override
            public Request prepare(XferOp op, List<Piece> local, List<Piece> remote) {
                return new Request() {
                    private volatile CompletableFuture<Void> cancelled;

                    @Override
                    public void post(Completion done) {
                        CompletableFuture<Void> stop = new CompletableFuture<>();
                        cancelled = stop;
                        CountDownLatch g = gate;
                        Thread.ofVirtual().start(() -> {
                            try {
                                while (!g.await(5, TimeUnit.MILLISECONDS)) {
                                    if (stop.isDone()) {
                                        done.complete(NixlStatus.ERR_CANCELED, "cancelled");
                                        return;
                                    }
                                }
                                done.complete(NixlStatus.SUCCESS, null);
                            } catch (InterruptedException e) {
                                done.complete(NixlStatus.ERR_BACKEND, "interrupted");
                            }
                        });
                    }

                    @Override
                    public void cancel() {
                        CompletableFuture<Void> c = cancelled;
                        if (c != null) {
                            c.complete(null);
                        }
                    }

                    @Override
                    public void release() {}
                };
            }

            @Override
            public void close() {
                backendClosed.set(true);
                open();
            }
        };
    }
}
