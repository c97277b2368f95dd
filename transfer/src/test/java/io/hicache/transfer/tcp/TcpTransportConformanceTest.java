package io.hicache.transfer.tcp;

import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.kit.TransportConformanceKit;
import java.nio.file.Path;
import java.util.List;

/** The transport kit over TCP (shared memory switched off, so a same-host peer takes TCP). */
class TcpTransportConformanceTest extends TransportConformanceKit {
    @Override
    protected TransferConfig config(String name, Path shmDir) {
        return testTimeouts(
                TransferConfig.defaults(name).withShmDir(shmDir).withTransports(List.of(TcpTransport.NAME)));
    }

    @Override
    protected String transportName() {
        return TcpTransport.NAME;
    }
}
