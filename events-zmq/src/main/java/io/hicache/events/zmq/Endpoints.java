package io.hicache.events.zmq;

/**
 * SGLang's rules for ZeroMQ addresses: which are bound and which connected, and how an attention data-parallel rank
 * shifts them (so that each rank's publisher has its own port). Stateless.
 */
final class Endpoints {
    private Endpoints() {}

    /**
     * True when the PUB socket binds {@code endpoint} ("bind stable, connect volatile"): a wildcard host ({@code *},
     * {@code ::}, {@code 0.0.0.0}), or an {@code ipc://} or {@code inproc://} address. Otherwise it connects, to a
     * subscriber (or proxy) that binds.
     */
    static boolean binds(String endpoint) {
        return endpoint.contains("*")
                || endpoint.contains("::")
                || endpoint.contains("0.0.0.0")
                || endpoint.startsWith("ipc://")
                || endpoint.startsWith("inproc://");
    }

    /**
     * {@code endpoint} for data-parallel rank {@code rank}: unchanged for rank 0; {@code inproc://x} becomes
     * {@code inproc://x_dp<rank>}; a TCP port is raised by {@code rank} (a wildcard port stays: the system picks it).
     *
     * @throws IllegalArgumentException for a rank above 0 and an address that is neither TCP nor inproc
     */
    static String forRank(String endpoint, int rank) {
        if (rank == 0) {
            return endpoint;
        }
        if (endpoint.contains("inproc")) {
            return endpoint + "_dp" + rank;
        }
        if (!endpoint.contains("tcp")) {
            throw new IllegalArgumentException("a data-parallel rank's endpoint must be tcp or inproc: " + endpoint);
        }
        int colon = endpoint.lastIndexOf(':');
        String port = endpoint.substring(colon + 1);
        if (port.equals("*")) {
            return endpoint;
        }
        try {
            return endpoint.substring(0, colon) + ":" + (Integer.parseInt(port) + rank);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("no port to shift by the data-parallel rank in " + endpoint, e);
        }
    }
}
