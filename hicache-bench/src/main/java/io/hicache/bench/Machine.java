package io.hicache.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/** A description of the machine a benchmark ran on, for its report. Stateless. */
final class Machine {
    private Machine() {}

    static Map<String, Object> describe() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("cpu", cpuModel().orElse(System.getProperty("os.arch")));
        m.put("cores", Runtime.getRuntime().availableProcessors());
        memoryBytes().ifPresent(bytes -> m.put("memory_bytes", bytes));
        m.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version"));
        m.put("java", Runtime.version().toString() + " " + System.getProperty("java.vendor"));
        return m;
    }

    private static Optional<String> cpuModel() {
        return linuxField(Path.of("/proc/cpuinfo"), "model name").map(s -> s.replaceAll("\\s+", " "));
    }

    private static Optional<Long> memoryBytes() {
        return linuxField(Path.of("/proc/meminfo"), "MemTotal")
                .map(s -> Long.parseLong(s.replaceAll("[^0-9]", "")) * 1024);
    }

    private static Optional<String> linuxField(Path file, String name) {
        try {
            return Files.readAllLines(file).stream()
                    .filter(l -> l.startsWith(name))
                    .map(l -> l.substring(l.indexOf(':') + 1).trim())
                    .findFirst();
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }
}
