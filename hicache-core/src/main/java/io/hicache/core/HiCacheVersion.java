package io.hicache.core;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** The version of this build of HiCache, as Maven stamped it. Read once; thread-safe. */
public final class HiCacheVersion {
    private static final String VERSION = read();

    private HiCacheVersion() {}

    /** The project version, such as {@code 0.1.0-SNAPSHOT}, or {@code unknown} outside a Maven build. */
    public static String version() {
        return VERSION;
    }

    private static String read() {
        try (InputStream in = HiCacheVersion.class.getResourceAsStream("hicache-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            String v = p.getProperty("version", "unknown");
            return v.startsWith("${") ? "unknown" : v;
        } catch (IOException e) {
            return "unknown";
        }
    }
}
