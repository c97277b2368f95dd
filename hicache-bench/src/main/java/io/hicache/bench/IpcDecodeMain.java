package io.hicache.bench;

import io.hicache.core.memory.KvPool;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaOptions;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.pd.DecodeRank;
import io.hicache.transfer.pd.KvReceiver;
import io.hicache.transfer.pd.RankSpec;
import io.hicache.transfer.staged.StagingArea;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * The decode process of {@link RankIpcHandoffs}, in a child JVM: a CUDA KV pool of Llama-3.1-8B pages on the given
 * device, a small staging area, a transfer engine with {@code cuda-ipc} then {@code shm}, and a staged
 * {@link DecodeRank}, which registers the pool as device memory. Prints {@code ready <deviceKv>}, then answers commands
 * read from standard input, one per line:
 * {@code receive ROOM PAGES} (a receiver for the comma-separated pages; prints {@code receiving ROOM}),
 * {@code await ROOM} (waits up to 2 minutes for the room to end; prints {@code final ROOM STATE REASON}),
 * {@code sentinel PAGES} (overwrites those pages; prints {@code sentinel done}),
 * {@code check PAGES} (compares the i-th of those pages with the prefill's pattern of its page i; prints
 * {@code wrong <pages>}). Exits when its input closes. Arguments: shared-memory folder,
 * bootstrap URL, pool pages, device ordinal, staging slots, transports (comma-separated).
 */
public final class IpcDecodeMain {
    private IpcDecodeMain() {}

    public static void main(String[] args) throws Exception {
        Path shmDir = Path.of(args[0]);
        String bootstrapUrl = args[1];
        int pages = Integer.parseInt(args[2]);
        int ordinal = Integer.parseInt(args[3]);
        int stagingSlots = Integer.parseInt(args[4]);
        List<String> transports = List.of(args[5].split(","));
        PageFormat format = new PageFormat(PdHandoffGpu.LLAMA_3_1_8B, PdHandoffGpu.PAGE_TOKENS, HostLayout.PAGE_FIRST);
        try (CudaDeviceRuntime runtime =
                        new CudaDeviceRuntime(CudaOptions.defaults().withOrdinal(ordinal));
                KvPool pool = runtime.createPool(format, pages);
                TransferEngine engine =
                        TransferEngine.open(RankIpcHandoffs.engineConfig("pd-ipc-decode", shmDir, transports));
                StagingArea staging =
                        StagingArea.open(engine, RankSpec.STAGING_REGION, runtime, format, stagingSlots)) {
            RankSpec spec = new RankSpec(
                            format.geometry(), format.pageSizeTokens(), 1, 0, pages, 4, 64, engine.address())
                    .withStaging(stagingSlots);
            LocalRegion aux = engine.registerShared(RankSpec.AUX_REGION, spec.auxBytes());
            try (DecodeRank rank = DecodeRank.startStaged(engine, spec, pool, staging, aux, RankIpcHandoffs.CONFIG)) {
                System.out.println("ready " + rank.spec().deviceKv());
                System.out.flush();
                serve(rank, pool, bootstrapUrl);
            }
        }
    }

    private static void serve(DecodeRank rank, KvPool pool, String bootstrapUrl) throws Exception {
        Map<Long, KvReceiver> receivers = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "receive" -> {
                    long room = Long.parseLong(cmd[1]);
                    KvReceiver receiver = rank.receiver(room, bootstrapUrl);
                    receiver.init(pages(cmd[2]), 0, 0);
                    receivers.put(room, receiver);
                    System.out.println("receiving " + room);
                }
                case "await" -> {
                    long room = Long.parseLong(cmd[1]);
                    KvReceiver receiver = Checks.checkNotNull(
                            receivers.remove(room), "the receiver of room " + room + " (a receive comes first)");
                    long end = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
                    while (!receiver.poll().isFinal() && System.nanoTime() < end) {
                        Thread.sleep(1);
                    }
                    System.out.println("final " + room + " " + receiver.poll() + " " + receiver.failureReason());
                    receiver.close();
                }
                case "sentinel" -> {
                    PdHandoffGpu.fillSentinel(pool, pages(cmd[1]));
                    System.out.println("sentinel done");
                }
                case "check" -> {
                    int[] target = pages(cmd[1]);
                    System.out.println("wrong "
                            + PdHandoffGpu.mismatchedPages(
                                    pool, IntStream.range(0, target.length).toArray(), target));
                }
                default -> System.out.println("unknown " + line);
            }
            System.out.flush();
        }
    }

    private static int[] pages(String list) {
        return Arrays.stream(list.split(",")).mapToInt(Integer::parseInt).toArray();
    }

    /** The form of a page list in a command. */
    static String list(int[] pages) {
        return Arrays.stream(pages).mapToObj(Integer::toString).collect(Collectors.joining(","));
    }

    /** The child's command line as the parent starts it. */
    static List<String> args(
            Path shmDir, String bootstrapUrl, int pages, int ordinal, int stagingSlots, List<String> transports) {
        return List.of(
                shmDir.toString(),
                bootstrapUrl,
                Integer.toString(pages),
                Integer.toString(ordinal),
                Integer.toString(stagingSlots),
                String.join(",", transports));
    }
}
