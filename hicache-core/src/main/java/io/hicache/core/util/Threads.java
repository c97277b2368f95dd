package io.hicache.core.util;

import java.util.concurrent.ThreadFactory;

/**
 * The one way HiCache makes threads: platform daemon threads named {@code hicache-<role>} (one thread) or
 * {@code hicache-<role>-<n>} (a pool's, counted from 1), so a thread dump says whose each thread is, and no thread of
 * ours keeps a JVM alive after its owner forgot to close something. Stateless and thread-safe; the owner of each
 * thread stops it. Netty event loops are the one exception: they take Netty's {@code DefaultThreadFactory} with the same
 * {@code hicache-} names, because Netty's pooled buffer caches want its own thread type.
 */
public final class Threads {
    private static final String PREFIX = "hicache-";

    private Threads() {}

    /** A factory of daemon threads named {@code hicache-<role>-1}, {@code -2}, ... for a pool. */
    public static ThreadFactory factory(String role) {
        return Thread.ofPlatform()
                .daemon()
                .name(PREFIX + checkRole(role) + "-", 1)
                .factory();
    }

    /** Starts one daemon thread named {@code hicache-<role>} running {@code body}. */
    public static Thread start(String role, Runnable body) {
        return Thread.ofPlatform().daemon().name(PREFIX + checkRole(role)).start(Checks.checkNotNull(body, "body"));
    }

    /** One daemon thread named {@code hicache-<role>}, not yet started (a shutdown hook, or one started later). */
    public static Thread unstarted(String role, Runnable body) {
        return Thread.ofPlatform().daemon().name(PREFIX + checkRole(role)).unstarted(Checks.checkNotNull(body, "body"));
    }

    private static String checkRole(String role) {
        Checks.checkNotNull(role, "role");
        Checks.requireArgument(
                !role.isEmpty() && !role.startsWith(PREFIX),
                "role must be non-empty and without the " + "'%s' prefix, was '%s'",
                PREFIX,
                role);
        return role;
    }
}
