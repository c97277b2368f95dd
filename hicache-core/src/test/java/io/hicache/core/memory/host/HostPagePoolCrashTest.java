package io.hicache.core.memory.host;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.ShmDir;
import io.hicache.core.memory.TestPages;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Kills a child JVM that is writing pages, at random moments, many times over, and after each kill reopens the
 * pool and checks two things: no page with wrong bytes is ever served, and every page the child had committed
 * (and not released) is still there.
 */
class HostPagePoolCrashTest {
    static final int CAPACITY = 192;
    private static final Namespace NS = Namespace.of("crash-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    static PageFormat format(HostLayout layout) {
        // 128 KiB pages: filling one takes long enough that many kills land in the middle of a write.
        return new PageFormat(KvGeometry.mha(4, 4, 64, KvDtype.BFLOAT16), 32, layout);
    }

    static StoreKey key(int run, int counter) {
        return NS.key(PageHash.fromHex(String.format("%08x%08x", run, counter) + "0".repeat(47) + "1"));
    }

    @ParameterizedTest(name = "{0}, {1} kills")
    @CsvSource({"page_first_direct, 20", "layer_first, 4"})
    void killedWritersNeverLeaveWrongBytesAndNeverLoseCommittedPages(String layoutName, int kills) throws Exception {
        HostLayout layout = HostLayout.parse(layoutName);
        SplittableRandom random = new SplittableRandom();
        Map<String, StoreKey> mustSurvive = new HashMap<>();
        int committed = 0;
        int droppedUnfinished = 0;
        int recoveries = 0;
        try (ShmDir dir = ShmDir.create("hicache-crash-test")) {
            for (int run = 0; run < kills; run++) {
                List<String> lines = runAndKill(dir, layout, run, random.nextLong(), 50 + random.nextInt(550));
                for (String line : lines) {
                    String[] f = line.split(" ");
                    if (f[0].equals("ready")) {
                        StoreKey k = key(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
                        mustSurvive.put(HexFormat.of().formatHex(HostPagePool.indexKey(k)), k);
                        committed++;
                    } else if (f[0].equals("free")) {
                        mustSurvive.remove(f[1]);
                    }
                }
                try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(1 << 20, 1);
                        HostPagePool pool = HostPagePool.open(
                                HostPoolConfig.inDir(dir.path(), layout), format(layout), CAPACITY, runtime);
                        Arena arena = Arena.ofConfined()) {
                    HostPagePool.OpenReport report = pool.openReport();
                    droppedUnfinished += report.droppedUnfinished();
                    recoveries += report.recovered() ? 1 : 0;
                    MemorySegment flat = arena.allocate(pool.format().pageBytes());
                    List<String> wrong = new ArrayList<>();
                    pool.forEachReady((slot, indexKey) -> {
                        pool.slab().readPage(slot, flat);
                        if (TestPages.mismatch(flat, TestPages.seedOf(indexKey)) >= 0) {
                            wrong.add("slot " + slot + " key " + HexFormat.of().formatHex(indexKey));
                        }
                    });
                    if (!wrong.isEmpty()) {
                        fail("after kill " + run + " the pool serves pages with wrong bytes: " + wrong + "; " + report);
                    }
                    for (StoreKey k : mustSurvive.values()) {
                        int slot = pool.pin(k);
                        if (slot < 0) {
                            fail("after kill " + run + " a committed page is gone: " + k + "; " + report);
                        }
                        pool.unpin(slot);
                    }
                }
            }
        }
        assertTrue(committed >= kills * 5, "the writers committed too few pages to test anything: " + committed);
        assertTrue(recoveries == kills, "every kill left the pool to recover: " + recoveries + " of " + kills);
        if (kills >= 10) {
            // Most of the writer's time is inside a write, so among many kills some must land there; with few kills
            // this could miss by chance (about 0.4^kills).
            assertTrue(droppedUnfinished > 0, "no kill landed inside a write in " + kills + " kills");
        }
    }

    /** Starts a writer, kills it {@code delayMillis} after it opened the pool, and returns all it printed. */
    private static List<String> runAndKill(ShmDir dir, HostLayout layout, int run, long seed, long delayMillis)
            throws Exception {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElseThrow());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-agentlib") && !a.startsWith("-javaagent"))
                .toList());
        command.addAll(List.of(
                "-cp",
                System.getProperty("java.class.path"),
                CrashingWriter.class.getName(),
                dir.path().toString(),
                layout.configName(),
                Integer.toString(run),
                Long.toString(seed)));
        Process child = new ProcessBuilder(command)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        List<String> lines = new ArrayList<>();
        CountDownLatch opened = new CountDownLatch(1);
        CompletableFuture<Void> reader = CompletableFuture.runAsync(() -> {
            // Only lines that end in a newline count: a kill in the middle of "ready 5 9087" leaves "ready 5 90",
            // which names another page.
            try (InputStream in = child.getInputStream()) {
                ByteArrayOutputStream line = new ByteArrayOutputStream();
                byte[] chunk = new byte[64 * 1024];
                int n;
                while ((n = in.read(chunk)) >= 0) {
                    for (int i = 0; i < n; i++) {
                        if (chunk[i] != '\n') {
                            line.write(chunk[i]);
                            continue;
                        }
                        String text = line.toString(StandardCharsets.UTF_8);
                        synchronized (lines) {
                            lines.add(text);
                        }
                        if (text.startsWith("open ")) {
                            opened.countDown();
                        }
                        line.reset();
                    }
                }
            } catch (IOException e) {
                // the pipe closes when the child dies
            }
        });
        try {
            if (!opened.await(60, TimeUnit.SECONDS)) {
                fail("the writer did not open the pool within 60 s; it printed " + lines);
            }
            Thread.sleep(delayMillis);
        } finally {
            // SIGKILL through the handle: Process.destroyForcibly() would also close our end of the child's stdout,
            // dropping the lines it printed last, which say what must survive.
            child.toHandle().destroyForcibly();
            child.waitFor(30, TimeUnit.SECONDS);
        }
        reader.get(30, TimeUnit.SECONDS);
        synchronized (lines) {
            return List.copyOf(lines);
        }
    }
}
