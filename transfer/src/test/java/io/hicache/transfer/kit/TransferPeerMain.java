package io.hicache.transfer.kit;

import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.nio.file.Path;
import java.util.List;

/**
 * A transfer engine in a child JVM, for tests that kill a peer in the middle of a batch. Arguments: transports
 * (comma list), shared-memory folder, region bytes, pattern seed, and optionally transport options
 * ({@code key=value} pairs separated by {@code ;}, see {@link #options}). It registers one shared region {@code peer}
 * filled with {@link TransferPatterns#fill} of the seed, prints {@code ready <address>}, and serves until killed
 * (or until its standard input closes).
 */
public final class TransferPeerMain {
    private TransferPeerMain() {}

    /** {@code config} with the transport options of {@code encoded} ({@link #options}'s form) set. */
    public static TransferConfig withOptions(TransferConfig config, String encoded) {
        for (String kv : encoded.split(";")) {
            if (!kv.isEmpty()) {
                int eq = kv.indexOf('=');
                config = config.withTransportOption(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return config;
    }

    /** {@code config}'s transport options as this program's last argument reads them. */
    public static String options(TransferConfig config) {
        StringBuilder out = new StringBuilder();
        config.transportOptions()
                .forEach((k, v) -> out.append(out.isEmpty() ? "" : ";")
                        .append(k)
                        .append('=')
                        .append(v));
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        TransferConfig config = TransferConfig.defaults("child-peer")
                .withTransports(List.of(args[0].split(",")))
                .withShmDir(Path.of(args[1]));
        if (args.length > 4) {
            config = withOptions(config, args[4]);
        }
        try (TransferEngine engine = TransferEngine.open(config)) {
            LocalRegion region = engine.registerShared("peer", Long.parseLong(args[2]));
            TransferPatterns.fill(region.memory(), Long.parseLong(args[3]));
            System.out.println("ready " + engine.address());
            System.out.flush();
            while (System.in.read() >= 0) {
                // serve until the parent closes our input or kills us
            }
        }
    }
}
