package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.transfer.TransferEngine;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Issue 20, part 5: the transfer and PD settings, with SGLang's names, read once into their configurations. */
class PdSettingsTest {
    @Test
    void theDefaultsAreSglangsAndTheEnginesOwn() {
        PdSettings s = PdSettings.from(Settings.builder().build(), "node");
        assertEquals(PdSettings.Mode.NULL, s.mode());
        assertEquals(8998, s.bootstrapPort());
        assertFalse(s.decodeOffload());
        assertEquals(List.of("shm", "tcp"), s.transfer().transports(), "auto, without cuda-ipc on the class path");
        assertTrue(TransferEngine.unavailable("cuda-ipc").orElseThrow().contains("class path"));
        assertEquals("127.0.0.1", s.transfer().bindHost());
        assertEquals(PdConfig.defaults(), s.pd());
    }

    @Test
    void settingsReachTheConfigurations() {
        PdSettings s = PdSettings.from(
                Settings.builder()
                        .flag("disaggregation-mode", "decode")
                        .flag("disaggregation-bootstrap-port", "9100")
                        .flag("disaggregation-transfer-backend", "tcp")
                        .flag("disaggregation-decode-enable-offload-kvcache", "true")
                        .flag("disaggregation-waiting-timeout", "20s")
                        .flag("transfer-connections-per-peer", "2")
                        .flag("transfer-slice-bytes", "1MiB")
                        .build(),
                "decode-0");
        assertEquals(PdSettings.Mode.DECODE, s.mode());
        assertEquals(9100, s.bootstrapPort());
        assertTrue(s.decodeOffload());
        assertEquals(List.of("tcp"), s.transfer().transports());
        assertEquals(
                List.of("cuda-ipc", "shm", "tcp"),
                PdSettings.from(
                                Settings.builder()
                                        .flag("disaggregation-transfer-backend", "cuda-ipc")
                                        .build(),
                                "n")
                        .transfer()
                        .transports(),
                "asked for by name, cuda-ipc is listed whether or not it can run (the engine then says why not)");
        PdSettings ucx = PdSettings.from(
                Settings.builder()
                        .flag("disaggregation-transfer-backend", "ucx")
                        .flag("transfer-ucx-tls", "rc,sm")
                        .flag("transfer-ucx-net-devices", "mlx5_0:1")
                        .build(),
                "n");
        assertEquals(List.of("ucx", "tcp"), ucx.transfer().transports());
        assertEquals("rc,sm", ucx.transfer().transportOptions().get("ucx.tls"));
        assertEquals("mlx5_0:1", ucx.transfer().transportOptions().get("ucx.net-devices"));
        assertEquals(2, s.transfer().connectionsPerPeer());
        assertEquals(1 << 20, s.transfer().sliceBytes());
        assertEquals(20_000, s.pd().waitingTimeoutMillis());
        assertEquals("decode-0", s.transfer().name());
    }

    @Test
    void aBadValueIsRefusedByName() {
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> PdSettings.from(
                        Settings.builder().flag("disaggregation-mode", "both").build(), "node"));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(e.getMessage().contains("disaggregation-mode"), e.getMessage());
        HiCacheException slice = assertThrows(
                HiCacheException.class,
                () -> PdSettings.from(
                        Settings.builder().flag("transfer-slice-bytes", "1KiB").build(), "node"));
        assertTrue(slice.getMessage().contains("sliceBytes"), slice.getMessage());
    }
}
