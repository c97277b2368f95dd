package io.hicache.testkit;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The child process of {@link PageStoreCrashKit}: opens a store and puts batches of pages until it is killed. Before
 * each put it prints {@code try RUN C1 C2 ...}, after it {@code ok RUN C} for every page stored (or already there),
 * so the parent knows what was attempted and what must have survived.
 *
 * <p>Arguments: store name, run number, seed, then settings as {@code key=value}.
 */
public final class CrashingStoreWriter {
    private CrashingStoreWriter() {}

    public static void main(String[] args) throws Exception {
        String storeName = args[0];
        int run = Integer.parseInt(args[1]);
        SplittableRandom random = new SplittableRandom(Long.parseLong(args[2]));
        Settings.Builder settings = Settings.builder();
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            settings.flag(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        PrintStream out = new PrintStream(System.out, true);
        try (PageStore store = PageStores.open(new StoreConfig(storeName, settings.build()))) {
            out.println("open " + store);
            int counter = 0;
            while (true) {
                Arena arena = Arena.ofShared();
                int n = 1 + random.nextInt(8);
                List<StoreKey> keys = new ArrayList<>(n);
                List<MemorySegment> pages = new ArrayList<>(n);
                StringBuilder line = new StringBuilder("try ").append(run);
                for (int i = 0; i < n; i++) {
                    StoreKey key = PageStoreCrashKit.key(run, counter);
                    MemorySegment page = arena.allocate(PageStoreCrashKit.pageBytes(counter), 4096);
                    PagePattern.fill(page, key);
                    keys.add(key);
                    pages.add(page);
                    line.append(' ').append(counter++);
                }
                out.println(line);
                BatchResult r = store.put(PageBatch.of(keys, pages), Deadline.after(Duration.ofMinutes(1)))
                        .join();
                StringBuilder ok = new StringBuilder();
                for (int i = 0; i < n; i++) {
                    if (r.status(i).isSuccess()) {
                        ok.append("ok ")
                                .append(run)
                                .append(' ')
                                .append(counter - n + i)
                                .append('\n');
                    }
                }
                out.print(ok);
                out.flush();
                arena.close();
            }
        }
    }
}
