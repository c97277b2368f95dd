package io.hicache.bench.server;

import io.hicache.bench.BenchRow;
import io.hicache.bench.Comparison;
import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The {@code server} suite's same-host rows, measured by this process as a client of the daemon on the same host
 * ({@link SameHostClient}): batches of 32 MiB of pages.
 * <ul>
 *   <li>{@code server_lease_get_64k}, {@code server_lease_get_1m}: LEASE of a batch (no checksums), a copy of each
 *   page out of the read-only mapped slab into the client's memory, RELEASE; against a single-threaded memcpy
 *   ({@link MemorySegment#copy}) of the same bytes (the same pages at the same offsets of the same mapping into the
 *   same target), in alternating rounds. Aim at least 0.7.</li>
 *   <li>{@code server_local_put_1m}: RESERVE, a copy of each page into the mapped slab and its CRC-32C, COMMIT;
 *   against the same client's PUT of the same pages over its socket (the TCP path). Both store fresh keys each
 *   batch, so the slab drops its oldest pages for both alike. Aim at least 2, as the Python client's same-host
 *   put.</li>
 * </ul>
 * Stateless.
 */
final class SameHostRows {
    private static final long BATCH_BYTES = 32L << 20;
    private static final Namespace NAMESPACE =
            Namespace.of("bench/server-same-host", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    /** Leased reads against memcpy of the same bytes: at least this ratio. */
    private static final double LEASE_AIM = 0.7;
    /** The same-host put against the TCP put of the same client: at least this ratio. */
    private static final double LOCAL_PUT_AIM = 2;

    private SameHostRows() {}

    static void run(int port, boolean quick, List<BenchRow> rows) throws Exception {
        Comparison comparison = Comparison.forRun(quick, 3, 8, 250);
        try (SameHostClient client = new SameHostClient(port);
                Arena arena = Arena.ofShared()) {
            for (int pageBytes : ServerSuite.PAGE_BYTES) {
                String size = pageBytes >= (1 << 20) ? (pageBytes >> 20) + "m" : (pageBytes >> 10) + "k";
                int n = (int) (BATCH_BYTES / pageBytes);
                MemorySegment[] pages = new MemorySegment[n];
                for (int i = 0; i < n; i++) {
                    pages[i] = arena.allocate(pageBytes, 4096);
                    pages[i].fill((byte) (i * 31 + 7));
                }
                MemorySegment target = arena.allocate(BATCH_BYTES, 4096);
                target.fill((byte) 0);
                byte[][] stored = freshHashes(n);
                client.putLocal(NAMESPACE, stored, pages);
                SameHostClient.Granted first = client.lease(NAMESPACE, stored, pageBytes);
                client.release(first.id());
                long[] offsets = first.offsets();
                Comparison.Workload leased = () -> {
                    SameHostClient.Granted lease = client.lease(NAMESPACE, stored, pageBytes);
                    long[] at = lease.offsets();
                    for (int i = 0; i < n; i++) {
                        MemorySegment.copy(client.slab, at[i], target, (long) i * pageBytes, pageBytes);
                    }
                    if (!client.release(lease.id())) {
                        throw new IllegalStateException("lease " + lease.id() + " ended before it was released");
                    }
                    return BATCH_BYTES;
                };
                Comparison.Workload memcpy = () -> {
                    for (int i = 0; i < n; i++) {
                        MemorySegment.copy(client.slab, offsets[i], target, (long) i * pageBytes, pageBytes);
                    }
                    return BATCH_BYTES;
                };
                rows.add(BenchRow.higherIsBetter(
                                "server_lease_get_" + size,
                                "GB/s",
                                "memcpy_same_bytes",
                                comparison.measure(leased, memcpy),
                                1e-9)
                        .withAim(LEASE_AIM));
                if (pageBytes == 1 << 20) {
                    Comparison.Workload local = () -> {
                        client.putLocal(NAMESPACE, freshHashes(n), pages);
                        return BATCH_BYTES;
                    };
                    Comparison.Workload tcp = () -> {
                        client.putTcp(NAMESPACE, freshHashes(n), pages);
                        return BATCH_BYTES;
                    };
                    rows.add(BenchRow.higherIsBetter(
                                    "server_local_put_" + size,
                                    "GB/s",
                                    "same_client_tcp_put",
                                    comparison.measure(local, tcp),
                                    1e-9)
                            .withAim(LOCAL_PUT_AIM));
                }
            }
        }
    }

    private static byte[][] freshHashes(int n) {
        byte[][] hashes = new byte[n][32];
        for (byte[] h : hashes) {
            ThreadLocalRandom.current().nextBytes(h);
        }
        return hashes;
    }
}
