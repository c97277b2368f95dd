package io.hicache.server.daemon;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.channel.Channel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import java.io.File;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.Optional;
import javax.naming.InvalidNameException;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLPeerUnverifiedException;
import org.jspecify.annotations.Nullable;

/**
 * The daemon's TLS ({@code server.tls-cert}, {@code server.tls-key}, {@code server.tls-client-ca}; docs/security.md):
 * a Netty {@link SslContext} for the protocol and Redis ports, on OpenSSL (BoringSSL through netty-tcnative) where its
 * native library loads and on the JDK's TLS otherwise, and a JDK {@link SSLContext} for the metrics port's HTTPS.
 * Certificates and keys are PEM files, read once at start. Immutable and thread-safe.
 */
final class Tls {
    private final SslContext netty;
    private final SSLContext jdk;
    private final String provider;

    private Tls(SslContext netty, SSLContext jdk, String provider) {
        this.netty = netty;
        this.jdk = jdk;
        this.provider = provider;
    }

    /**
     * TLS from the daemon's files, or empty when {@code server.tls-cert} is not set.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} for a missing key, an unreadable or bad file
     */
    static Optional<Tls> of(ServerConfig.TlsFiles files) {
        if (!files.on()) {
            if (!files.key().isEmpty() || !files.clientCa().isEmpty()) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "server.tls-key and server.tls-client-ca need server.tls-cert (the daemon's certificate)");
            }
            return Optional.empty();
        }
        if (files.key().isEmpty()) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, "server.tls-cert needs server.tls-key");
        }
        File cert = readable(files.cert(), "server.tls-cert");
        File key = readable(files.key(), "server.tls-key");
        File ca = files.clientCa().isEmpty() ? null : readable(files.clientCa(), "server.tls-client-ca");
        SslProvider provider = OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK;
        try {
            SslContext netty = builder(cert, key, ca).sslProvider(provider).build();
            SslContext forHttp =
                    builder(cert, key, null).sslProvider(SslProvider.JDK).build();
            String name = provider == SslProvider.OPENSSL ? "OpenSSL (" + OpenSsl.versionString() + ")" : "JDK";
            return Optional.of(new Tls(netty, ((JdkSslContext) forHttp).context(), name));
        } catch (Exception e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "the TLS files (server.tls-cert " + cert + ", server.tls-key " + key
                            + (ca == null ? "" : ", server.tls-client-ca " + ca) + ") do not make a TLS context: "
                            + e.getMessage() + " (PEM certificates and a PKCS#8 PEM key)",
                    e);
        }
    }

    private static SslContextBuilder builder(File cert, File key, @Nullable File ca) {
        SslContextBuilder b = SslContextBuilder.forServer(cert, key).protocols("TLSv1.3", "TLSv1.2");
        if (ca != null) {
            b.trustManager(ca).clientAuth(ClientAuth.REQUIRE);
        }
        return b;
    }

    private static File readable(String path, String setting) {
        File f = new File(path);
        if (!f.canRead()) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, setting + " " + path + " cannot be read");
        }
        return f;
    }

    /** A handler that makes {@code ch} speak TLS as its server; the first of its pipeline. */
    SslHandler handler(Channel ch) {
        return netty.newHandler(ch.alloc());
    }

    /** For the metrics port's HTTPS. */
    SSLContext jdkContext() {
        return jdk;
    }

    /** Which TLS implementation serves the protocol: "OpenSSL (BoringSSL ...)" or "JDK". */
    String provider() {
        return provider;
    }

    /**
     * The common name of the subject of the certificate the peer of {@code ch} presented, if it presented one (a
     * connection without TLS has none).
     */
    static Optional<String> peerName(Channel ch) {
        SslHandler ssl = ch.pipeline().get(SslHandler.class);
        if (ssl == null) {
            return Optional.empty();
        }
        try {
            Certificate[] chain = ssl.engine().getSession().getPeerCertificates();
            if (chain.length == 0 || !(chain[0] instanceof X509Certificate x)) {
                return Optional.empty();
            }
            for (Rdn rdn : new LdapName(x.getSubjectX500Principal().getName()).getRdns()) {
                if (rdn.getType().equalsIgnoreCase("CN")) {
                    return Optional.of(String.valueOf(rdn.getValue()));
                }
            }
            return Optional.empty();
        } catch (SSLPeerUnverifiedException | InvalidNameException e) {
            return Optional.empty();
        }
    }
}
