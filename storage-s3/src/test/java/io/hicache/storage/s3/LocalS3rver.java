package io.hicache.storage.s3;

import io.hicache.storage.s3.client.S3Config;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * s3rver (npm {@code s3rver}), a second S3 implementation on Node.js, as a child process on 127.0.0.1 with its objects
 * in a folder. Its puts are not atomic: it truncates an object's file and streams the body into it, and writes the
 * metadata (a file of its own) only after, so a GET during a put can see part of a body, with no metadata or with
 * an earlier put's. It is installed by {@code .ci/run} with {@code npm ci} into {@code storage-s3/s3rver}, which the
 * build passes as the system property {@value #INSTALL_PROPERTY}; {@link #unavailable()} says why it cannot run
 * here. The server also exits by itself when the JVM that started it ends ({@code s3rver/exit-with-parent.js}). Not
 * thread-safe.
 */
final class LocalS3rver implements AutoCloseable {
    /** s3rver's one built-in key pair. */
    static final String ACCESS_KEY = "S3RVER";

    static final String SECRET_KEY = "S3RVER";
    /** The folder of the npm project that installs s3rver (its package.json): set by the module's POM. */
    static final String INSTALL_PROPERTY = "hicache.test.s3rver";

    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    private static final Pattern LISTENING = Pattern.compile("S3rver listening on [^\\s:]+:(\\d+)");

    private final Process process;
    private final Path log;
    private final int port;

    /** Starts s3rver on a free port with its objects under {@code dir}, with {@code bucket} created. */
    LocalS3rver(Path dir, String bucket) throws IOException, InterruptedException {
        Path node =
                node().orElseThrow(() -> new IllegalStateException(unavailable().orElseThrow()));
        Path install = install();
        Path data = Files.createDirectories(dir.resolve("data"));
        log = dir.resolve("s3rver.log");
        // Port 0: the server picks a free one and prints it once it listens (--silent keeps only that line).
        process = new ProcessBuilder(
                        node.toString(),
                        "--require",
                        install.resolve("exit-with-parent.js").toString(),
                        cli(install).toString(),
                        "--directory",
                        data.toString(),
                        "--address",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--silent",
                        "--configure-bucket",
                        bucket)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        try {
            port = awaitListening();
        } catch (IOException | InterruptedException | RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Why s3rver cannot be started here, or empty when it can. */
    static Optional<String> unavailable() {
        if (node().isEmpty()) {
            return Optional.of("node is not on the PATH: the s3rver kit needs Node.js and s3rver (.ci/run installs "
                    + "s3rver with npm)");
        }
        Path cli = cli(install());
        if (!Files.isRegularFile(cli)) {
            return Optional.of("s3rver is not installed at " + cli + ": .ci/run installs it (npm ci --prefix "
                    + "storage-s3/s3rver)");
        }
        return Optional.empty();
    }

    private static Path install() {
        return Path.of(System.getProperty(INSTALL_PROPERTY, "s3rver")).toAbsolutePath();
    }

    private static Path cli(Path install) {
        return install.resolve("node_modules/s3rver/bin/s3rver.js");
    }

    private static Optional<Path> node() {
        String path = System.getenv("PATH");
        if (path == null) {
            return Optional.empty();
        }
        for (String entry : path.split(File.pathSeparator)) {
            Path candidate = Path.of(entry.isEmpty() ? "." : entry, "node");
            if (Files.isExecutable(candidate) && !Files.isDirectory(candidate)) {
                return Optional.of(candidate);
            }
        }
        return Optional.empty();
    }

    /** Waits for the line saying the server listens, and returns its port. */
    private int awaitListening() throws IOException, InterruptedException {
        long end = System.nanoTime() + START_TIMEOUT.toNanos();
        while (true) {
            String out = Files.readString(log, StandardCharsets.UTF_8);
            Matcher m = LISTENING.matcher(out);
            if (m.find()) {
                return Integer.parseInt(m.group(1));
            }
            if (!process.isAlive()) {
                throw new IllegalStateException(
                        "s3rver exited with " + process.exitValue() + " before listening: " + out);
            }
            if (System.nanoTime() - end > 0) {
                throw new IllegalStateException("s3rver did not listen within " + START_TIMEOUT + ": " + out);
            }
            Thread.sleep(20);
        }
    }

    URI endpoint() {
        return URI.create("http://127.0.0.1:" + port);
    }

    /** A store's configuration for {@code bucket} on this server. */
    S3Config config(String bucket) {
        return S3Config.local(endpoint(), bucket, ACCESS_KEY, SECRET_KEY);
    }

    /**
     * A plain synchronous client on this server, for setting up and damaging things. Without the SDK's default
     * checksums, as the store's own client: s3rver does not decode an aws-chunked body with a trailing checksum, and
     * would store the chunk framing as part of the object.
     */
    S3Client client() {
        return S3Client.builder()
                .region(Region.US_EAST_1)
                .endpointOverride(endpoint())
                .forcePathStyle(true)
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .credentialsProvider(
                        StaticCredentialsProvider.create(AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
                .build();
    }

    /** Stops the server: closing its standard input ends it; it is killed if it has not gone within 10 s. */
    @Override
    public void close() {
        try {
            process.getOutputStream().close();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (IOException e) {
            process.destroyForcibly();
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
