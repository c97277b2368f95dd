package io.hicache.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.ErrorCode;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@link TransferEngine#registerShared} reserves its file's space when it creates the region, so a shared-memory folder
 * too small for it refuses the region at once, naming the folder and its room; a sparse file would have mapped fine and
 * killed the process with SIGBUS at the first write past what the tmpfs had left.
 */
class SharedRegionSpaceTest {
    @Test
    void aSharedRegionLargerThanTheFolderHasRoomForIsRefusedWithTheReason() throws IOException {
        Path shm = Path.of("/dev/shm");
        assumeTrue(
                Files.isDirectory(shm) && "tmpfs".equals(Files.getFileStore(shm).type()), "needs a tmpfs at /dev/shm");
        Path dir = Files.createTempDirectory(shm, "hicache-shared-space");
        try (TransferEngine engine =
                TransferEngine.open(TransferConfig.defaults("space").withShmDir(dir))) {
            FileStore store = Files.getFileStore(dir);
            // More than the whole tmpfs holds, so more than it has free: tmpfs refuses such a reservation before it
            // allocates a page, so the test takes no memory from the machine.
            long bytes = store.getTotalSpace() + (1L << 30);
            assertTrue(bytes > store.getUsableSpace());

            TransferException e = assertThrows(TransferException.class, () -> engine.registerShared("big", bytes));

            assertEquals(ErrorCode.TRANSFER_UNAVAILABLE, e.code());
            String message = e.getMessage();
            assertTrue(message.contains("cannot create shared region big of " + bytes + " bytes in " + dir), message);
            assertTrue(message.contains("bytes free") && message.contains("no space left"), message);
            assertTrue(engine.regions().isEmpty(), "nothing was registered");
            try (Stream<Path> left = Files.list(dir)) {
                assertEquals(0, left.count(), "the refused region's file was removed");
            }

            try (LocalRegion fits = engine.registerShared("fits", 1 << 20)) {
                fits.memory().set(ValueLayout.JAVA_BYTE, (1 << 20) - 1, (byte) 7); // reserved: the last page is there
                assertEquals(7, fits.memory().get(ValueLayout.JAVA_BYTE, (1 << 20) - 1));
            }
        } finally {
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }
}
