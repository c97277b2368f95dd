package io.hicache.transfer.ucx;

import io.hicache.transfer.pd.PdEndToEndTest;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Prefill/decode end to end over UCX: a decode in this JVM, two prefill JVMs, hundreds of requests with aborts, one
 * prefill SIGKILLed halfway ({@link PdEndToEndTest#run}), once on UCX's shared-memory transports and once on its TCP.
 */
class UcxPdEndToEndTest {
    @BeforeAll
    static void ucx() {
        UcxAvailable.assumeUcx();
    }

    @Test
    void overUcxSharedMemory() throws Exception {
        PdEndToEndTest.run(UcxTransport.NAME, UcxAvailable.SHM);
    }

    @Test
    void overUcxTcp() throws Exception {
        PdEndToEndTest.run(UcxTransport.NAME, UcxAvailable.TCP);
    }
}
