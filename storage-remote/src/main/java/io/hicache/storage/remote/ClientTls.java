package io.hicache.storage.remote;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.channel.Channel;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import java.io.File;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;

/**
 * TLS to a daemon that serves it ({@code remote.tls}; docs/security.md): the daemon's certificate checked against
 * {@code remote.tls-ca} (the JDK's trusted authorities when empty) and against the host name or address dialled, and
 * optionally a client certificate ({@code remote.tls-cert}, {@code remote.tls-key}) for a daemon that asks for one (a
 * tenant's, when its common name is a tenant's name). OpenSSL (BoringSSL, netty-tcnative) where it loads, the JDK's
 * TLS otherwise. Immutable.
 *
 * @param on   whether to speak TLS
 * @param ca   PEM authorities to trust, empty for the JDK's
 * @param cert PEM client certificate chain, empty for none
 * @param key  its PEM (PKCS#8) key
 */
public record ClientTls(boolean on, String ca, String cert, String key) {
    /** Plaintext. */
    public static final ClientTls NONE = new ClientTls(false, "", "", "");

    public ClientTls {
        if (!on && (!ca.isEmpty() || !cert.isEmpty() || !key.isEmpty())) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID, "remote.tls-ca, remote.tls-cert and remote.tls-key need remote.tls=true");
        }
        if (cert.isEmpty() != key.isEmpty()) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, "remote.tls-cert and remote.tls-key go together");
        }
    }

    /** TLS trusting the PEM authorities in {@code caFile}, without a client certificate. */
    public static ClientTls trusting(String caFile) {
        return new ClientTls(true, caFile, "", "");
    }

    /** This TLS presenting a client certificate. */
    public ClientTls withClientCertificate(String certFile, String keyFile) {
        return new ClientTls(true, ca, certFile, keyFile);
    }

    /**
     * A handler for a connection to {@code host}:{@code port}, the first of its pipeline.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} when the files do not make a TLS context
     */
    SslHandler handler(Channel ch, String host, int port) {
        SslContext context;
        try {
            SslContextBuilder b = SslContextBuilder.forClient()
                    .sslProvider(OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK)
                    .protocols("TLSv1.3", "TLSv1.2");
            if (!ca.isEmpty()) {
                b.trustManager(new File(ca));
            }
            if (!cert.isEmpty()) {
                b.keyManager(new File(cert), new File(key));
            }
            context = b.build();
        } catch (Exception e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "remote TLS files (remote.tls-ca " + ca + ", remote.tls-cert " + cert + ") do not make a TLS "
                            + "context: " + e.getMessage(),
                    e);
        }
        SslHandler handler = context.newHandler(ch.alloc(), host, port);
        SSLEngine engine = handler.engine();
        SSLParameters params = engine.getSSLParameters();
        params.setEndpointIdentificationAlgorithm("HTTPS"); // the certificate must name the host dialled
        engine.setSSLParameters(params);
        return handler;
    }
}
