package io.hicache.server.daemon;

import io.hicache.core.config.Settings;

/**
 * A daemon in a child JVM, for tests that kill or stop one (SIGKILL, SIGSTOP): its arguments are {@code key=value}
 * settings; it prints {@code port N} once it serves, and stops gracefully on SIGTERM.
 */
public final class ClusterChildDaemon {
    private ClusterChildDaemon() {}

    public static void main(String[] args) throws Exception {
        Settings.Builder b = Settings.builder();
        for (String a : args) {
            int eq = a.indexOf('=');
            b.flag(a.substring(0, eq), a.substring(eq + 1));
        }
        HiCacheServer server = HiCacheServer.start(ServerConfig.from(b.build()));
        Runtime.getRuntime().addShutdownHook(new Thread(server::close));
        System.out.println("port " + server.port());
        System.out.flush();
        Thread.currentThread().join();
    }
}
