package io.hicache.storage.nixl.posix;

import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.StandardOpenOption;
import org.jspecify.annotations.Nullable;

/**
 * The POSIX backend's state for one registered file: the region and, once a READ has needed it, an open read channel
 * kept until deregistration (what a registration that lives across transfers saves: an open and a close per read).
 * A WRITE that replaces the file drops the channel, so later reads see the new file. Thread-safe.
 */
final class FileState {
    private final MemoryRegion.File region;
    /** Opened on first use; null until then and once dropped. */
    private @Nullable FileChannel readChannel;

    FileState(MemoryRegion.File region) {
        this.region = region;
    }

    MemoryRegion.File region() {
        return region;
    }

    boolean direct() {
        return region.modes().contains(FileMode.DIRECT);
    }

    /**
     * The read channel, opened on first use.
     *
     * @throws NixlException {@link NixlStatus#ERR_NOT_FOUND} when the file does not exist
     */
    synchronized FileChannel readChannel() throws IOException {
        if (readChannel == null || !readChannel.isOpen()) {
            OpenOption[] options = direct()
                    ? new OpenOption[] {StandardOpenOption.READ, DirectIo.DIRECT}
                    : new OpenOption[] {StandardOpenOption.READ};
            try {
                readChannel = FileChannel.open(region.path(), options);
            } catch (NoSuchFileException e) {
                throw new NixlException(NixlStatus.ERR_NOT_FOUND, "no file " + region.path());
            }
        }
        return readChannel;
    }

    /** Closes the read channel, if open: the file was replaced, or a read failed. */
    synchronized void dropReadChannel() {
        if (readChannel != null) {
            try {
                readChannel.close();
            } catch (IOException e) {
                // a read-only channel has nothing to lose
            }
            readChannel = null;
        }
    }
}
