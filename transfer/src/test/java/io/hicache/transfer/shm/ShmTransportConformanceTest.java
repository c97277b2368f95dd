package io.hicache.transfer.shm;

import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.kit.TransportConformanceKit;
import java.nio.file.Path;

/** The transport kit over shared memory (the default preference picks it for a peer on this host). */
class ShmTransportConformanceTest extends TransportConformanceKit {
    @Override
    protected TransferConfig config(String name, Path shmDir) {
        return testTimeouts(TransferConfig.defaults(name).withShmDir(shmDir));
    }

    @Override
    protected String transportName() {
        return ShmTransport.NAME;
    }
}
