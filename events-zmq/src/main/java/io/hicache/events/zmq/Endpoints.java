package io.hicache.events.zmq;

import java.util.Optional;

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
     * {@code endpoint} with {@code host} in place of a wildcard host ({@code *}, {@code 0.0.0.0}, {@code [::]}) when
     * {@code host} is given: to bind one address rather than every interface. Other endpoints are returned as they are.
     */
    static String onHost(String endpoint, Optional<String> host) {
        if (host.isEmpty() || !endpoint.startsWith("tcp://")) {
            return endpoint;
        }
        int colon = endpoint.lastIndexOf(':');
        String given = endpoint.substring("tcp://".length(), colon);
        boolean wildcard = given.equals("*") || given.equals("0.0.0.0") || given.equals("[::]") || given.equals("::");
        String bound = host.get().contains(":") && !host.get().startsWith("[") ? "[" + host.get() + "]" : host.get();
        return wildcard ? "tcp://" + bound + endpoint.substring(colon) : endpoint;
    }

    /**
     * Refuses {@code ipc://}: JeroMQ, the pure-Java ZeroMQ this publisher runs on, makes no Unix socket for it (it
     * carries ipc over TCP on loopback), so a subscriber on libzmq (pyzmq, SGLang's router) would wait for nothing.
     *
     * @throws IllegalArgumentException for an {@code ipc://} endpoint, saying what to use instead
     */
    static void refuseIpc(String endpoint) {
        if (endpoint.startsWith("ipc://")) {
            throw new IllegalArgumentException(
                    endpoint + " cannot be reached by other ZeroMQ "
                            + "libraries (JeroMQ, which HiCache publishes with, makes no socket file for ipc://); use \"tcp://*:PORT\" with \"bind_host\": \"127.0.0.1\" to keep the events on this host");
        }
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
