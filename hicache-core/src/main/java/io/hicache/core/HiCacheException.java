package io.hicache.core;

import java.io.Serial;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The one unchecked exception for operational failures in HiCache. Bad arguments are reported with the
 * JDK's {@link IllegalArgumentException}; everything that goes wrong with a correct call carries an
 * {@link ErrorCode} so callers can react to the kind of failure without parsing messages. Immutable.
 */
public class HiCacheException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    public HiCacheException(ErrorCode code, String message) {
        super(message);
        this.code = Objects.requireNonNull(code, "code");
    }

    public HiCacheException(ErrorCode code, String message, @Nullable Throwable cause) {
        super(message, cause);
        this.code = Objects.requireNonNull(code, "code");
    }

    /** What kind of failure this is. */
    public ErrorCode code() {
        return code;
    }

    /** What went wrong; never null, as every constructor takes one. */
    @Override
    public String getMessage() {
        String message = super.getMessage();
        return message == null ? code.toString() : message;
    }

    @Override
    public String toString() {
        return getClass().getName() + " [" + code + "]: " + getMessage();
    }
}
