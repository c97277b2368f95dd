package io.hicache.server.daemon;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * The daemon's tenants ({@code server.tenants-file}, docs/security.md): each a name with a token (or a TLS client
 * certificate whose subject's common name is the tenant's name). A connection that authenticates as a tenant reaches
 * only that tenant's namespaces: a namespace it names with no tenant is taken as its own (the tenant is written into
 * the namespace, so its page keys are apart from everyone else's), one naming another tenant is refused (ERROR AUTH).
 * Other connections (the shared auth token, loopback without tokens) reach only namespaces of no tenant once tenants
 * exist; the admin token reaches every namespace.
 *
 * <p>The file holds one tenant a line, {@code name token}; blank lines and lines starting with {@code #} are skipped;
 * names are 1-64 characters of letters, digits, {@code .-_} ({@code default} is the Redis protocol's user of no tenant);
 * tokens 16 to 2,048 bytes, each unique and unlike the auth
 * and admin tokens. Immutable and thread-safe.
 */
final class Tenants {
    /** No tenants: every connection reaches namespaces of any tenant, as before tenants existed. */
    static final Tenants NONE = new Tenants(Map.of());

    private static final int MIN_TOKEN_BYTES = 16;

    /** Token bytes by tenant name. */
    private final Map<String, byte[]> tokens;

    private Tenants(Map<String, byte[]> tokens) {
        this.tokens = tokens;
    }

    /** Whether any tenant is configured. */
    boolean any() {
        return !tokens.isEmpty();
    }

    /** The tenants' names, sorted (for metrics and the start line). */
    Set<String> names() {
        return tokens.keySet();
    }

    /** Whether {@code name} is a tenant (a TLS client certificate's common name, say). */
    boolean has(String name) {
        return tokens.containsKey(name);
    }

    /**
     * Reads a tenants file.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the line that is wrong
     */
    static Tenants load(Path file, String authToken, String adminToken) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID, "server.tenants-file: cannot read " + file + ": " + e.getMessage());
        }
        Map<String, byte[]> out = new TreeMap<>();
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String where = "server.tenants-file " + file + " line " + (i + 1) + ": ";
            String[] parts = line.split("\\s+");
            if (parts.length != 2) {
                throw new HiCacheException(ErrorCode.CONFIG_INVALID, where + "expected `name token`");
            }
            String name = parts[0];
            String token = parts[1];
            if (!name.matches("[A-Za-z0-9._-]{1,64}")) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID, where + "a tenant's name is 1-64 letters, digits, '.', '-', '_'");
            }
            int tokenBytes = token.getBytes(StandardCharsets.UTF_8).length;
            if (tokenBytes < MIN_TOKEN_BYTES || tokenBytes > 2048) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        where + "a tenant's token is 16 to 2,048 bytes (a random one: " + "`openssl rand -hex 32`)");
            }
            if (name.equals("default")) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        where + "'default' is the Redis protocol's user of no tenant: give the tenant another name");
            }
            if (out.containsKey(name)) {
                throw new HiCacheException(ErrorCode.CONFIG_INVALID, where + "tenant " + name + " is named twice");
            }
            if (!seen.add(token) || token.equals(authToken) || token.equals(adminToken)) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID, where + "the token is another tenant's, or the auth or admin token");
            }
            out.put(name, token.getBytes(StandardCharsets.UTF_8));
        }
        return new Tenants(out);
    }

    /** The tenant whose token {@code given} is, compared in constant time for each tenant; null if none. */
    @Nullable
    String tenantOf(byte[] given) {
        String found = null;
        for (Map.Entry<String, byte[]> e : tokens.entrySet()) {
            if (MessageDigest.isEqual(given, e.getValue())) {
                found = e.getKey();
            }
        }
        return found;
    }

    /** Everything a connection (or an HTTP request) may reach. */
    Access everything() {
        return new Access(null, true);
    }

    /** What a connection that is no tenant, without admin permission, reaches. */
    Access shared() {
        return new Access(null, !any());
    }

    /** What tenant {@code name}'s connections reach. */
    static Access tenant(String name) {
        return new Access(name, false);
    }

    /**
     * What one connection may reach.
     *
     * @param tenant     the tenant it authenticated as, or null
     * @param anyTenant  whether it reaches namespaces of every tenant (admin, or a daemon without tenants)
     */
    record Access(@Nullable String tenant, boolean anyTenant) {
        /**
         * The namespace this connection means by {@code ns}: a tenant's own (its name written in where {@code ns}
         * names none), or {@code ns} itself.
         *
         * @throws ProtocolException ({@link Wire#E_AUTH}) when it names a namespace this connection may not reach
         */
        Namespace confine(Namespace ns) {
            if (tenant != null) {
                if (ns.tenant().isEmpty()) {
                    if (ns.formatVersion() < Namespace.FORMAT_VERSION) {
                        // Key format 1 predates tenants: such pages cannot be a tenant's.
                        throw refused("a namespace of key format " + ns.formatVersion() + " cannot be a tenant's");
                    }
                    return ns.toBuilder().tenant(tenant).build();
                }
                if (!ns.tenant().equals(tenant)) {
                    throw refused("this connection is tenant " + tenant + "; the namespace is another tenant's");
                }
                return ns;
            }
            if (!anyTenant && !ns.tenant().isEmpty()) {
                throw refused("a namespace of a tenant: authenticate as that tenant (server.tenants-file)");
            }
            return ns;
        }

        /** A label for metrics: the tenant's name, or {@code ""}. */
        String label() {
            return tenant == null ? "" : tenant;
        }
    }

    /** A namespace a connection may not reach: ERROR AUTH for that request; the connection stays. */
    private static ProtocolException refused(String message) {
        return new ProtocolException(Wire.E_AUTH, message);
    }

    @Override
    public String toString() {
        return new ArrayList<>(tokens.keySet()).toString();
    }
}
