package io.hicache.storage.crypt;

import io.hicache.core.util.Checks;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The keys of an encrypted store: every key it can read with, by id, the one it writes with (the active key), and
 * optionally a key per tenant. Read once, when the store opens, from text in this syntax (a key file, or the value of
 * an environment variable):
 *
 * <pre>
 * # comments and blank lines are ignored; entries are one per line, or separated by ';'
 * k2026b  3q2+7w...base64 of 32 random bytes...=
 * k2026a  Zm9v...=                 older key: pages sealed under it stay readable
 * tenant:acme  k-acme               pages of namespaces whose tenant is "acme" are sealed under key k-acme
 * k-acme  YmFy...=
 * </pre>
 *
 * Key ids are 1 to 16 of letters, digits, {@code .}, {@code _} and {@code -}; keys are standard base64 of exactly 32
 * bytes (AES-256). A tenant name is the text between {@code tenant:} and the last word of the line, which names a key
 * of the file. Rotation: add the new key, make it active, keep the old one as long as its pages should stay readable;
 * removing a key makes its pages misses.
 *
 * <p>Immutable and thread-safe. Error messages name lines, never key material.
 */
public final class KeyRing {
    private static final String TENANT_PREFIX = "tenant:";

    private final Map<String, PageKey> keys;
    private final PageKey active;
    private final Map<String, PageKey> byTenant;

    private KeyRing(Map<String, PageKey> keys, PageKey active, Map<String, PageKey> byTenant) {
        this.keys = keys;
        this.active = active;
        this.byTenant = byTenant;
    }

    /**
     * Reads the keys in {@code text}.
     *
     * @param origin      where the text came from, for messages ({@code key file /etc/hicache/keys})
     * @param activeKeyId the id of the key to write with; null when the text holds exactly one key
     * @throws IllegalArgumentException naming the origin and line of the first problem, or what is missing
     */
    public static KeyRing parse(String text, String origin, @Nullable String activeKeyId) {
        Checks.checkNotNull(text, "text");
        Checks.checkNotNull(origin, "origin");
        Map<String, PageKey> keys = new LinkedHashMap<>();
        Map<String, String> tenantIds = new LinkedHashMap<>();
        Map<String, Integer> tenantLines = new LinkedHashMap<>();
        String[] lines = text.split("\\R", -1);
        for (int n = 0; n < lines.length; n++) {
            String line = lines[n];
            int comment = line.indexOf('#');
            String content = comment >= 0 ? line.substring(0, comment) : line;
            for (String entry : content.split(";", -1)) {
                String e = entry.strip();
                if (e.isEmpty()) {
                    continue;
                }
                String where = "line " + (n + 1) + " of " + origin;
                int lastSpace = lastWhitespace(e);
                Checks.requireArgument(
                        lastSpace > 0, "%s: expected 'KEY_ID BASE64_KEY' or 'tenant:NAME KEY_ID'", where);
                String first = e.substring(0, lastSpace).strip();
                String last = e.substring(lastSpace + 1).strip();
                if (first.startsWith(TENANT_PREFIX)) {
                    String tenant = first.substring(TENANT_PREFIX.length()).strip();
                    Checks.requireArgument(!tenant.isEmpty(), "%s: 'tenant:' names no tenant", where);
                    Checks.requireArgument(
                            tenantIds.putIfAbsent(tenant, last) == null,
                            "%s: tenant '%s' is mapped twice",
                            where,
                            tenant);
                    tenantLines.put(tenant, n + 1);
                    continue;
                }
                Checks.requireArgument(
                        SealedPageDescriptor.KEY_ID.matcher(first).matches(),
                        "%s: '%s' is not a key id (1 to 16 of letters, digits, '.', '_' and '-')",
                        where,
                        first);
                Checks.requireArgument(!keys.containsKey(first), "%s: key id '%s' appears twice", where, first);
                byte[] material = decode(last, first, where);
                try {
                    keys.put(first, new PageKey(first, material));
                } finally {
                    Arrays.fill(material, (byte) 0); // the key object holds its own copy
                }
            }
        }
        Checks.requireArgument(!keys.isEmpty(), "%s holds no key", origin);
        Map<String, PageKey> byTenant = new LinkedHashMap<>();
        tenantIds.forEach((tenant, id) -> {
            PageKey key = keys.get(id);
            Checks.requireArgument(
                    key != null,
                    "line %d of %s: tenant '%s' is mapped to key '%s', which is not in it",
                    tenantLines.get(tenant),
                    origin,
                    tenant,
                    id);
            byTenant.put(tenant, key);
        });
        PageKey active;
        if (activeKeyId == null || activeKeyId.isBlank()) {
            Checks.requireArgument(
                    keys.size() == 1,
                    "%s holds %d keys (%s): name the one to write with in encrypted.active-key",
                    origin,
                    keys.size(),
                    String.join(", ", keys.keySet()));
            active = keys.values().iterator().next();
        } else {
            PageKey named = keys.get(activeKeyId.strip());
            Checks.requireArgument(
                    named != null,
                    "the active key '%s' is not in %s (it holds %s)",
                    activeKeyId.strip(),
                    origin,
                    String.join(", ", keys.keySet()));
            active = named;
        }
        return new KeyRing(Collections.unmodifiableMap(keys), active, Collections.unmodifiableMap(byTenant));
    }

    private static int lastWhitespace(String s) {
        for (int i = s.length() - 1; i >= 0; i--) {
            if (Character.isWhitespace(s.charAt(i))) {
                return i;
            }
        }
        return -1;
    }

    /** The key's bytes; the caller zeroes them once used. */
    private static byte[] decode(String base64, String id, String where) {
        byte[] material;
        try {
            material = Base64.getDecoder().decode(base64);
        } catch (IllegalArgumentException e) {
            // The decoder's message may quote the text: it is not passed on.
            throw new IllegalArgumentException(where + ": key '" + id + "' is not standard base64");
        }
        if (material.length != PageKey.KEY_BYTES) {
            int length = material.length;
            Arrays.fill(material, (byte) 0);
            throw new IllegalArgumentException(where + ": key '" + id + "' is " + length + " bytes: an AES-256 key is "
                    + PageKey.KEY_BYTES + " bytes (base64 of 32 random bytes: 'head -c 32 /dev/urandom | base64')");
        }
        return material;
    }

    /** The id of the key new pages are sealed under (unless their tenant has a key of its own). */
    public String activeKeyId() {
        return active.id();
    }

    /** Every key id, in the order of the text. */
    public Set<String> keyIds() {
        return keys.keySet();
    }

    /** The tenants that have a key of their own, each with its key's id. */
    public Map<String, String> tenantKeyIds() {
        Map<String, String> ids = new LinkedHashMap<>();
        byTenant.forEach((tenant, key) -> ids.put(tenant, key.id()));
        return Collections.unmodifiableMap(ids);
    }

    /** The key a page of {@code tenant} ({@code ""}: the default tenant) is sealed under. */
    PageKey forWrite(String tenant) {
        if (byTenant.isEmpty()) {
            return active;
        }
        return byTenant.getOrDefault(tenant, active);
    }

    /** The key named {@code id}, if this ring holds it. */
    Optional<PageKey> find(String id) {
        return Optional.ofNullable(keys.get(id));
    }

    @Override
    public String toString() {
        return "KeyRing[keys " + String.join(", ", keys.keySet()) + ", active " + active.id()
                + (byTenant.isEmpty() ? "" : ", tenants " + tenantKeyIds()) + "]";
    }
}
