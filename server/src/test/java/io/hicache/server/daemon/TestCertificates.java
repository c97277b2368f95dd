package io.hicache.server.daemon;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Certificates for TLS tests, made with the {@code openssl} command in a folder the test owns: a certificate
 * authority, a daemon certificate for 127.0.0.1 and localhost, client certificates by common name, and a second,
 * untrusted authority with a daemon certificate of its own. EC P-256 keys in PKCS#8 PEM. Skips the test (an
 * assumption) where {@code openssl} cannot be run. Not thread-safe.
 */
final class TestCertificates {
    final Path dir;

    private TestCertificates(Path dir) {
        this.dir = dir;
    }

    /** A trusted authority ({@code ca.pem}) and the daemon's certificate ({@code server.pem}, {@code server.key}). */
    static TestCertificates make(Path dir) throws IOException, InterruptedException {
        TestCertificates c = new TestCertificates(dir);
        c.authority("ca");
        c.signed("ca", "server", "hicache-test-daemon", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        // Trusted, but naming another host: the client's host-name check must refuse it.
        c.signed("ca", "wrong-host", "hicache-test-daemon", "subjectAltName=DNS:elsewhere.example");
        c.authority("other-ca");
        c.signed("other-ca", "impostor", "hicache-test-daemon", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        return c;
    }

    /** A client certificate {@code <name>.pem}/{@code <name>.key} with common name {@code cn}, signed by the CA. */
    void client(String name, String cn) throws IOException, InterruptedException {
        signed("ca", name, cn, "extendedKeyUsage=clientAuth");
    }

    Path pem(String name) {
        return dir.resolve(name + ".pem");
    }

    Path key(String name) {
        return dir.resolve(name + ".key");
    }

    private void authority(String name) throws IOException, InterruptedException {
        run(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=" + name,
                "-keyout",
                key(name).toString(),
                "-out",
                pem(name).toString());
    }

    private void signed(String ca, String name, String cn, String extension) throws IOException, InterruptedException {
        Path csr = dir.resolve(name + ".csr");
        Path ext = dir.resolve(name + ".ext");
        Files.writeString(ext, extension + "\n");
        run(
                "openssl",
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                "/CN=" + cn,
                "-keyout",
                key(name).toString(),
                "-out",
                csr.toString());
        run(
                "openssl",
                "x509",
                "-req",
                "-in",
                csr.toString(),
                "-CA",
                pem(ca).toString(),
                "-CAkey",
                key(ca).toString(),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                ext.toString(),
                "-out",
                pem(name).toString());
    }

    private void run(String... command) throws IOException, InterruptedException {
        Process p;
        try {
            p = new ProcessBuilder(new ArrayList<>(List.of(command)))
                    .directory(dir.toFile())
                    .redirectErrorStream(true)
                    .start();
        } catch (IOException e) {
            Assumptions.abort("openssl cannot be run here (" + e.getMessage() + "): TLS tests need it");
            throw e;
        }
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", command) + " failed: " + out);
        }
    }
}
