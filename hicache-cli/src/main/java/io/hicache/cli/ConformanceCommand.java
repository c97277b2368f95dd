package io.hicache.cli;

import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.testkit.ConfiguredStoreKit;
import io.hicache.testkit.ConformanceReport;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code hicache conformance --store NAME}: runs the page store conformance kit against any store the configuration
 * can build (a user's bucket, a mounted disk) and prints one line per case. Runs once.
 */
@Command(
        name = "conformance",
        customSynopsis = "hicache conformance --store=NAME [--config=FILE] [--allow-clear-all] [--SETTING=VALUE ...]",
        header = "run the page store conformance kit against a configured store",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        description = {
            "Runs the page store conformance kit against the store NAME, opened from its settings. Prints "
                    + "each case as passed, failed or skipped as it finishes, and exits with status 1 if any case failed.",
            "",
            "The kit writes pages into namespaces of its own and removes them when each case ends, so it can run "
                    + "against a store that holds other data. The one case that clears the whole store runs only with "
                    + "--allow-clear-all: never give that for a store whose data you need.",
            "",
            SettingOptions.PRECEDENCE
        },
        footer = {
            "%nExamples:",
            "  hicache conformance --store memory",
            "  hicache conformance --store memory --memory.capacity 256MiB"
        })
public final class ConformanceCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Option(
            names = "--store",
            required = true,
            paramLabel = "NAME",
            description = "the store to check",
            completionCandidates = StoreNames.class)
    String store;

    @Option(names = "--config", paramLabel = "FILE", description = "a properties file of the store's settings")
    @Nullable
    Path config;

    @Option(names = "--allow-clear-all", description = "also run the case that clears the whole store")
    boolean allowClearAll;

    @Override
    public void addOptions(CommandSpec spec) {
        SettingOptions.addStores(spec, p -> "%nStore '" + p.name() + "': " + p.description() + ":", Map.of());
    }

    @Override
    public Integer call() {
        PageStoreProvider provider = PageStores.provider(store);
        Settings built = SettingOptions.read(spec.commandLine().getParseResult(), config, provider.settings());
        built.requireKnown(provider.settings());
        Progress progress = Progress.of(spec.commandLine().getErr(), "conformance of '" + store + "'", 0);
        long[] done = {0};
        ConformanceReport report = ConfiguredStoreKit.run(
                new StoreConfig(store, built),
                allowClearAll,
                c -> progress.update(
                        ++done[0], c.name() + " " + c.outcome().name().toLowerCase(Locale.ROOT)));
        progress.finish();
        report.print(spec.commandLine().getOut());
        return report.passed() ? OK : FAILED;
    }

    /** The names of the stores on the class path, for shell completion. */
    static final class StoreNames implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return PageStores.providers().stream().map(PageStoreProvider::name).iterator();
        }
    }
}
