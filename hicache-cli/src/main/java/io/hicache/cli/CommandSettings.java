package io.hicache.cli;

import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Settings on the command line, the same for every subcommand that takes them: the built-in defaults, then a
 * properties file ({@code --config FILE}), then {@code HICACHE_*} environment variables, then {@code --KEY VALUE}
 * flags, each overriding the one before; and how they are listed in help. Stateless.
 */
final class CommandSettings {
    /** The precedence, for help texts. */
    static final String PRECEDENCE = "Settings come from the built-in defaults, then a properties file (--config FILE), then "
            + "HICACHE_* environment\nvariables (server.port is HICACHE_SERVER_PORT), then --SETTING VALUE flags, each "
            + "overriding the one before.";

    private CommandSettings() {
    }

    /** The settings of a parsed command line; options in {@code notSettings} are the command's own. */
    static Settings from(Args parsed, Set<String> notSettings) {
        Settings.Builder settings = Settings.builder();
        parsed.option("config").ifPresent(file -> settings.file(Path.of(file)));
        settings.environment(System.getenv());
        parsed.options().forEach((key, value) -> {
            if (!key.equals("config") && !notSettings.contains(key)) {
                settings.flag(key, value);
            }
        });
        return settings.build();
    }

    /** One help line per setting: flag, value kind, description, default. */
    static void describe(StringBuilder b, List<Setting<?>> settings, String indent) {
        describe(b, settings, indent, Map.of());
    }

    /** As {@link #describe(StringBuilder, List, String)}, with the defaults a command puts in place of some. */
    static void describe(StringBuilder b, List<Setting<?>> settings, String indent, Map<String, String> defaults) {
        for (Setting<?> s : settings) {
            Optional<String> shown = defaults.containsKey(s.key()) ? Optional.of(defaults.get(s.key()))
                    : s.defaultText();
            b.append(String.format("%s--%-30s %s (%s)%n", indent, s.key() + " " + metavar(s), s.description(),
                    shown.map(d -> "default " + (d.isEmpty() ? "empty" : d)).orElse("required")));
        }
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
