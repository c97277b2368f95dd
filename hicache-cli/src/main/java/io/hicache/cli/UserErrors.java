package io.hicache.cli;

import io.hicache.core.HiCacheException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.net.ConnectException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/**
 * A failure as one line in the user's words: the wrappers Java puts around it (ExecutionException,
 * CompletionException, ...) taken off, the exception's class and the error code left out, since a user acts on what
 * went wrong and with which value, not on Java's types. {@code --debug} adds the stack trace. Stateless.
 */
final class UserErrors {
    private UserErrors() {}

    /** What went wrong, in one line. */
    static String describe(Throwable failure) {
        Throwable e = unwrap(failure);
        String message = e.getMessage();
        if (e instanceof HiCacheException && message != null) {
            return oneLine(message);
        }
        if (e instanceof ConnectException) {
            return "cannot connect (" + message + "); is the daemon running, on this host and port?";
        }
        if (e instanceof TimeoutException) {
            return "no answer in time" + (message == null ? "" : " (" + message + ")");
        }
        if (e instanceof InterruptedException) {
            return "interrupted";
        }
        // Not a failure the code foresaw: say so, with what Java knows.
        return "unexpected " + e.getClass().getSimpleName() + (message == null ? "" : ": " + oneLine(message))
                + " (run with --debug for the stack trace, and please report it)";
    }

    /** The failure inside the wrappers of futures, reflection and unchecked I/O. */
    static Throwable unwrap(Throwable failure) {
        Throwable e = failure;
        while ((e instanceof ExecutionException
                        || e instanceof CompletionException
                        || e instanceof InvocationTargetException
                        || e instanceof UncheckedIOException)
                && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    private static String oneLine(String text) {
        return text.replaceAll("\\s*\\R\\s*", " ").strip();
    }
}
