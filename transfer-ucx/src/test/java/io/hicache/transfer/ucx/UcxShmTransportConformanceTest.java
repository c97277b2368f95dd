package io.hicache.transfer.ucx;

import java.util.Map;

/** The transport kit over UCX restricted to its shared-memory transports ({@code ucx.tls=sm}). */
class UcxShmTransportConformanceTest extends UcxKit {
    @Override
    Map<String, String> options() {
        return UcxAvailable.SHM;
    }
}
