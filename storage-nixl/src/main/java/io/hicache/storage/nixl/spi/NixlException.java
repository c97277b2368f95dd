package io.hicache.storage.nixl.spi;

import java.util.Objects;

/** A NIXL call that was refused, with its {@link NixlStatus} code. Unchecked: misuse is a programming error. */
public final class NixlException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final NixlStatus status;

    public NixlException(NixlStatus status, String message) {
        super(status + ": " + message);
        this.status = Objects.requireNonNull(status, "status");
    }

    public NixlException(NixlStatus status, String message, Throwable cause) {
        super(status + ": " + message, cause);
        this.status = Objects.requireNonNull(status, "status");
    }

    /** The code. */
    public NixlStatus status() {
        return status;
    }
}
