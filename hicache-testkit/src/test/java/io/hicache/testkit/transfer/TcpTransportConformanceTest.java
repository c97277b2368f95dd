package io.hicache.testkit.transfer;

import io.hicache.transfer.TransferConfig;
import java.nio.file.Path;
import java.util.List;

/** The transport kit over TCP (shared memory switched off, so a same-host peer takes TCP). */
class TcpTransportConformanceTest extends TransportConformanceKit {
    @Override
    protected TransferConfig config(String name, Path shmDir) {
        return testTimeouts(TransferConfig.defaults(name).withShmDir(shmDir).withTransports(List.of("tcp")));
    }

    @Override
    protected String transportName() {
        return "tcp";
    }
}
