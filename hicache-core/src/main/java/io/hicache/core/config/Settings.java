package io.hicache.core.config;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * Raw configuration values from every source, looked up with one precedence order:
 * <b>flags over environment over configuration file over defaults</b>. Values are text here; each module
 * reads the ones it declared through {@link Setting} and builds its own configuration object from them.
 *
 * <ul>
 *   <li>File: Java properties ({@code key = value}, {@code #} comments), keys as declared ({@code file.root}).
 *   <li>Environment: {@code HICACHE_} and the key in upper case with {@code .} and {@code -} as {@code _}
 *       ({@code file.root} is {@code HICACHE_FILE_ROOT}; a key that starts with {@code hicache-} does not
 *       repeat it: {@code hicache-ratio} is {@code HICACHE_RATIO}).
 *   <li>Flags: {@code --key value} on a command line, or values set by code.
 * </ul>
 *
 * <p>Immutable and thread-safe.
 */
public final class Settings {
    /** Where a value came from, in increasing precedence. */
    public enum Source {
        FILE,
        ENVIRONMENT,
        FLAG
    }

    /**
     * One raw value.
     *
     * @param key    the setting key
     * @param text   the value as written
     * @param source where it came from
     * @param origin a phrase naming the place, for error messages ({@code file /etc/hicache.properties})
     */
    public record Value(String key, String text, Source source, String origin) {}

    private static final Settings EMPTY = new Settings(Map.of(), Map.of(), Map.of());

    private final Map<String, Value> fileValues;
    private final Map<String, String> environment;
    private final Map<String, Value> flagValues;

    private Settings(Map<String, Value> fileValues, Map<String, String> environment, Map<String, Value> flagValues) {
        this.fileValues = fileValues;
        this.environment = environment;
        this.flagValues = flagValues;
    }

    /** No values: every setting takes its default. */
    public static Settings empty() {
        return EMPTY;
    }

    /** Starts an empty set of values. */
    public static Builder builder() {
        return new Builder();
    }

    /** The environment variable that carries {@code key}. */
    public static String environmentName(String key) {
        String bare = key.startsWith("hicache-") ? key.substring("hicache-".length()) : key;
        return "HICACHE_" + bare.toUpperCase(Locale.ROOT).replace('.', '_').replace('-', '_');
    }

    /** The winning value for {@code key}, if any source has one. */
    public Optional<Value> lookup(String key) {
        Value flag = flagValues.get(key);
        if (flag != null) {
            return Optional.of(flag);
        }
        String envName = environmentName(key);
        String env = environment.get(envName);
        if (env != null) {
            return Optional.of(new Value(key, env, Source.ENVIRONMENT, "environment " + envName));
        }
        return Optional.ofNullable(fileValues.get(key));
    }

    /** The value of {@code setting}: shorthand for {@link Setting#from(Settings)}. */
    public <T> T get(Setting<T> setting) {
        return setting.from(this);
    }

    /**
     * A module's configuration read from these settings by {@code reader}, once: a value the reader's checks refuse
     * ({@link IllegalArgumentException}, as {@link io.hicache.core.util.Checks} throws) becomes
     * {@link ErrorCode#CONFIG_INVALID} with its message, as a malformed setting already does. Every module's
     * configuration is read this way.
     */
    public <T> T read(Function<Settings, T> reader) {
        try {
            return reader.apply(this);
        } catch (IllegalArgumentException e) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, String.valueOf(e.getMessage()), e);
        }
    }

    /** These values with {@code key} set as if by a flag. */
    public Settings with(String key, String value) {
        Map<String, Value> flags = new LinkedHashMap<>(flagValues);
        flags.put(key, new Value(key, value, Source.FLAG, "code"));
        return new Settings(fileValues, environment, Map.copyOf(flags));
    }

    /**
     * Checks that every key given in the file or as a flag is one of {@code known}, so that a misspelt key
     * fails loudly instead of being ignored. Environment variables are not checked: the environment holds
     * much that is not ours.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the unknown keys, where they came
     *     from, and the closest known key
     */
    public void requireKnown(Collection<? extends Setting<?>> known) {
        Set<String> knownKeys = new HashSet<>();
        known.forEach(s -> knownKeys.add(s.key()));
        StringBuilder problems = new StringBuilder();
        for (Map<String, Value> values : List.of(fileValues, flagValues)) {
            for (Value v : values.values()) {
                if (!knownKeys.contains(v.key())) {
                    problems.append(problems.isEmpty() ? "" : "; ")
                            .append("unknown setting '")
                            .append(v.key())
                            .append("' (from ")
                            .append(v.origin())
                            .append(')');
                    closest(v.key(), knownKeys)
                            .ifPresent(c -> problems.append(", did you mean '")
                                    .append(c)
                                    .append("'?"));
                }
            }
        }
        if (!problems.isEmpty()) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, problems.toString());
        }
    }

    private static Optional<String> closest(String key, Set<String> candidates) {
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (String c : candidates) {
            int d = editDistance(key, c);
            if (d < bestDistance) {
                bestDistance = d;
                best = c;
            }
        }
        return bestDistance <= Math.max(2, key.length() / 4) ? Optional.ofNullable(best) : Optional.empty();
    }

    private static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(substitution, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }

    /** Collects values from the sources; the order of calls does not change precedence. Not thread-safe. */
    public static final class Builder {
        private final Map<String, Value> fileValues = new LinkedHashMap<>();
        private final Map<String, String> environment = new LinkedHashMap<>();
        private final Map<String, Value> flagValues = new LinkedHashMap<>();

        private Builder() {}

        /**
         * Reads a properties file.
         *
         * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} when the file cannot be read
         */
        public Builder file(Path file) {
            Properties properties = new Properties();
            try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
                properties.load(reader);
            } catch (IOException | IllegalArgumentException e) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "cannot read configuration file " + file.toAbsolutePath() + ": " + e.getMessage(),
                        e);
            }
            String origin = "file " + file;
            for (String key : new TreeSet<>(properties.stringPropertyNames())) {
                fileValues.put(
                        key.trim(),
                        new Value(key.trim(), properties.getProperty(key).trim(), Source.FILE, origin));
            }
            return this;
        }

        /** Takes the {@code HICACHE_*} variables of {@code env} (pass {@code System.getenv()}). */
        public Builder environment(Map<String, String> env) {
            env.forEach((name, value) -> {
                if (name.startsWith("HICACHE_")) {
                    environment.put(name, value);
                }
            });
            return this;
        }

        /** Sets {@code key} as a command-line flag would. */
        public Builder flag(String key, String value) {
            Checks.checkNotNull(key, "key");
            Checks.checkNotNull(value, "value for " + key);
            flagValues.put(key, new Value(key, value, Source.FLAG, "flag --" + key));
            return this;
        }

        public Settings build() {
            return new Settings(Map.copyOf(fileValues), Map.copyOf(environment), Map.copyOf(flagValues));
        }
    }
}
