package io.hicache.transfer.ucx;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The UCX transport's settings, read from the engine's transport options under {@code ucx.} and checked once here.
 * Immutable.
 *
 * @param tls              UCX's {@code UCX_TLS}: the UCX transports it may use ({@code all}: UCX chooses; {@code sm}:
 *                         shared memory only; {@code tcp}; {@code rc,sm}; {@code ^tcp} excludes one)
 * @param netDevices       UCX's {@code UCX_NET_DEVICES}: the network devices it may use ({@code all}, {@code lo},
 *                         {@code mlx5_0:1,mlx5_1:1})
 * @param workers          UCP workers, each progressed by its own thread; a link spreads a submission over all.
 *                         Default 1: one worker fills a NIC with large messages, and each more polls a core
 * @param unmapGraceMillis how long a region stays mapped after its fence closed (see {@link UcxTransport}); a peer
 *                         trusts a fence it read for a quarter of this, so a request that passed the fence just before
 *                         lands in still-mapped memory unless it is delayed by more than the rest (a time bound)
 * @param shmErrorHandling let UCX's shared-memory transports serve endpoints that ask for peer-failure handling
 *                         (UCX 1.13 offers them only under {@code UCX_POSIX_ERROR_HANDLING=y},
 *                         {@code UCX_SYSV_ERROR_HANDLING=y}); without it a same-host peer falls back to TCP
 * @param spinMicros       how long a worker's thread keeps polling after its last work before it sleeps; 0 sleeps at
 *                         once (least CPU, most latency)
 */
record UcxSettings(
        String tls, String netDevices, int workers, long unmapGraceMillis, boolean shmErrorHandling, long spinMicros) {
    static final String TLS = "tls";
    static final String NET_DEVICES = "net-devices";
    static final String WORKERS = "workers";
    static final String UNMAP_GRACE_MS = "unmap-grace-ms";
    static final String SHM_ERROR_HANDLING = "shm-error-handling";
    static final String SPIN_US = "spin-us";
    private static final Set<String> KEYS =
            Set.of(TLS, NET_DEVICES, WORKERS, UNMAP_GRACE_MS, SHM_ERROR_HANDLING, SPIN_US);
    private static final Pattern TLS_LIST = Pattern.compile("\\^?[a-z0-9_]+(,[a-z0-9_]+)*");
    private static final Pattern DEVICE_LIST = Pattern.compile("[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*");
    /** UCX transport names and aliases that never leave the host. */
    private static final Set<String> SAME_HOST =
            Set.of("sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self", "cuda_ipc", "rocm_ipc");

    UcxSettings {
        require(TLS_LIST.matcher(tls).matches(), TLS, tls, "a comma list of UCX transports, e.g. all, sm, tcp, rc,sm");
        require(DEVICE_LIST.matcher(netDevices).matches(), NET_DEVICES, netDevices, "e.g. all, lo, mlx5_0:1");
        require(workers >= 1 && workers <= 64, WORKERS, Integer.toString(workers), "1..64");
        require(
                unmapGraceMillis >= 0 && unmapGraceMillis <= 60_000,
                UNMAP_GRACE_MS,
                Long.toString(unmapGraceMillis),
                "0..60000");
        require(spinMicros >= 0 && spinMicros <= 1_000_000, SPIN_US, Long.toString(spinMicros), "0..1000000");
    }

    private static void require(boolean ok, String key, String value, String expected) {
        if (!ok) {
            throw new IllegalArgumentException(
                    "transfer: transport option ucx." + key + " is '" + value + "'; expected " + expected);
        }
    }

    /**
     * Reads {@code options} (the engine's {@code ucx.*} options without the prefix).
     *
     * @throws IllegalArgumentException naming the option that is unknown or bad
     */
    static UcxSettings from(Map<String, String> options) {
        for (String key : options.keySet()) {
            if (!KEYS.contains(key)) {
                throw new IllegalArgumentException("transfer: unknown transport option ucx." + key + "; known: "
                        + KEYS.stream().sorted().map(k -> "ucx." + k).toList());
            }
        }
        Map<String, String> o = new LinkedHashMap<>(options);
        return new UcxSettings(
                o.getOrDefault(TLS, "all").strip(),
                o.getOrDefault(NET_DEVICES, "all").strip(),
                integer(o, WORKERS, 1),
                integer(o, UNMAP_GRACE_MS, 50),
                bool(o, SHM_ERROR_HANDLING, true),
                integer(o, SPIN_US, 50));
    }

    private static int integer(Map<String, String> o, String key, int fallback) {
        String v = o.get(key);
        if (v == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(v.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    "transfer: transport option ucx." + key + " is '" + v + "'; expected a whole number");
        }
    }

    private static boolean bool(Map<String, String> o, String key, boolean fallback) {
        String v = o.get(key);
        if (v == null) {
            return fallback;
        }
        return switch (v.strip()) {
            case "true", "yes", "y", "1" -> true;
            case "false", "no", "n", "0" -> false;
            default ->
                throw new IllegalArgumentException(
                        "transfer: transport option ucx." + key + " is '" + v + "'; expected true or false");
        };
    }

    /** Whether every transport {@link #tls} allows stays on this host (so only same-host peers are reachable). */
    boolean sameHostOnly() {
        if (tls.startsWith("^")) {
            return false;
        }
        for (String t : tls.split(",")) {
            if (!SAME_HOST.contains(t)) {
                return false;
            }
        }
        return true;
    }
}
