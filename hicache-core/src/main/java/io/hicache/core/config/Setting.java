package io.hicache.core.config;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * One declared configuration setting: its key, type, default and meaning, and how to read it from
 * {@link Settings}. Modules declare their settings as constants and build their configuration object from
 * them once, so every value is parsed and checked in one place and a bad value names its key, its text and
 * where it came from. Immutable.
 *
 * <p>Keys are lowercase words joined by {@code -} and {@code .}, with SGLang's names where SGLang has the
 * concept ({@code hicache-ratio}, {@code page-size}); a store's own settings start with its name
 * ({@code file.root}).
 *
 * @param <T> the parsed type
 */
public final class Setting<T> {
    private static final Pattern KEY = Pattern.compile("[a-z0-9]+(?:[.-][a-z0-9]+)*");

    private final String key;
    private final String type;
    private final @Nullable String defaultText;
    private final String description;
    private final Function<String, T> parser;
    private final Function<T, String> formatter;

    private Setting(
            String key, String type, @Nullable String defaultText, String description, Function<String, T> parser) {
        this(key, type, defaultText, description, parser, String::valueOf);
    }

    private Setting(
            String key,
            String type,
            @Nullable String defaultText,
            String description,
            Function<String, T> parser,
            Function<T, String> formatter) {
        Checks.requireArgument(
                KEY.matcher(key).matches(), "setting key '%s' must be lowercase words joined by '-' or '.'", key);
        this.key = key;
        this.type = type;
        this.defaultText = defaultText;
        this.description = Checks.checkNotNull(description, "description");
        this.parser = parser;
        this.formatter = formatter;
    }

    /** A byte size ({@code 64MiB}); {@code defaultText} null means the setting has no default. */
    public static Setting<Long> bytes(String key, @Nullable String defaultText, String description) {
        return new Setting<>(key, "bytes", defaultText, description, text -> {
            long value = Units.parseBytes(text);
            Checks.requireArgument(value >= 0, "must not be negative");
            return value;
        });
    }

    /** A duration ({@code 250ms}, {@code 2s}). */
    public static Setting<Duration> duration(String key, String defaultText, String description) {
        return new Setting<>(key, "duration", defaultText, description, Units::parseDuration, Duration::toString);
    }

    /** A whole number in {@code [min, max]}. */
    public static Setting<Integer> integer(String key, int defaultValue, int min, int max, String description) {
        return new Setting<>(
                key, "integer in [" + min + ", " + max + "]", Integer.toString(defaultValue), description, text -> {
                    int value;
                    try {
                        value = Integer.parseInt(text.trim());
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("not a whole number", e);
                    }
                    Checks.requireArgument(value >= min && value <= max, "must be in [%d, %d]", min, max);
                    return value;
                });
    }

    /** A decimal number in {@code [min, max]}. */
    public static Setting<Double> decimal(String key, double defaultValue, double min, double max, String description) {
        return new Setting<>(
                key, "number in [" + min + ", " + max + "]", Double.toString(defaultValue), description, text -> {
                    double value;
                    try {
                        value = Double.parseDouble(text.trim());
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("not a number", e);
                    }
                    Checks.requireArgument(value >= min && value <= max, "must be in [%s, %s]", min, max);
                    return value;
                });
    }

    /** A switch: {@code true/false}, {@code yes/no}, {@code on/off}, {@code 1/0}. */
    public static Setting<Boolean> bool(String key, boolean defaultValue, String description) {
        return new Setting<>(key, "boolean", Boolean.toString(defaultValue), description, text -> switch (text.trim()
                .toLowerCase(Locale.ROOT)) {
            case "true", "yes", "on", "1" -> true;
            case "false", "no", "off", "0" -> false;
            default -> throw new IllegalArgumentException("expected true or false");
        });
    }

    /** Free text; {@code defaultText} null means the setting has no default. */
    public static Setting<String> string(String key, @Nullable String defaultText, String description) {
        return new Setting<>(key, "text", defaultText, description, text -> text);
    }

    /** A file system path; {@code defaultText} null means the setting has no default. */
    public static Setting<Path> path(String key, @Nullable String defaultText, String description) {
        return new Setting<>(key, "path", defaultText, description, text -> {
            Checks.requireArgument(!text.isBlank(), "must not be empty");
            return Path.of(text.trim());
        });
    }

    /**
     * A value that {@code parser} reads from text, throwing {@link IllegalArgumentException} (its message says why) on
     * bad text, and {@code formatter} writes back as text {@code parser} reads: for a value with a syntax of its own,
     * such as {@code kv-events-config}'s JSON. {@code type} says what values look like, for help output;
     * {@code defaultText} null means the setting has no default.
     */
    public static <T> Setting<T> parsed(
            String key,
            String type,
            @Nullable String defaultText,
            String description,
            Function<String, T> parser,
            Function<T, String> formatter) {
        return new Setting<>(
                key,
                type,
                defaultText,
                description,
                Checks.checkNotNull(parser, "parser"),
                Checks.checkNotNull(formatter, "formatter"));
    }

    /** One of an enum's values, written as {@code nameOf} spells them. */
    public static <E extends Enum<E>> Setting<E> choice(
            String key, Class<E> type, Function<E, String> nameOf, @Nullable E defaultValue, String description) {
        E[] values = type.getEnumConstants();
        String names = Arrays.stream(values).map(nameOf).collect(Collectors.joining("|"));
        return new Setting<>(
                key,
                names,
                defaultValue == null ? null : nameOf.apply(defaultValue),
                description,
                (String text) -> {
                    for (E value : values) {
                        if (nameOf.apply(value).equalsIgnoreCase(text.trim())) {
                            return value;
                        }
                    }
                    throw new IllegalArgumentException("expected one of " + names.replace("|", ", "));
                },
                nameOf);
    }

    /** {@code value} as text this setting reads back as {@code value} (for settings given in code). */
    public String text(T value) {
        return formatter.apply(Checks.checkNotNull(value, "value"));
    }

    /**
     * The value in {@code settings}, else the default.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} when the value is malformed, or when it is
     *     missing and there is no default
     */
    public T from(Settings settings) {
        return find(settings)
                .orElseThrow(() -> new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "setting '" + key + "' is required (" + description
                                + "); set it in the configuration file, as --" + key + " or as "
                                + Settings.environmentName(key)));
    }

    /** The value in {@code settings}, else the default, else empty. */
    public Optional<T> find(Settings settings) {
        Optional<Settings.Value> value = settings.lookup(key);
        if (value.isPresent()) {
            return Optional.of(parse(value.get().text(), value.get().origin()));
        }
        return defaultText == null ? Optional.empty() : Optional.of(parse(defaultText, "default"));
    }

    private T parse(String text, String origin) {
        try {
            return parser.apply(text);
        } catch (IllegalArgumentException e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "setting '" + key + "' = '" + text + "' (from " + origin + "): " + e.getMessage(),
                    e);
        }
    }

    public String key() {
        return key;
    }

    /** What values look like, for help output: {@code bytes}, {@code duration}, {@code a|b|c}, ... */
    public String type() {
        return type;
    }

    /** The default as text, if there is one. */
    public Optional<String> defaultText() {
        return Optional.ofNullable(defaultText);
    }

    public String description() {
        return description;
    }

    @Override
    public String toString() {
        return key + " (" + type + (defaultText == null ? "" : ", default " + defaultText) + ")";
    }
}
