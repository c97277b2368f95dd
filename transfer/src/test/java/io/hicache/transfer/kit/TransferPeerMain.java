package io.hicache.transfer.kit;

import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.nio.file.Path;
import java.util.List;

/**
 * A transfer engine in a child JVM, for tests that kill a peer in the middle of a batch. Arguments: transports
 * (comma list), shared-memory folder, region bytes, pattern seed. It registers one shared region {@code peer}
 * filled with {@link TransferPatterns#fill} of the seed, prints {@code ready <address>}, and serves until killed
 * (or until its standard input closes).
 */
public final class TransferPeerMain {
    private TransferPeerMain() {}

    public static void main(String[] args) throws Exception {
        TransferConfig config = TransferConfig.defaults("child-peer")
                .withTransports(List.of(args[0].split(",")))
                .withShmDir(Path.of(args[1]));
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
