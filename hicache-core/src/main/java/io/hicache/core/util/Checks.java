package io.hicache.core.util;

import java.util.Arrays;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Argument and state checks whose messages name the parameter and its value, so a failure explains itself
 * without a debugger. Static and stateless.
 */
public final class Checks {
    private Checks() {}

    /** Throws {@link IllegalArgumentException} with the formatted message unless {@code condition} holds. */
    @Contract("false, _, _ -> fail")
    public static void requireArgument(boolean condition, String format, @Nullable Object... args) {
        if (!condition) {
            throw new IllegalArgumentException(String.format(format, args));
        }
    }

    /** Throws {@link IllegalStateException} with the formatted message unless {@code condition} holds. */
    @Contract("false, _, _ -> fail")
    public static void requireState(boolean condition, String format, @Nullable Object... args) {
        if (!condition) {
            throw new IllegalStateException(String.format(format, args));
        }
    }

    /**
     * Throws {@link IllegalArgumentException} naming the value when one of {@code values[0 .. count)} is there more
     * than once. Sorts a copy: O(n log n), nothing kept.
     */
    public static void requireDistinct(int[] values, int count, String what) {
        int[] sorted = Arrays.copyOf(values, count);
        Arrays.sort(sorted);
        for (int i = 1; i < sorted.length; i++) {
            if (sorted[i] == sorted[i - 1]) {
                throw new IllegalArgumentException(what + " " + sorted[i] + " is listed more than once");
            }
        }
    }

    /** Returns {@code value} if it is at least 1, else throws naming {@code name}. */
    public static int checkPositive(int value, String name) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be at least 1, was " + value);
        }
        return value;
    }

    /** Returns {@code value} if it is at least 1, else throws naming {@code name}. */
    public static long checkPositive(long value, String name) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be at least 1, was " + value);
        }
        return value;
    }

    /** Returns {@code value} if it is at least 0, else throws naming {@code name}. */
    public static long checkNotNegative(long value, String name) {
        if (value < 0) {
            throw new IllegalArgumentException(name + " must not be negative, was " + value);
        }
        return value;
    }

    /** Returns {@code value} if it lies in [{@code min}, {@code max}], else throws naming {@code name}. */
    public static long checkInRange(long value, long min, long max, String name) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "], was " + value);
        }
        return value;
    }

    /** Returns {@code value} unless null, else throws {@link NullPointerException} naming {@code name}. */
    @Contract("null, _ -> fail")
    public static <T> T checkNotNull(@Nullable T value, String name) {
        return Objects.requireNonNull(value, () -> name + " must not be null");
    }
}
