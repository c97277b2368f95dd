package io.hicache.cli;

import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceRuntimes;
import io.hicache.core.store.PageStores;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.transfer.pd.PdSettings;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Warns about {@code HICACHE_*} environment variables that no setting and no tool reads: a misspelt one
 * ({@code HICACHE_SERVER_PROT}) would otherwise be ignored without a word. The known names are every setting any
 * module declares (the cache's, the daemon's, PD's, every store's and device runtime's on the class path), the options of
 * the commands, and the variables of the launcher and the test tools. Stateless.
 */
final class EnvironmentCheck {
    /** Variables read by the launcher, the build scripts and the test tools rather than by a setting. */
    static final Set<String> TOOL_VARIABLES = Set.of(
            "HICACHE_JAVA_OPTS",
            "HICACHE_SKIP_BUILD",
            "HICACHE_CLASSPATH",
            "HICACHE_BUILD_WAIT_S",
            "HICACHE_BENCH_DIR",
            "HICACHE_GPU_PACK",
            "HICACHE_GPU_PACK_NO_KITS",
            "HICACHE_DAEMON_CMD",
            "HICACHE_REPO",
            "HICACHE_TEST_TMPDIR");

    private EnvironmentCheck() {}

    /** One warning line per unknown {@code HICACHE_*} variable of {@code env}, with the nearest known name. */
    static List<String> warnings(Map<String, String> env, CommandLine root) {
        Set<String> known = new TreeSet<>(TOOL_VARIABLES);
        List<Setting<?>> settings = new ArrayList<>();
        settings.addAll(HiCacheConfig.SETTINGS);
        settings.addAll(ServerConfig.SETTINGS);
        settings.addAll(PdSettings.SETTINGS);
        PageStores.providers().forEach(p -> settings.addAll(p.settings()));
        DeviceRuntimes.providers().forEach(p -> settings.addAll(p.settings()));
        settings.forEach(s -> known.add(Settings.environmentName(s.key())));
        collect(root, known);
        List<String> out = new ArrayList<>();
        for (String name : new TreeSet<>(env.keySet())) {
            if (name.startsWith("HICACHE_") && !known.contains(name)) {
                @Nullable String near = Nearest.nearest(name, List.copyOf(known));
                out.add("warning: the environment variable " + name + " is not a setting of any command, so it is "
                        + "ignored" + (near == null ? "" : "; did you mean " + near + "?"));
            }
        }
        return out;
    }

    /** The environment names of the settings that {@code line} and its subcommands take as options. */
    private static void collect(CommandLine line, Set<String> known) {
        for (OptionSpec o : line.getCommandSpec().options()) {
            String name = o.longestName();
            // Settings are --key options whose key has a dot or a dash (server.port, hicache-ratio, page-size).
            if (name.startsWith("--") && (name.contains(".") || name.indexOf('-', 2) >= 0)) {
                known.add(Settings.environmentName(name.substring(2)));
            }
        }
        line.getSubcommands().values().forEach(sub -> collect(sub, known));
    }
}
