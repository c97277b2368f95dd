package io.hicache.transfer.ucx;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.util.Map;
import java.util.Optional;

/** What the UCX tests share: the skip where UCX cannot load, and the two settings they run under. */
final class UcxAvailable {
    /**
     * UCX's shared-memory transports only (UCX 1.13 carries the one-sided requests in software over sysv, since cma
     * offers no peer-failure handling and posix/sysv map only memory UCX allocated).
     */
    static final Map<String, String> SHM = Map.of("ucx.tls", "sm");
    /**
     * UCX's TCP transport only, on the loopback device, so nothing leaves 127.0.0.1; two workers, so a submission is
     * split over two endpoints to the peer's two workers.
     */
    static final Map<String, String> TCP = Map.of("ucx.tls", "tcp", "ucx.net-devices", "lo", "ucx.workers", "2");

    private UcxAvailable() {}

    /** Skips the calling test, with the reason, where UCX's library or JUCX is missing. */
    static void assumeUcx() {
        Optional<String> why = TransferEngine.unavailable(UcxTransport.NAME);
        assumeTrue(why.isEmpty(), () -> "UCX cannot run here: " + why.orElse(""));
    }

    static TransferConfig with(TransferConfig c, Map<String, String> options) {
        for (Map.Entry<String, String> o : options.entrySet()) {
            c = c.withTransportOption(o.getKey(), o.getValue());
        }
        return c;
    }
}
