package io.hicache.transfer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Which host (and boot) this process runs on, so peers can tell whether shared memory can be mapped. Stateless. */
final class HostIdentity {
    private HostIdentity() {}

    static String id() {
        String boot = read("/proc/sys/kernel/random/boot_id");
        String host = read("/etc/hostname");
        return (boot.isEmpty() ? "unknown-boot" : boot) + "@" + (host.isEmpty() ? "localhost" : host);
    }

    private static String read(String file) {
        try {
            return Files.readString(Path.of(file)).trim();
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }
}
