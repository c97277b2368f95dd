package io.hicache.cli;

import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.testkit.ConfiguredStoreKit;
import io.hicache.testkit.ConformanceReport;
import java.io.PrintStream;
import java.util.List;
import java.util.Set;

/**
 * {@code hicache conformance --store NAME}: runs the page store conformance kit against any store the
 * configuration can build (a user's bucket, a mounted disk) and prints one line per case. Stateless.
 */
public final class ConformanceCommand implements Subcommand {
    @Override
    public String name() {
        return "conformance";
    }

    @Override
    public String summary() {
        return "run the page store conformance kit against a configured store";
    }

    @Override
    public String help() {
        StringBuilder b = new StringBuilder("""
                usage: hicache conformance --store NAME [--config FILE] [--allow-clear-all] [--SETTING VALUE ...]

                Runs the page store conformance kit against the store NAME, opened from its settings (a
                properties file given with --config, then HICACHE_* environment variables, then --SETTING flags,
                each overriding the one before). Prints each case as passed, failed or skipped, and exits with
                status 1 if any case failed.

                The kit writes pages into namespaces of its own and removes them when each case ends, so it can
                run against a store that holds other data. The one case that clears the whole store runs only
                with --allow-clear-all: never give that for a store whose data you need.

                stores on the class path, with their settings:
                """);
        for (PageStoreProvider p : PageStores.providers()) {
            b.append("  ").append(p.name()).append(": ").append(p.description()).append('\n');
            CommandSettings.describe(b, p.settings(), "      ");
        }
        b.append("""

                examples:
                  hicache conformance --store memory
                  hicache conformance --store memory --memory.capacity 256MiB""");
        return b.toString();
    }

    @Override
    public int run(List<String> args, PrintStream out, PrintStream err) throws Args.UsageException {
        Args parsed = Args.parse(args, Set.of("store", "config"), Set.of("allow-clear-all"), true);
        if (!parsed.positional().isEmpty()) {
            throw new Args.UsageException("unexpected argument '" + parsed.positional().getFirst() + "'");
        }
        String storeName = parsed.option("store").orElseThrow(() -> new Args.UsageException("--store NAME is required"));
        PageStoreProvider provider = PageStores.provider(storeName);
        Settings built = CommandSettings.from(parsed, Set.of("store"));
        built.requireKnown(provider.settings());
        ConformanceReport report = ConfiguredStoreKit.run(new StoreConfig(storeName, built), parsed.has("allow-clear-all"));
        report.print(out);
        return report.passed() ? OK : FAILED;
    }
}
