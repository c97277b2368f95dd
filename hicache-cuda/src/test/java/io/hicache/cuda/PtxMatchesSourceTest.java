package io.hicache.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The PTX shipped in the resources is built from the committed kernel source: its header records the source's
 * SHA-256, and where the same nvcc is installed, building again gives the same PTX. After editing
 * src/main/cuda/kv_transfer.cu, run src/main/cuda/build-ptx.sh and commit its output.
 */
class PtxMatchesSourceTest {
    private static final Path SOURCE = Path.of("src/main/cuda/kv_transfer.cu");

    private static List<String> shippedPtx() throws IOException {
        try (InputStream in = CudaDeviceRuntime.class.getResourceAsStream("kv_transfer.ptx")) {
            assertTrue(in != null, "kv_transfer.ptx is missing from the resources");
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII)
                    .lines()
                    .toList();
        }
    }

    @Test
    void theHeaderNamesTheCommittedSource() throws Exception {
        List<String> ptx = shippedPtx();
        String sha =
                HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(SOURCE)));
        assertEquals(
                "// hicache-ptx source-sha256 " + sha,
                ptx.get(0),
                "kv_transfer.cu changed since its PTX was built: run src/main/cuda/build-ptx.sh");
        assertTrue(ptx.get(1).startsWith("// hicache-ptx nvcc release "), ptx.get(1));
        assertTrue(ptx.stream().anyMatch(l -> l.contains(".entry hicache_kv_copy")), "the kernel is in the PTX");
    }

    @Test
    void theSameNvccBuildsTheSamePtx() throws Exception {
        String version = nvccVersion();
        assumeTrue(version != null, "no nvcc here");
        List<String> ptx = shippedPtx();
        assumeTrue(
                ptx.get(1).equals("// hicache-ptx nvcc " + version),
                "the PTX was built by another nvcc: " + ptx.get(1));
        Path dir = Files.createTempDirectory("hicache-ptx");
        try {
            Path out = dir.resolve("kv_transfer.ptx");
            Process nvcc = new ProcessBuilder(
                            "nvcc", "-ptx", "-arch=compute_80", "-O3", "-o", out.toString(), SOURCE.toString())
                    .redirectErrorStream(true)
                    .start();
            String log = new String(nvcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(nvcc.waitFor(5, TimeUnit.MINUTES) && nvcc.exitValue() == 0, "nvcc failed: " + log);
            assertEquals(
                    Files.readAllLines(out),
                    ptx.subList(2, ptx.size()),
                    "the shipped PTX differs from what build-ptx.sh makes now: run it and commit its output");
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : files.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    private static String nvccVersion() {
        try {
            Process p = new ProcessBuilder("nvcc", "--version")
                    .redirectErrorStream(true)
                    .start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor(1, TimeUnit.MINUTES);
            var m = Pattern.compile("release [0-9.]+, V[0-9.]+").matcher(out);
            return m.find() ? m.group() : null;
        } catch (IOException | InterruptedException e) {
            return null;
        }
    }
}
