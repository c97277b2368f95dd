package io.hicache.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Finds {@code redis-server} (on the PATH or where Debian puts it), installing Debian's package with apt-get when it
 * is missing and this process may do so. Stateless.
 */
final class RedisInstall {
    private static final Pattern VERSION = Pattern.compile("v=(\\d+)\\.(\\d+)\\.(\\d+)");

    private RedisInstall() {}

    static Path find() throws IOException, InterruptedException {
        return DebianTools.find("redis-server", "redis-server");
    }

    /** The version, such as {@code 7.0.15}; Redis 7 is the reference, so another major version is refused. */
    static String version(Path binary) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(binary.toString(), "--version")
                .redirectErrorStream(true)
                .start();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(10, TimeUnit.SECONDS);
        Matcher m = VERSION.matcher(text);
        if (!m.find()) {
            throw new IOException("cannot read the version of " + binary + ": " + text);
        }
        if (!m.group(1).equals("7")) {
            throw new IOException("the reference is Redis 7; " + binary + " is " + m.group() + "");
        }
        return m.group(1) + "." + m.group(2) + "." + m.group(3);
    }
}
