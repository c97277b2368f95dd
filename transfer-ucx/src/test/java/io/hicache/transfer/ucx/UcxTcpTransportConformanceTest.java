package io.hicache.transfer.ucx;

import java.util.Map;

/**
 * The transport kit over UCX restricted to its TCP transport on the loopback device ({@code ucx.tls=tcp},
 * {@code ucx.net-devices=lo}), with two workers.
 */
class UcxTcpTransportConformanceTest extends UcxKit {
    @Override
    Map<String, String> options() {
        return UcxAvailable.TCP;
    }
}
