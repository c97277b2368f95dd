package io.hicache.transfer.ucx;

import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.kit.TransportConformanceKit;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;

/** The transport kit over UCX restricted to its TCP transport on the loopback device ({@code ucx.tls=tcp}, {@code ucx.net-devices=lo}). */
class UcxTcpTransportConformanceTest extends TransportConformanceKit {
    @BeforeAll
    static void ucx() {
        UcxAvailable.assumeUcx();
    }

    @Override
    protected TransferConfig config(String name, Path shmDir) {
        return testTimeouts(UcxAvailable.with(
                TransferConfig.defaults(name).withShmDir(shmDir).withTransports(List.of(UcxTransport.NAME)),
                UcxAvailable.TCP));
    }

    @Override
    protected String transportName() {
        return UcxTransport.NAME;
    }
}
