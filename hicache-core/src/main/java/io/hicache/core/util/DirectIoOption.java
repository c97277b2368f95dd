package io.hicache.core.util;

import java.nio.file.OpenOption;
import org.jspecify.annotations.Nullable;

/**
 * The JDK's {@code O_DIRECT} open option, {@code com.sun.nio.file.ExtendedOpenOption.DIRECT}, looked up by name once
 * for every store that does direct I/O: it is a JDK-specific class that javac warns about (and no flag silences), and
 * a JDK without it should get a clear error from the store rather than a linkage failure. Stateless.
 */
public final class DirectIoOption {
    /** The option, or null where this JDK has none. */
    public static final @Nullable OpenOption DIRECT = lookup();

    private DirectIoOption() {}

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static @Nullable OpenOption lookup() {
        try {
            return (OpenOption) Enum.valueOf((Class) Class.forName("com.sun.nio.file.ExtendedOpenOption"), "DIRECT");
        } catch (ReflectiveOperationException | IllegalArgumentException | ClassCastException e) {
            return null;
        }
    }
}
