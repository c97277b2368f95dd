package io.hicache.cli;

import io.hicache.core.Deadline;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.pd.BootstrapServer;
import io.hicache.transfer.pd.CachedDecode;
import io.hicache.transfer.pd.CachedPrefill;
import io.hicache.transfer.pd.DecodeRank;
import io.hicache.transfer.pd.KvPoll;
import io.hicache.transfer.pd.PdSettings;
import io.hicache.transfer.pd.PrefillRank;
import io.hicache.transfer.pd.RankSpec;
import io.hicache.transfer.pd.SyntheticChat;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code hicache pd bootstrap|prefill|decode}: each role of prefill/decode disaggregation in its own process, on the
 * cache's tiers (an emulated device), with a synthetic engine ({@link SyntheticChat}: page contents follow from the
 * token ids), so that a user can watch handoffs work on one machine: the prefill computes what its cache lacks, the
 * decode receives what its cache lacks and checks every byte. Runs once.
 */
@Command(
        name = "pd",
        header = "run one role of prefill/decode disaggregation, with a synthetic engine",
        mixinStandardHelpOptions = true,
        synopsisSubcommandLabel = "COMMAND",
        subcommands = {PdCommand.Bootstrap.class, PdCommand.Prefill.class, PdCommand.Decode.class},
        description = "Each role in its own terminal: 'bootstrap' (the prefill instance's bootstrap server), 'prefill' "
                + "(serves every request a decode names), 'decode' (runs conversations and checks what arrives).",
        footer = {
            "%nExamples:",
            "  hicache pd bootstrap",
            "  hicache pd prefill --bootstrap http://127.0.0.1:8998",
            "  hicache pd decode --bootstrap http://127.0.0.1:8998 --conversations 4 --turns 3"
        })
public final class PdCommand implements Subcommand {
    /** The synthetic model: 8 layers, 2 KV heads of 64, bf16; pages of 16 tokens (64 KiB). */
    static final KvGeometry MODEL = KvGeometry.mha(8, 2, 64, KvDtype.BFLOAT16);

    static final int PAGE = 16;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        spec.commandLine().usage(spec.commandLine().getErr());
        return USAGE;
    }

    /** {@code hicache pd bootstrap}. */
    @Command(
            name = "bootstrap",
            header = "run a prefill instance's bootstrap server",
            mixinStandardHelpOptions = true,
            footer = {"%nExamples:", "  hicache pd bootstrap", "  hicache pd bootstrap --port 9000"})
    public static final class Bootstrap implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Option(
                names = "--port",
                defaultValue = "8998",
                description = "the port (default ${DEFAULT-VALUE}, " + "SGLang's disaggregation-bootstrap-port)")
        int port;

        @Option(names = "--host", defaultValue = "127.0.0.1", description = "the address (default ${DEFAULT-VALUE})")
        String host;

        @Option(
                names = "--for",
                paramLabel = "DURATION",
                converter = TopCommand.DurationConverter.class,
                description = "stop after this long (default: when stopped)")
        @Nullable
        Duration runFor;

        @Override
        public Integer call() throws Exception {
            try (BootstrapServer server = BootstrapServer.start(host, port, 1)) {
                PrintWriter out = spec.commandLine().getOut();
                out.println("bootstrap server at " + server.url() + " (1 prefill rank)");
                out.flush();
                Thread.sleep(runFor == null ? Long.MAX_VALUE : runFor.toMillis());
            }
            return OK;
        }
    }

    /** What a prefill and a decode share: the cache, its pool registered with the transfer engine, the rank's spec. */
    static final class Node implements AutoCloseable {
        final Path hostDir;
        final EmulatedDeviceRuntime runtime;
        final HiCache cache;
        final TransferEngine engine;
        final RankSpec spec;
        final LocalRegion kv;
        final LocalRegion aux;
        final PdSettings settings;
        private final Arena arena = Arena.ofShared();
        /**
         * On Ctrl-C or SIGTERM the JVM runs its hooks and exits without unwinding the command's thread, so no
         * try-with-resources would close this node and its 128 MiB host folder would stay in /dev/shm: this hook
         * interrupts the command's thread, gives it {@link #STOP_GRACE} to close the node, then removes the folder
         * itself if it is still there.
         */
        private final Thread onSignal;

        private final CountDownLatch closed = new CountDownLatch(1);
        private static final Duration STOP_GRACE = Duration.ofSeconds(10);

        Node(String role, int devicePages, Map<String, String> flags) throws IOException {
            Path shm = Path.of("/dev/shm");
            hostDir = Files.createTempDirectory(
                    Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")), "hicache-pd-" + role);
            EmulatedDeviceRuntime openedRuntime = null;
            HiCache openedCache = null;
            TransferEngine openedEngine = null;
            try {
                Settings.Builder b = Settings.builder()
                        .flag("page-size", Integer.toString(PAGE))
                        .flag("host.dir", hostDir.toString());
                flags.forEach(b::flag);
                Settings all = b.build();
                settings = PdSettings.from(
                        all, role + "-" + ProcessHandle.current().pid());
                long pageBytes = new PageFormat(MODEL, PAGE, HostLayout.LAYER_FIRST).pageBytes();
                openedRuntime = new EmulatedDeviceRuntime(devicePages * pageBytes + (64L << 20), 2);
                openedCache = HiCache.builder()
                        .config(HiCacheConfig.from(all))
                        .namespace(Namespace.of("pd-synthetic", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                        .geometry(MODEL)
                        .devicePages(devicePages)
                        .runtime(openedRuntime)
                        .open();
                openedEngine = TransferEngine.open(settings.transfer());
                spec = new RankSpec(MODEL, PAGE, 1, 0, devicePages, 64, 64, openedEngine.address());
                kv = openedEngine.register(
                        RankSpec.KV_REGION,
                        openedCache.device().hostVisibleMemory().orElseThrow());
                aux = openedEngine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
            } catch (RuntimeException e) {
                if (openedEngine != null) {
                    openedEngine.close();
                }
                if (openedCache != null) {
                    openedCache.close();
                }
                if (openedRuntime != null) {
                    openedRuntime.close();
                }
                arena.close();
                deleteTree(hostDir);
                throw e;
            }
            runtime = openedRuntime;
            cache = openedCache;
            engine = openedEngine;
            Thread owner = Thread.currentThread();
            onSignal = Threads.unstarted("pd-" + role + "-stop", () -> {
                owner.interrupt();
                try {
                    if (!closed.await(STOP_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
                        deleteTree(hostDir);
                    }
                } catch (InterruptedException | IOException e) {
                    // the JVM is exiting: nothing more to do
                }
            });
            Runtime.getRuntime().addShutdownHook(onSignal);
        }

        @Override
        public void close() throws IOException {
            try {
                engine.close();
                cache.close();
                runtime.close();
                arena.close();
                deleteTree(hostDir);
            } finally {
                closed.countDown();
                try {
                    Runtime.getRuntime().removeShutdownHook(onSignal);
                } catch (IllegalStateException e) {
                    // closing from within a shutdown: the hook is running, and now finds the node closed
                }
            }
        }

        private static void deleteTree(Path dir) throws IOException {
            if (!Files.exists(dir)) {
                return;
            }
            try (Stream<Path> all = Files.walk(dir)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    /** The options both ranks take. A picocli mixin; filled once. */
    static final class NodeOptions {
        @Option(
                names = "--bootstrap",
                paramLabel = "URL",
                defaultValue = "http://127.0.0.1:8998",
                description = "the prefill instance's bootstrap server (default ${DEFAULT-VALUE})")
        String bootstrapUrl;

        @Option(
                names = "--device-pages",
                defaultValue = "1024",
                description = "pages of 16 tokens in the device pool (default ${DEFAULT-VALUE})")
        int devicePages;

        @Option(
                names = "--set",
                paramLabel = "KEY=VALUE",
                description = "a cache, transfer or disaggregation "
                        + "setting (hicache-ratio=2, disaggregation-transfer-backend=tcp, ...); repeatable")
        Map<String, String> settings = new LinkedHashMap<>();
    }

    /** {@code hicache pd prefill}. */
    @Command(
            name = "prefill",
            header = "serve every request a decode names, on the cache",
            mixinStandardHelpOptions = true,
            description = "Registers with the bootstrap server, then prefills each room a decode names: the prompt "
                    + "follows from the room (the synthetic chat), the cache serves what it holds, the rest is computed "
                    + "and every page sent.",
            footer = {
                "%nExamples:",
                "  hicache pd prefill",
                "  hicache pd prefill --bootstrap http://10.0.0.5:8998 "
                        + "--set disaggregation-transfer-backend=tcp --set transfer-bind-host=10.0.0.6"
            })
    public static final class Prefill implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @picocli.CommandLine.Mixin
        NodeOptions options;

        @Option(names = "--requests", description = "stop after this many requests (default: when stopped)")
        @Nullable
        Integer requests;

        @Override
        public Integer call() throws Exception {
            PrintWriter out = spec.commandLine().getOut();
            try (Node node = new Node("prefill", options.devicePages, options.settings);
                    PrefillRank rank = PrefillRank.start(
                            node.engine, node.spec, node.kv, node.aux, options.bootstrapUrl, node.settings.pd())) {
                CachedPrefill prefill = CachedPrefill.over(node.cache, rank);
                out.println("prefill registered with " + options.bootstrapUrl + "; serving");
                out.flush();
                ExecutorService workers = Executors.newFixedThreadPool(4);
                Set<Long> taken = new HashSet<>();
                AtomicInteger done = new AtomicInteger();
                AtomicInteger failed = new AtomicInteger();
                try {
                    while (requests == null || taken.size() < requests) {
                        for (long room : rank.unclaimedRooms()) {
                            if ((requests == null || taken.size() < requests) && taken.add(room)) {
                                workers.submit(() -> serve(prefill, node, room, out, done, failed));
                            }
                        }
                        Thread.sleep(2);
                    }
                } catch (InterruptedException e) {
                    out.println("prefill: stopping (signal)");
                    out.flush();
                } finally {
                    workers.shutdown();
                    workers.awaitTermination(2, TimeUnit.MINUTES);
                }
                out.println("prefill: " + done.get() + " requests, " + failed.get() + " failed");
                out.flush();
                return failed.get() == 0 ? OK : FAILED;
            }
        }

        private static void serve(
                CachedPrefill prefill,
                Node node,
                long room,
                PrintWriter out,
                AtomicInteger done,
                AtomicInteger failed) {
            try {
                int[] prompt = SyntheticChat.prompt(room);
                CachedPrefill.Outcome o = prefill.prefill(
                        room,
                        "room-" + room,
                        prompt,
                        (tokens, from, pages) -> SyntheticChat.compute(node.cache, tokens, from, pages),
                        ("room " + room).getBytes(),
                        Deadline.after(Duration.ofSeconds(60)));
                (o.state() == KvPoll.SUCCESS ? done : failed).incrementAndGet();
                synchronized (out) {
                    out.printf(
                            "room %d (conversation %d, turn %d): %d prompt tokens, %d from the cache, %d computed: %s%s%n",
                            room,
                            room / SyntheticChat.TURNS,
                            room % SyntheticChat.TURNS,
                            prompt.length,
                            o.cachedTokens(),
                            o.computedTokens(),
                            o.state(),
                            o.failure() == null ? "" : " (" + o.failure() + ")");
                    out.flush();
                }
            } catch (Exception e) {
                failed.incrementAndGet();
                synchronized (out) {
                    out.println("room " + room + " failed: " + e);
                    out.flush();
                }
            }
        }
    }

    /** {@code hicache pd decode}. */
    @Command(
            name = "decode",
            header = "run conversations through a prefill and check every byte that arrives",
            mixinStandardHelpOptions = true,
            description =
                    "Runs --conversations conversations of --turns turns: each turn's prompt is received (what "
                            + "this decode's cache holds from earlier turns is not sent again), checked byte by byte, and an "
                            + "answer is decoded into the cache for the next turn. Exits 1 if a handoff failed or a byte differed.",
            footer = {"%nExamples:", "  hicache pd decode --conversations 4 --turns 3"})
    public static final class Decode implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @picocli.CommandLine.Mixin
        NodeOptions options;

        @Option(names = "--conversations", defaultValue = "4", description = "conversations (default ${DEFAULT-VALUE})")
        int conversations;

        @Option(names = "--turns", defaultValue = "3", description = "turns of each (default ${DEFAULT-VALUE})")
        int turns;

        @Override
        public Integer call() throws Exception {
            PrintWriter out = spec.commandLine().getOut();
            int failed = 0;
            try (Node node = new Node("decode", options.devicePages, options.settings);
                    DecodeRank rank = DecodeRank.start(node.engine, node.spec, node.kv, node.aux, node.settings.pd());
                    CachedDecode decode = CachedDecode.over(node.cache, rank, node.settings)) {
                if (!DecodeRank.awaitPrefill(options.bootstrapUrl, Duration.ofSeconds(60))) {
                    out.println("decode: no prefill instance registered at " + options.bootstrapUrl + " within 60 s");
                    out.flush();
                    return FAILED;
                }
                for (int turn = 0; turn < turns; turn++) {
                    for (int c = 0; c < conversations; c++) {
                        long room = SyntheticChat.room(c, turn);
                        int[] prompt = SyntheticChat.prompt(room);
                        CachedDecode.Received got = decode.receive(
                                room,
                                "room-" + room,
                                prompt,
                                options.bootstrapUrl,
                                (int) (room % node.spec.auxSlots()),
                                Deadline.after(Duration.ofSeconds(60)));
                        if (got.state() != KvPoll.SUCCESS) {
                            failed++;
                            out.printf("conversation %d, turn %d: FAILED (%s)%n", c, turn, got.failure());
                            out.flush();
                            continue;
                        }
                        int wrong = SyntheticChat.wrongPages(
                                node.cache, prompt, Checks.checkNotNull(got.pages(), "a successful handoff's pages"));
                        failed += wrong == 0 ? 0 : 1;
                        SyntheticChat.decode(decode, node.cache, got, prompt, SyntheticChat.answer(c, turn));
                        out.printf(
                                "conversation %d, turn %d: %d prompt tokens, %d held by this decode, %d received; "
                                        + "%s%n",
                                c,
                                turn,
                                prompt.length,
                                got.cachedTokens(),
                                got.receivedTokens(),
                                wrong == 0 ? "every byte checked" : wrong + " pages WRONG");
                        out.flush();
                    }
                }
            }
            out.println("decode: " + conversations * turns + " handoffs, " + failed + " failed");
            out.flush();
            return failed == 0 ? OK : FAILED;
        }
    }
}
