package io.hicache.transfer.pd;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Prefill/decode disaggregation's settings, with SGLang's names where SGLang has the option
 * ({@code disaggregation-mode}, {@code disaggregation-bootstrap-port}, {@code disaggregation-transfer-backend},
 * {@code disaggregation-decode-enable-offload-kvcache}; its timeouts, which SGLang reads from environment variables,
 * as settings of the same names), and the transfer engine's ({@code transfer-*}), read and checked once into a
 * {@link TransferConfig} and a {@link PdConfig}. Immutable.
 *
 * @param mode            which role this process plays, or none
 * @param bootstrapPort   the port a prefill instance's bootstrap server listens on
 * @param decodeOffload   a decode backs finished requests' pages up to the host and the page store
 * @param transfer        the transfer engine's configuration (its transports from the transfer backend)
 * @param pd              the protocol's timeouts
 */
public record PdSettings(Mode mode, int bootstrapPort, boolean decodeOffload, TransferConfig transfer, PdConfig pd) {
    /** SGLang's {@code --disaggregation-mode}. */
    public enum Mode {
        NULL,
        PREFILL,
        DECODE;

        String configName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** SGLang's {@code --disaggregation-transfer-backend}, for this engine's transports. */
    public enum Backend {
        /**
         * GPU to GPU over CUDA IPC where that transport can run here (its module on the class path, CUDA working), for
         * device pools on this host; shared memory to host memory on this host; TCP to the other hosts.
         */
        AUTO(List.of("shm", "tcp")),
        TCP(List.of("tcp")),
        SHM(List.of("shm")),
        /** CUDA IPC for device pools on this host, then shared memory and TCP: the engine fails to start without it. */
        CUDA_IPC(List.of(CUDA_IPC_TRANSPORT, "shm", "tcp")),
        /**
         * UCX (module hicache-transfer-ucx, Debian's libucx0): RDMA between hosts with a NIC, UCX's shared memory on one
         * host; TCP to peers without UCX. The engine fails to start where UCX cannot load.
         */
        UCX(List.of("ucx", "tcp"));

        private final List<String> transports;

        Backend(List<String> transports) {
            this.transports = transports;
        }

        /** The transports, in order of preference; {@code auto} asks whether {@code cuda-ipc} can run here. */
        List<String> transports() {
            if (this != AUTO || TransferEngine.unavailable(CUDA_IPC_TRANSPORT).isPresent()) {
                return transports;
            }
            return Stream.concat(Stream.of(CUDA_IPC_TRANSPORT), transports.stream())
                    .toList();
        }

        String configName() {
            return name().toLowerCase(Locale.ROOT).replace('_', '-');
        }
    }

    private static final String CUDA_IPC_TRANSPORT = "cuda-ipc";

    public static final Setting<Mode> MODE = Setting.choice(
            "disaggregation-mode",
            Mode.class,
            Mode::configName,
            Mode.NULL,
            "null (no disaggregation), prefill or decode");
    public static final Setting<Integer> BOOTSTRAP_PORT = Setting.integer(
            "disaggregation-bootstrap-port",
            8998,
            0,
            65535,
            "the port of a prefill instance's bootstrap server (0: a free one)");
    public static final Setting<Backend> BACKEND = Setting.choice(
            "disaggregation-transfer-backend",
            Backend.class,
            Backend::configName,
            Backend.AUTO,
            "auto (CUDA IPC between device pools where it can run, shared memory "
                    + "on one host, TCP across hosts), tcp, shm, cuda-ipc or ucx (RDMA through UCX)");
    public static final Setting<Boolean> DECODE_OFFLOAD = Setting.bool(
            "disaggregation-decode-enable-offload-kvcache",
            false,
            "a decode backs finished requests' pages up to the host tier and the page store");
    public static final Setting<Duration> BOOTSTRAP_TIMEOUT = Setting.duration(
            "disaggregation-bootstrap-timeout",
            "300s",
            "prefill: a request whose destination did not come from the decode in this long fails");
    public static final Setting<Duration> WAITING_TIMEOUT = Setting.duration(
            "disaggregation-waiting-timeout",
            "300s",
            "decode: a request not finished this long after its destination was sent fails");
    public static final Setting<Duration> HEARTBEAT_INTERVAL = Setting.duration(
            "disaggregation-heartbeat-interval", "5s", "decode: how often it checks each prefill instance's health");
    public static final Setting<Integer> HEARTBEAT_MAX_FAILURE = Setting.integer(
            "disaggregation-heartbeat-max-failure",
            2,
            1,
            1000,
            "decode: failed health checks in a row that declare a prefill instance dead");
    public static final Setting<Duration> CHUNK_DEADLINE =
            Setting.duration("disaggregation-chunk-deadline", "30s", "the deadline of each chunk's transfer");
    public static final Setting<Duration> ABORT_ACK_TIMEOUT = Setting.duration(
            "disaggregation-abort-ack-timeout",
            "45s",
            "decode: how long an abort waits for the prefill to confirm; past it the pages stay quarantined");
    public static final Setting<String> BIND_HOST =
            Setting.string("transfer-bind-host", "127.0.0.1", "the address the transfer engine's listeners bind to");
    public static final Setting<Integer> PORT =
            Setting.integer("transfer-port", 0, 0, 65535, "the transfer engine's control port (0: a free one)");
    public static final Setting<Integer> CONNECTIONS =
            Setting.integer("transfer-connections-per-peer", 4, 1, 64, "TCP connections to each peer");
    public static final Setting<Long> SLICE_BYTES = Setting.bytes(
            "transfer-slice-bytes",
            "256KiB",
            "the unit transports move: larger requests are cut into slices of this size");
    public static final Setting<Integer> IO_THREADS =
            Setting.integer("transfer-io-threads", 2, 1, 256, "I/O threads a transport may use");
    public static final Setting<Path> SHM_DIR =
            Setting.path("transfer-shm-dir", "/dev/shm", "where regions a peer on this host may map are created");
    public static final Setting<Duration> SLICE_TIMEOUT = Setting.duration(
            "transfer-slice-timeout", "10s", "a slice on the wire longer than this fails its connection");
    public static final Setting<Duration> CONNECT_TIMEOUT =
            Setting.duration("transfer-connect-timeout", "2s", "one connection attempt");
    public static final Setting<String> UCX_TLS = Setting.string(
            "transfer-ucx-tls",
            "all",
            "the ucx backend's UCX transports (UCX_TLS): all (UCX chooses), sm, tcp, rc,sm, ...");
    public static final Setting<String> UCX_NET_DEVICES = Setting.string(
            "transfer-ucx-net-devices",
            "all",
            "the ucx backend's network devices (UCX_NET_DEVICES): all, mlx5_0:1, eth0, ...");
    public static final Setting<Duration> HEARTBEAT = Setting.duration(
            "transfer-heartbeat", "1s", "pings on the control connection; three missed declare a peer dead");

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS = List.of(
            MODE,
            BOOTSTRAP_PORT,
            BACKEND,
            DECODE_OFFLOAD,
            BOOTSTRAP_TIMEOUT,
            WAITING_TIMEOUT,
            HEARTBEAT_INTERVAL,
            HEARTBEAT_MAX_FAILURE,
            CHUNK_DEADLINE,
            ABORT_ACK_TIMEOUT,
            BIND_HOST,
            PORT,
            CONNECTIONS,
            SLICE_BYTES,
            IO_THREADS,
            SHM_DIR,
            SLICE_TIMEOUT,
            CONNECT_TIMEOUT,
            HEARTBEAT,
            UCX_TLS,
            UCX_NET_DEVICES);

    /**
     * Reads the settings for an engine named {@code engineName}.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static PdSettings from(Settings settings, String engineName) {
        return settings.read(s -> {
            long slice = s.get(SLICE_BYTES);
            if (slice > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("transfer-slice-bytes is " + slice + ", over 64 MiB");
            }
            int sliceBytes = (int) slice;
            TransferConfig defaults = TransferConfig.defaults(engineName);
            TransferConfig transfer = new TransferConfig(
                    engineName,
                    s.get(BIND_HOST),
                    s.get(PORT),
                    s.get(CONNECTIONS),
                    sliceBytes,
                    Math.max(defaults.windowBytesPerConnection(), sliceBytes),
                    s.get(IO_THREADS),
                    s.get(SHM_DIR),
                    s.get(SLICE_TIMEOUT).toMillis(),
                    s.get(CONNECT_TIMEOUT).toMillis(),
                    s.get(HEARTBEAT).toMillis(),
                    defaults.sliceRetries(),
                    s.get(BACKEND).transports(),
                    Map.of("ucx.tls", s.get(UCX_TLS), "ucx.net-devices", s.get(UCX_NET_DEVICES)));
            PdConfig pd = new PdConfig(
                    s.get(BOOTSTRAP_TIMEOUT).toMillis(),
                    s.get(WAITING_TIMEOUT).toMillis(),
                    s.get(CHUNK_DEADLINE).toMillis(),
                    s.get(HEARTBEAT_INTERVAL).toMillis(),
                    s.get(HEARTBEAT_MAX_FAILURE),
                    s.get(ABORT_ACK_TIMEOUT).toMillis(),
                    PdConfig.defaults().lookupTimeoutMillis(),
                    PdConfig.DEFAULT_WORKER_SPIN_MICROS);
            return new PdSettings(s.get(MODE), s.get(BOOTSTRAP_PORT), s.get(DECODE_OFFLOAD), transfer, pd);
        });
    }
}
