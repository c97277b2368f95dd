package io.hicache.storage.remote;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.protocol.NettyTransport;
import java.time.Duration;
import java.util.List;

/**
 * The {@code remote} store's configuration: where the daemon is and how to talk to it. Read and checked once.
 *
 * @param host           the daemon's address
 * @param port           its port
 * @param authToken      the token the daemon requires (empty when it requires none)
 * @param connections    connections kept open and used in turn; each carries many requests at once
 * @param connectTimeout the most connecting and the handshake may take
 * @param transport      Netty's socket transport ({@code auto}: epoll where it loads, NIO otherwise)
 * @param tls            TLS to the daemon, or {@link ClientTls#NONE}
 * @param putUnchecked   PUTs flagged {@code UNCHECKED}: the daemon stores each page with the checksum this store
 *                       computed, without checking the bytes it received (docs/protocol.md §3 PUT)
 */
public record RemoteStoreConfig(
        String host,
        int port,
        String authToken,
        int connections,
        Duration connectTimeout,
        NettyTransport transport,
        ClientTls tls,
        boolean putUnchecked) {
    public static final Setting<String> HOST = Setting.string("remote.host", "127.0.0.1", "the daemon's address");
    public static final Setting<Integer> PORT = Setting.integer("remote.port", 7370, 1, 65535, "the daemon's port");
    public static final Setting<String> AUTH_TOKEN =
            Setting.string("remote.auth-token", "", "the token the daemon requires (its server.auth-token)");
    public static final Setting<Integer> CONNECTIONS = Setting.integer(
            "remote.connections",
            4,
            1,
            256,
            "connections kept open and used in turn; each carries many requests at once");
    public static final Setting<Duration> CONNECT_TIMEOUT =
            Setting.duration("remote.connect-timeout", "5s", "the most connecting and the handshake may take");

    public static final Setting<NettyTransport> TRANSPORT = Setting.choice(
            "remote.transport",
            NettyTransport.class,
            NettyTransport::configName,
            NettyTransport.AUTO,
            "Netty's socket transport: auto (epoll where its native library loads, nio otherwise), nio or epoll");

    /** Every setting read here. */
    public static final Setting<Boolean> TLS =
            Setting.bool("remote.tls", false, "speak TLS to the daemon (its server.tls-cert; docs/security.md)");

    public static final Setting<String> TLS_CA = Setting.string(
            "remote.tls-ca", "", "PEM authorities the daemon's certificate must chain to (empty: the JDK's)");
    public static final Setting<String> TLS_CERT = Setting.string(
            "remote.tls-cert",
            "",
            "a PEM client certificate chain, for a daemon that asks for one (server.tls-client-ca)");
    public static final Setting<String> TLS_KEY =
            Setting.string("remote.tls-key", "", "the PEM (PKCS#8) key of remote.tls-cert");

    public static final Setting<Boolean> PUT_UNCHECKED = Setting.bool(
            "remote.put-unchecked",
            false,
            "the daemon stores put pages with this store's CRC-32C without checking their bytes, which saves its CPU; a"
                    + " page damaged on the way is caught when read (docs/protocol.md section 3, PUT)");

    public static final List<Setting<?>> SETTINGS = List.of(
            HOST,
            PORT,
            AUTH_TOKEN,
            CONNECTIONS,
            CONNECT_TIMEOUT,
            TRANSPORT,
            TLS,
            TLS_CA,
            TLS_CERT,
            TLS_KEY,
            PUT_UNCHECKED);

    public RemoteStoreConfig {
        Checks.requireArgument(host != null && !host.isBlank(), "remote.host must be set");
        Checks.checkPositive(connections, "connections");
        Checks.checkNotNull(transport, "transport");
        Checks.checkNotNull(tls, "tls");
    }

    /** A plaintext configuration whose PUTs the daemon checks. */
    public RemoteStoreConfig(
            String host,
            int port,
            String authToken,
            int connections,
            Duration connectTimeout,
            NettyTransport transport) {
        this(host, port, authToken, connections, connectTimeout, transport, ClientTls.NONE, false);
    }

    /** A configuration on the {@code auto} transport. */
    public RemoteStoreConfig(String host, int port, String authToken, int connections, Duration connectTimeout) {
        this(host, port, authToken, connections, connectTimeout, NettyTransport.AUTO);
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static RemoteStoreConfig from(Settings settings) {
        return settings.read(s -> {
            return new RemoteStoreConfig(
                    s.get(HOST).trim(),
                    s.get(PORT),
                    s.get(AUTH_TOKEN),
                    s.get(CONNECTIONS),
                    s.get(CONNECT_TIMEOUT),
                    s.get(TRANSPORT),
                    new ClientTls(
                            s.get(TLS),
                            s.get(TLS_CA).trim(),
                            s.get(TLS_CERT).trim(),
                            s.get(TLS_KEY).trim()),
                    s.get(PUT_UNCHECKED));
        });
    }

    /** A store on the daemon at 127.0.0.1:{@code port}, with the defaults otherwise: for tests. */
    public static RemoteStoreConfig local(int port, String authToken) {
        return new RemoteStoreConfig("127.0.0.1", port, authToken, 4, Duration.ofSeconds(5));
    }

    /** This configuration on {@code transport}. */
    public RemoteStoreConfig withTransport(NettyTransport transport) {
        return new RemoteStoreConfig(host, port, authToken, connections, connectTimeout, transport, tls, putUnchecked);
    }

    /** This configuration speaking {@code tls}. */
    public RemoteStoreConfig withTls(ClientTls tls) {
        return new RemoteStoreConfig(host, port, authToken, connections, connectTimeout, transport, tls, putUnchecked);
    }

    /** This configuration with PUTs flagged {@code UNCHECKED} or not. */
    public RemoteStoreConfig withPutUnchecked(boolean putUnchecked) {
        return new RemoteStoreConfig(host, port, authToken, connections, connectTimeout, transport, tls, putUnchecked);
    }
}
