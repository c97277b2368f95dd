package io.hicache.cli;

import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Model.ArgGroupSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.TypeConversionException;

/**
 * Settings as command-line options, the same for every subcommand that takes them: each declared {@link Setting}
 * becomes a typed {@code --KEY VALUE} option (its value checked as it is parsed, so a bad one names the option), listed
 * in help under a heading per module; and the settings of a parsed command line: the built-in defaults, then a
 * properties file ({@code --config FILE}), then {@code HICACHE_*} environment variables, then the flags, each
 * overriding the one before. Stateless.
 */
final class SettingOptions {
    /** The precedence, for help texts. */
    static final String PRECEDENCE =
            "Settings come from the built-in defaults, then a properties file (--config FILE), "
                    + "then HICACHE_* environment variables (server.port is HICACHE_SERVER_PORT), then --SETTING VALUE flags, "
                    + "each overriding the one before.";

    private SettingOptions() {}

    /**
     * Adds {@code settings} to {@code spec} under {@code heading}; {@code defaults} replace some settings' shown
     * defaults. A key some earlier group added already is not added again.
     */
    static void add(CommandSpec spec, String heading, List<Setting<?>> settings, Map<String, String> defaults) {
        Set<String> present = new HashSet<>();
        spec.options().forEach(o -> present.add(o.longestName()));
        ArgGroupSpec.Builder group = ArgGroupSpec.builder()
                .heading(heading + "%n")
                .exclusive(false)
                .validate(false)
                .multiplicity("0..1");
        boolean any = false;
        for (Setting<?> s : settings) {
            String name = "--" + s.key();
            if (!present.add(name)) {
                continue;
            }
            Optional<String> shown =
                    defaults.containsKey(s.key()) ? Optional.of(defaults.get(s.key())) : s.defaultText();
            String description = s.description() + " ("
                    + shown.map(d -> "default " + (d.isEmpty() ? "empty" : d)).orElse("required") + ")";
            group.addArg(OptionSpec.builder(name)
                    .paramLabel(metavar(s))
                    .type(String.class)
                    .description(description.replace("%", "%%"))
                    .converters(text -> check(s, text))
                    .completionCandidates(choices(s))
                    .build());
            any = true;
        }
        if (any) {
            spec.addArgGroup(group.build());
        }
    }

    /**
     * Adds every page store's settings, a group per store under {@code heading}: first each store's own (those named
     * after it, {@code file.*}), then, where no group has them yet, those a store takes from another (cluster's
     * {@code remote.*}; the encrypted store takes every other store's, for its inner store). So each setting is listed
     * under the store it belongs to, not under the first store, by name, that also reads it.
     */
    static void addStores(CommandSpec spec, Function<PageStoreProvider, String> heading, Map<String, String> defaults) {
        List<PageStoreProvider> providers = PageStores.providers();
        for (PageStoreProvider p : providers) {
            List<Setting<?>> own = p.settings().stream()
                    .filter(s -> s.key().startsWith(p.name() + "."))
                    .toList();
            add(spec, heading.apply(p), own, defaults);
        }
        for (PageStoreProvider p : providers) {
            add(spec, heading.apply(p), p.settings(), defaults);
        }
    }

    /** The settings of a parsed command line, for the keys of {@code settings}. */
    static Settings read(ParseResult parsed, @Nullable Path configFile, List<Setting<?>> settings) {
        Settings.Builder b = Settings.builder();
        if (configFile != null) {
            b.file(configFile);
        }
        b.environment(System.getenv());
        for (Setting<?> s : settings) {
            String value = parsed.matchedOptionValue("--" + s.key(), null);
            if (value != null) {
                b.flag(s.key(), value);
            }
        }
        return b.build();
    }

    /** Parses {@code text} as {@code setting} would, so that a bad value fails while the command line is read. */
    private static String check(Setting<?> setting, String text) {
        try {
            setting.from(Settings.empty().with(setting.key(), text));
        } catch (HiCacheException e) {
            throw new TypeConversionException(e.getMessage().replace(" (from code)", ""));
        }
        return text;
    }

    private static @Nullable List<String> choices(Setting<?> s) {
        return s.type().contains("|") ? List.of(s.type().split("\\|")) : null;
    }

    /** How a setting's value is shown in help: {@code BYTES}, {@code DURATION}, {@code N}, {@code a|b}. */
    static String metavar(Setting<?> s) {
        String type = s.type();
        if (type.contains("|")) {
            return type;
        }
        if (type.startsWith("integer")) {
            return "N";
        }
        if (type.startsWith("number")) {
            return "X";
        }
        return type.toUpperCase(Locale.ROOT);
    }
}
