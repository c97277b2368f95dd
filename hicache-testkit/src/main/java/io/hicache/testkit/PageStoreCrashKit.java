package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The crash kit: a store's test extends it to have a child JVM ({@link CrashingStoreWriter}) put pages into the
 * store and be killed with SIGKILL at random moments, {@link #kills()} times, reopening the store after each kill.
 * After every kill: no page ever reads back with wrong bytes (every page the writer tried is OK with the right
 * bytes, or a miss), and, when {@link #returnedPutsMustSurvive()}, every page whose put had returned is there.
 *
 * <p>Settings are passed to the child as text, so the store must be configurable from {@link #settings(Path)}
 * alone. One instance per test, used by its thread.
 */
public abstract class PageStoreCrashKit {
    private static final Namespace NS = Namespace.of("crash-kit", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final int[] PAGE_BYTES = {16 * 1024, 64 * 1024, 256 * 1024};

    @TempDir
    Path dir;

    /** The store's name. */
    protected abstract String storeName();

    /** Settings that open the store in {@code dir} (a fresh folder of this test); the same for writer and checker. */
    protected abstract Map<String, String> settings(Path dir);

    /** How many times to kill the writer. */
    protected int kills() {
        return 20;
    }

    /** Whether every page whose put returned must be there after a kill (for stores that sync before returning). */
    protected boolean returnedPutsMustSurvive() {
        return true;
    }

    /** The key of the writer's {@code counter}th page in run {@code run}. */
    static StoreKey key(int run, int counter) {
        return NS.key(PageHash.fromHex(String.format("%08x%08x", run, counter) + "0".repeat(47) + "1"));
    }

    /** The size of the writer's {@code counter}th page: sizes vary so kills land in writes of every length. */
    static int pageBytes(int counter) {
        return PAGE_BYTES[counter % PAGE_BYTES.length];
    }

    @Test
    void killedWritersNeverLeaveWrongBytesOrLoseReturnedPuts() throws Exception {
        SplittableRandom random = new SplittableRandom();
        Map<String, String> settings = settings(dir);
        List<String> args = new ArrayList<>();
        settings.forEach((k, v) -> args.add(k + "=" + v));
        Map<StoreKey, Integer> tried = new LinkedHashMap<>();
        Set<StoreKey> returned = new LinkedHashSet<>();
        for (int run = 0; run < kills(); run++) {
            List<String> childArgs =
                    new ArrayList<>(List.of(storeName(), Integer.toString(run), Long.toString(random.nextLong())));
            childArgs.addAll(args);
            ChildJvm child = ChildJvm.start(CrashingStoreWriter.class, childArgs);
            List<String> lines;
            try {
                if (!child.awaitLine("open ", 60, TimeUnit.SECONDS)) {
                    fail("the writer did not open the store within 60 s; it printed " + child.lines());
                }
                Thread.sleep(50 + random.nextInt(700));
            } finally {
                lines = child.kill();
            }
            for (String line : lines) {
                String[] f = line.split(" ");
                if (f[0].equals("try")) {
                    for (int i = 2; i < f.length; i++) {
                        int counter = Integer.parseInt(f[i]);
                        tried.put(key(run, counter), pageBytes(counter));
                    }
                } else if (f[0].equals("ok")) {
                    returned.add(key(Integer.parseInt(f[1]), Integer.parseInt(f[2])));
                }
            }
            check(run, settings, tried, returned);
        }
        assertTrue(returned.size() >= kills(), "the writers stored too few pages to test anything: " + returned.size());
        assertTrue(tried.size() > returned.size(), "no kill landed while a put was in flight");
    }

    private void check(int run, Map<String, String> settings, Map<StoreKey, Integer> tried, Set<StoreKey> returned) {
        Settings.Builder b = Settings.builder();
        settings.forEach(b::flag);
        try (PageStore store = PageStores.open(new StoreConfig(storeName(), b.build()));
                Arena arena = Arena.ofShared()) {
            List<StoreKey> keys = new ArrayList<>(tried.keySet());
            List<MemorySegment> targets = new ArrayList<>(keys.size());
            for (StoreKey k : keys) {
                MemorySegment t = arena.allocate(Checks.checkNotNull(tried.get(k), "a tried key's page size"), 4096);
                PagePattern.fillSentinel(t);
                targets.add(t);
            }
            BatchResult got = store.get(PageBatch.of(keys, targets), Deadline.after(Duration.ofMinutes(2)))
                    .join();
            List<String> wrong = new ArrayList<>();
            List<String> lost = new ArrayList<>();
            for (int i = 0; i < keys.size(); i++) {
                PageStatus s = got.status(i);
                if (s == PageStatus.OK && !PagePattern.matches(targets.get(i), keys.get(i))) {
                    wrong.add(keys.get(i).toString());
                }
                if (s != PageStatus.OK && s != PageStatus.MISS && s != PageStatus.CORRUPT) {
                    fail("after kill " + run + " reading " + keys.get(i) + " gave " + s + ": "
                            + got.detail(i).orElse(""));
                }
                if (s != PageStatus.OK && returned.contains(keys.get(i)) && returnedPutsMustSurvive()) {
                    lost.add(keys.get(i) + " (" + s + ")");
                }
            }
            if (!wrong.isEmpty()) {
                fail("after kill " + run + " pages read back with wrong bytes: " + wrong);
            }
            if (!lost.isEmpty()) {
                fail("after kill " + run + " pages whose put had returned are gone: " + lost);
            }
            // The reopened store takes new pages.
            StoreKey fresh = key(1_000_000 + run, 0);
            MemorySegment page = arena.allocate(4096);
            PagePattern.fill(page, fresh);
            assertEquals(
                    PageStatus.OK,
                    store.put(PageBatch.of(List.of(fresh), List.of(page)), Deadline.after(Duration.ofMinutes(1)))
                            .join()
                            .status(0));
        }
    }
}
