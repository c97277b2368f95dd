package io.hicache.storage.nixl;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.XferOp;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;

/**
 * Checks at open, through the agent, that a folder's file system takes direct I/O: a block written and read back with
 * {@code O_DIRECT}. So {@code nixl.direct-io=true} where it cannot work fails at start-up, with the reason. Stateless.
 */
final class DirectProbe {
    private static final int BLOCK = 4096;

    private DirectProbe() {}

    static void check(NixlAgent agent, Path dir) {
        Path probe = dir.resolve(".direct-io-probe");
        try (Arena arena = Arena.ofShared()) {
            MemorySegment block = arena.allocate(BLOCK, BLOCK);
            block.fill((byte) 0x5A);
            move(agent, XferOp.WRITE, block, probe, EnumSet.of(FileMode.CREATE, FileMode.WRITE, FileMode.DIRECT));
            block.fill((byte) 0);
            move(agent, XferOp.READ, block, probe, EnumSet.of(FileMode.READ, FileMode.DIRECT));
            if (block.get(ValueLayout.JAVA_BYTE, BLOCK - 1) != 0x5A) {
                throw new HiCacheException(
                        ErrorCode.STORE_UNAVAILABLE,
                        "a block written with direct I/O under " + dir
                                + " read back differently; turn nixl.direct-io off");
            }
        } finally {
            try {
                Files.deleteIfExists(probe);
            } catch (IOException e) {
                // a leftover probe is harmless
            }
        }
    }

    private static void move(NixlAgent agent, XferOp op, MemorySegment block, Path file, EnumSet<FileMode> modes) {
        Registration local = agent.register(new MemoryRegion.Dram(block));
        Registration remote = null;
        XferRequest req = null;
        try {
            remote = agent.register(new MemoryRegion.File(file, modes, BLOCK));
            req = agent.createXfer(
                    op,
                    List.of(local.region(0).whole()),
                    List.of(remote.region(0).whole()),
                    null);
            agent.post(req);
            NixlStatus status = agent.await(req, Deadline.after(Duration.ofSeconds(10)));
            if (status != NixlStatus.SUCCESS) {
                throw new HiCacheException(
                        ErrorCode.STORE_UNAVAILABLE,
                        "nixl.direct-io is on, but the file system of "
                                + file.getParent() + " does not take direct I/O (" + status + ": " + req.errorDetail()
                                + "); turn nixl.direct-io off or use a disk file system");
            }
        } catch (NixlException e) {
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "nixl.direct-io is on, but " + e.getMessage(), e);
        } finally {
            if (req != null) {
                agent.release(req);
            }
            if (remote != null) {
                agent.deregister(remote);
            }
            agent.deregister(local);
        }
    }
}
