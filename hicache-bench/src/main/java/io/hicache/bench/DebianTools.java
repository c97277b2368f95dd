package io.hicache.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * Finds a reference tool (redis-server, iperf3) on the PATH or where Debian puts it, installing its Debian package
 * with apt-get when it is missing and this process may do so. Stateless.
 */
public final class DebianTools {
    private DebianTools() {}

    /** The path of {@code binary}, installing {@code debianPackage} first when it is not found. */
    public static Path find(String binary, String debianPackage) throws IOException, InterruptedException {
        Path found = lookup(binary);
        if (found != null) {
            return found;
        }
        System.err.println(binary + " is not installed; installing Debian's " + debianPackage + " with apt-get");
        List<String> sudo = "root".equals(System.getProperty("user.name")) ? List.of() : List.of("sudo", "-n");
        run(concat(sudo, List.of("apt-get", "update", "-q")), debianPackage);
        run(concat(sudo, List.of("apt-get", "install", "-y", "-q", debianPackage)), debianPackage);
        found = lookup(binary);
        if (found == null) {
            throw new IOException("apt-get ran but " + binary + " is still not found");
        }
        return found;
    }

    private static @Nullable Path lookup(String binary) {
        for (String dir :
                (System.getenv().getOrDefault("PATH", "") + ":/usr/bin:/usr/sbin:/usr/local/bin").split(":")) {
            Path p = Path.of(dir.isEmpty() ? "." : dir, binary);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    private static void run(List<String> command, String debianPackage) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).inheritIO().start();
        if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("'" + String.join(" ", command) + "' failed; install " + debianPackage + " by hand");
        }
    }

    private static List<String> concat(List<String> a, List<String> b) {
        return Stream.concat(a.stream(), b.stream()).toList();
    }
}
