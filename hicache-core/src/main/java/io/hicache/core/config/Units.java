package io.hicache.core.config;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses and prints byte sizes and durations as people write them in configuration. Stateless.
 *
 * <p>Sizes: a whole number with an optional unit. Binary units {@code KiB MiB GiB TiB PiB} and the JVM-style
 * {@code k m g t p} mean powers of 1024; decimal units {@code KB MB GB TB PB} mean powers of 1000 (SGLang's
 * {@code hicache-size} is in GB of 10^9 bytes). Fractions are allowed with a unit: {@code 1.5GiB}.
 *
 * <p>Durations: a number with a unit {@code ns us ms s m h d}, or ISO-8601 ({@code PT2S}).
 */
public final class Units {
    private static final Pattern SIZE = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([a-zA-Z]*)");
    private static final Pattern DURATION = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([a-zA-Z]+)");

    private Units() {}

    /**
     * Parses a byte size.
     *
     * @throws IllegalArgumentException naming the text when it is not a size or does not fit in a long
     */
    public static long parseBytes(String text) {
        Matcher m = SIZE.matcher(text.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + text + "' is not a byte size (examples: 4096, 64MiB, 2GB, 1.5g)");
        }
        String number = m.group(1);
        long multiplier = switch (m.group(2).toLowerCase(Locale.ROOT)) {
            case "", "b" -> 1L;
            case "k", "kib" -> 1L << 10;
            case "m", "mib" -> 1L << 20;
            case "g", "gib" -> 1L << 30;
            case "t", "tib" -> 1L << 40;
            case "p", "pib" -> 1L << 50; // printed sizes reach PiB (formatBytes), so they must read back
            case "kb" -> 1_000L;
            case "mb" -> 1_000_000L;
            case "gb" -> 1_000_000_000L;
            case "tb" -> 1_000_000_000_000L;
            case "pb" -> 1_000_000_000_000_000L;
            default ->
                throw new IllegalArgumentException("'" + text + "' has an unknown size unit '" + m.group(2)
                        + "' (use B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB)");
        };
        if (number.contains(".")) {
            double value = Double.parseDouble(number) * multiplier;
            if (value >= Long.MAX_VALUE) {
                throw new IllegalArgumentException("'" + text + "' is too large a byte size");
            }
            return (long) value;
        }
        try {
            return Math.multiplyExact(Long.parseLong(number), multiplier);
        } catch (ArithmeticException | NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "' is too large a byte size", e);
        }
    }

    /**
     * Parses a duration.
     *
     * @throws IllegalArgumentException naming the text when it is not a duration
     */
    public static Duration parseDuration(String text) {
        String t = text.trim();
        if (t.startsWith("P") || t.startsWith("p")) {
            try {
                return Duration.parse(t);
            } catch (DateTimeParseException e) {
                throw new IllegalArgumentException("'" + text + "' is not an ISO-8601 duration", e);
            }
        }
        Matcher m = DURATION.matcher(t);
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + text + "' is not a duration (examples: 250ms, 2s, 1.5m, 1h)");
        }
        long nanosPerUnit = switch (m.group(2).toLowerCase(Locale.ROOT)) {
            case "ns" -> 1L;
            case "us" -> 1_000L;
            case "ms" -> 1_000_000L;
            case "s" -> 1_000_000_000L;
            case "m", "min" -> 60_000_000_000L;
            case "h" -> 3_600_000_000_000L;
            case "d" -> 86_400_000_000_000L;
            default ->
                throw new IllegalArgumentException(
                        "'" + text + "' has an unknown time unit '" + m.group(2) + "' (use ns, us, ms, s, m, h, d)");
        };
        double nanos = Double.parseDouble(m.group(1)) * nanosPerUnit;
        if (nanos >= Long.MAX_VALUE) {
            throw new IllegalArgumentException("'" + text + "' is too long a duration");
        }
        return Duration.ofNanos((long) nanos);
    }

    /** Prints a byte size in the largest binary unit that keeps it readable: {@code 64 MiB}, {@code 1.5 GiB}. */
    public static String formatBytes(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        double value = bytes;
        int unit = -1;
        while (value >= 1024 && unit < units.length - 1) {
            value /= 1024;
            unit++;
        }
        String number =
                value == Math.rint(value) ? Long.toString((long) value) : String.format(Locale.ROOT, "%.2f", value);
        return number + " " + units[unit];
    }
}
