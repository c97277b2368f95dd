package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.ClientTls;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS on the daemon's ports (docs/security.md): round trips from the Java client trusting the daemon's authority; a
 * client of another authority, an impostor daemon and a plaintext client refused; with client certificates asked for,
 * a client without one refused and one whose common name is a tenant's name served as that tenant; HTTPS on the
 * metrics port. Certificates are made with openssl (skipped where it cannot run).
 */
class TlsTest {
    private static final String ALICE = "alice-token-0123456789";
    private static final String BOB = "bob-token-0123456789ab";

    @TempDir
    static Path dir;

    static TestCertificates certs;

    @BeforeAll
    static void certificates() throws Exception {
        certs = TestCertificates.make(dir);
        certs.client("alice", "alice");
        certs.client("bob", "bob");
        Files.writeString(dir.resolve("tenants"), "alice " + ALICE + "\nbob " + BOB + "\n");
    }

    private static RemoteStoreConfig client(TestDaemon d, String token, ClientTls tls) {
        return RemoteStoreConfig.local(d.port(), token).withTls(tls);
    }

    private static TestDaemon daemon(Path cert, Path key, Map<String, String> more) throws Exception {
        Map<String, String> settings = new java.util.HashMap<>(more);
        settings.put("server.tls-cert", cert.toString());
        settings.put("server.tls-key", key.toString());
        return TestDaemon.start(settings);
    }

    private static BatchResult roundTrip(RemotePageStore store, Namespace ns, Pages pages) throws Exception {
        List<StoreKey> keys = pages.keys(ns, 3);
        BatchResult put = Pages.put(store, pages.filled(keys, 256 * 1024));
        for (int i = 0; i < keys.size(); i++) {
            assertEquals(PageStatus.OK, put.status(i));
        }
        PageBatch back = pages.empty(keys, 256 * 1024);
        BatchResult got = Pages.get(store, back);
        for (int i = 0; i < keys.size(); i++) {
            assertEquals(PageStatus.OK, got.status(i));
            assertTrue(io.hicache.testkit.PagePattern.matches(back.page(i), keys.get(i)), "page " + i);
        }
        return got;
    }

    @Test
    void theJavaClientRoundTripsOverTlsAndWrongCertificatesAreRefused() throws Exception {
        try (TestDaemon d = daemon(certs.pem("server"), certs.key("server"), Map.of());
                Pages pages = new Pages()) {
            assertTrue(d.server.describe().contains("TLS by"), d.server.describe());
            try (RemotePageStore store = RemotePageStore.open(
                    client(d, "", ClientTls.trusting(certs.pem("ca").toString())))) {
                roundTrip(store, Pages.namespace("tls"), pages);
            }
            HiCacheException otherCa = assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(
                                    d,
                                    "",
                                    ClientTls.trusting(certs.pem("other-ca").toString())))
                            .close());
            assertTrue(otherCa.getMessage().contains("TLS handshake failed"), otherCa.getMessage());
            assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(d, "", ClientTls.NONE)).close(),
                    "a plaintext client of a TLS daemon");
        }
        try (TestDaemon elsewhere = daemon(certs.pem("wrong-host"), certs.key("wrong-host"), Map.of())) {
            HiCacheException wrongHost = assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(
                                    elsewhere,
                                    "",
                                    ClientTls.trusting(certs.pem("ca").toString())))
                            .close(),
                    "a certificate of the trusted authority that names another host");
            assertTrue(wrongHost.getMessage().contains("TLS handshake failed"), wrongHost.getMessage());
        }
        try (TestDaemon impostor = daemon(certs.pem("impostor"), certs.key("impostor"), Map.of())) {
            HiCacheException refused = assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(
                                    impostor,
                                    "",
                                    ClientTls.trusting(certs.pem("ca").toString())))
                            .close());
            assertTrue(refused.getMessage().contains("TLS handshake failed"), refused.getMessage());
        }
    }

    @Test
    void aClientCertificateNamingATenantIsThatTenant() throws Exception {
        Map<String, String> settings = Map.of(
                "server.tls-client-ca", certs.pem("ca").toString(),
                "server.tenants-file", dir.resolve("tenants").toString(),
                "server.auth-token", "shared-token-0123456789");
        try (TestDaemon d = daemon(certs.pem("server"), certs.key("server"), settings);
                Pages pages = new Pages()) {
            ClientTls trusting = ClientTls.trusting(certs.pem("ca").toString());
            HiCacheException noCertificate = assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(d, ALICE, trusting)).close());
            assertTrue(noCertificate.getMessage().contains("TLS"), noCertificate.getMessage());
            Namespace ns = Pages.namespace("tenants");
            List<StoreKey> keys = pages.keys(ns, 2);
            try (RemotePageStore alice = RemotePageStore.open(client(
                            d,
                            "",
                            trusting.withClientCertificate(
                                    certs.pem("alice").toString(),
                                    certs.key("alice").toString())));
                    RemotePageStore aliceByToken = RemotePageStore.open(client(
                            d,
                            ALICE,
                            trusting.withClientCertificate(
                                    certs.pem("alice").toString(),
                                    certs.key("alice").toString())));
                    RemotePageStore bob = RemotePageStore.open(client(
                            d,
                            BOB,
                            trusting.withClientCertificate(
                                    certs.pem("bob").toString(),
                                    certs.key("bob").toString())))) {
                Pages.put(alice, pages.filled(keys, 4096));
                assertEquals(2, Pages.hits(aliceByToken, keys), "alice's token and alice's certificate are one tenant");
                assertEquals(0, Pages.hits(bob, keys), "bob does not see alice's pages");
                // The pages are in alice's namespace: the daemon wrote her name into it.
                StoreKey inAlices = ns.toBuilder()
                        .tenant("alice")
                        .build()
                        .key(keys.getFirst().hash());
                assertTrue(d.holds(inAlices));
            }
            HiCacheException mismatch = assertThrows(
                    HiCacheException.class,
                    () -> RemotePageStore.open(client(
                                    d,
                                    BOB,
                                    trusting.withClientCertificate(
                                            certs.pem("alice").toString(),
                                            certs.key("alice").toString())))
                            .close());
            assertTrue(mismatch.getMessage().contains("another tenant"), mismatch.getMessage());
        }
    }

    @Test
    void theMetricsPortSpeaksHttps() throws Exception {
        try (TestDaemon d = daemon(
                certs.pem("server"),
                certs.key("server"),
                Map.of("server.tenants-file", dir.resolve("tenants").toString()))) {
            SSLContext trust = ((JdkSslContext) SslContextBuilder.forClient()
                            .sslProvider(SslProvider.JDK)
                            .trustManager(certs.pem("ca").toFile())
                            .build())
                    .context();
            HttpClient http = HttpClient.newBuilder().sslContext(trust).build();
            String base = "https://127.0.0.1:" + d.server.metricsPort();
            HttpResponse<String> metrics = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, metrics.statusCode());
            assertTrue(metrics.body().contains("hicache_server_tenant_bytes"), "the per-tenant gauge is exported");
            HttpResponse<String> hits = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/v1/prefix-hits"))
                            .header("Authorization", "Bearer " + ALICE)
                            .POST(HttpRequest.BodyPublishers.ofString(
                                    "{\"model\": \"m\", \"dtype\": \"bf16\", \"hashes\": [\"" + "ab".repeat(32)
                                            + "\"]}"))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, hits.statusCode(), hits.body());
            assertTrue(hits.body().contains("\"slab\": 0"), hits.body());
        }
    }
}
