package io.hicache.transfer.ucx;

import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.kit.TransportConformanceKit;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;

/** The transport kit over UCX, with the UCX options a subclass names; skipped where UCX cannot run. */
abstract class UcxKit extends TransportConformanceKit {
    @BeforeAll
    static void ucx() {
        UcxAvailable.assumeUcx();
    }

    /** The {@code ucx.*} options both engines (and the kit's child peer) run with. */
    abstract Map<String, String> options();

    @Override
    protected TransferConfig config(String name, Path shmDir) {
        return testTimeouts(UcxAvailable.with(
                TransferConfig.defaults(name).withShmDir(shmDir).withTransports(List.of(UcxTransport.NAME)),
                options()));
    }

    @Override
    protected String transportName() {
        return UcxTransport.NAME;
    }
}
