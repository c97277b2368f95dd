package io.hicache.cluster.etcd;

import io.hicache.core.util.Checks;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * etcd's v3 API through its JSON gateway ({@code POST /v3/kv/put}, {@code /v3/kv/range}, {@code /v3/lease/grant},
 * {@code /v3/lease/keepalive}, {@code /v3/lease/revoke}, {@code /v3/watch}: the same RPCs as its gRPC API, in JSON),
 * over the JDK's HTTP client: no gRPC stack (jetcd brings gRPC, Vert.x and a Netty 4.1 that the daemon's Netty 4.2
 * would replace). Keys and values travel base64-encoded, as the gateway wants. Several endpoints: a call tries the one
 * that answered last, then the others.
 *
 * <p>Thread-safe. {@link #close()} stops the HTTP client; a watch in progress ends.
 */
public final class EtcdGateway implements AutoCloseable {
    /** One key's value and the revision it was last changed at. */
    public record KeyValue(String key, byte[] value, long modRevision) {}

    /** What a range read found, and the store's revision then. */
    public record Range(List<KeyValue> kvs, long revision) {}

    /** etcd could not be reached or refused the call; {@link #getMessage()} says which and why. */
    public static final class EtcdException extends IOException {
        private static final long serialVersionUID = 1L;

        public EtcdException(String message, @Nullable Throwable cause) {
            super(message, cause);
        }
    }

    private final List<URI> endpoints;
    private final Duration timeout;
    private final HttpClient http;
    private volatile int preferred;

    /**
     * A gateway to {@code endpoints} ({@code http://host:port}), each call bounded by {@code timeout}.
     *
     * @throws IllegalArgumentException for no endpoint, or one that is not an http URL
     */
    public EtcdGateway(List<URI> endpoints, Duration timeout) {
        Checks.checkNotNull(endpoints, "endpoints");
        Checks.requireArgument(!endpoints.isEmpty(), "no etcd endpoint given");
        for (URI u : endpoints) {
            Checks.requireArgument(
                    "http".equals(u.getScheme()) && u.getHost() != null && u.getPort() > 0,
                    "an etcd endpoint is http://host:port, was %s",
                    u);
        }
        this.endpoints = List.copyOf(endpoints);
        this.timeout = Checks.checkNotNull(timeout, "timeout");
        this.http = HttpClient.newBuilder()
                .connectTimeout(timeout)
                .version(HttpClient.Version.HTTP_1_1)
                .build();
    }

    /** Parses {@code http://h:p,http://h2:p2} (a scheme may be left out). */
    public static List<URI> endpoints(String text) {
        List<URI> out = new ArrayList<>();
        for (String part : text.split(",")) {
            String t = part.trim();
            if (!t.isEmpty()) {
                out.add(URI.create(t.contains("://") ? t : "http://" + t));
            }
        }
        Checks.requireArgument(!out.isEmpty(), "no etcd endpoint in '%s'", text);
        return out;
    }

    /** The endpoints, for logs. */
    public List<URI> endpoints() {
        return endpoints;
    }

    /** Grants a lease of {@code ttlSeconds}; returns its id. */
    public long grant(long ttlSeconds) throws EtcdException {
        Object r = call("/v3/lease/grant", "{\"TTL\":" + ttlSeconds + "}");
        long id = Json.number(r, "ID", 0);
        if (id == 0) {
            throw new EtcdException("etcd granted no lease: " + Json.string(r, "error", "no ID in the answer"), null);
        }
        return id;
    }

    /** Renews a lease once; returns the seconds it has left, 0 or less when it is gone (expired or revoked). */
    public long keepAlive(long leaseId) throws EtcdException {
        Object r = call("/v3/lease/keepalive", "{\"ID\":" + leaseId + "}");
        return Json.number(Json.object(r, "result"), "TTL", 0);
    }

    /** Revokes a lease: the keys put under it go at once. */
    public void revoke(long leaseId) throws EtcdException {
        call("/v3/lease/revoke", "{\"ID\":" + leaseId + "}");
    }

    /** Puts {@code key} (under {@code leaseId}, 0 for none). Returns the revision of the put. */
    public long put(String key, byte[] value, long leaseId) throws EtcdException {
        String body = "{\"key\":" + Json.quote(b64(key)) + ",\"value\":" + Json.quote(b64(value))
                + (leaseId != 0 ? ",\"lease\":" + leaseId : "") + "}";
        return Json.number(Json.object(call("/v3/kv/put", body), "header"), "revision", 0);
    }

    /** Deletes {@code key}. */
    public void delete(String key) throws EtcdException {
        call("/v3/kv/deleterange", "{\"key\":" + Json.quote(b64(key)) + "}");
    }

    /** Every key under {@code prefix}, in key order. */
    public Range range(String prefix) throws EtcdException {
        Object r = call(
                "/v3/kv/range",
                "{\"key\":" + Json.quote(b64(prefix)) + ",\"range_end\":" + Json.quote(b64(prefixEnd(prefix))) + "}");
        List<KeyValue> kvs = new ArrayList<>();
        for (Object kv : Json.array(r, "kvs")) {
            kvs.add(keyValue(kv));
        }
        return new Range(kvs, Json.number(Json.object(r, "header"), "revision", 0));
    }

    /**
     * Watches {@code prefix} from {@code fromRevision}: calls {@code onChange} with the revision of each batch of
     * changes as it arrives, until the stream ends (etcd gone, {@link #close()}) or the thread is interrupted. Blocks
     * the calling thread for as long; returns normally when the stream ends.
     */
    public void watch(String prefix, long fromRevision, Consumer<Long> onChange) throws EtcdException {
        String body = "{\"create_request\":{\"key\":" + Json.quote(b64(prefix)) + ",\"range_end\":"
                + Json.quote(b64(prefixEnd(prefix))) + ",\"start_revision\":" + fromRevision + "}}";
        EtcdException last = null;
        for (URI endpoint : order()) {
            HttpRequest req = HttpRequest.newBuilder(endpoint.resolve("/v3/watch"))
                    .POST(HttpRequest.BodyPublishers.ofString(body))
                    .build(); // no timeout: the stream lasts as long as the watch
            HttpResponse<Stream<String>> resp;
            try {
                resp = http.send(req, HttpResponse.BodyHandlers.ofLines());
            } catch (IOException e) {
                last = new EtcdException("etcd at " + endpoint + " did not take the watch: " + e, e);
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (resp.statusCode() != 200) {
                last = new EtcdException("etcd at " + endpoint + " answered the watch with " + resp.statusCode(), null);
                continue;
            }
            try (Stream<String> lines = resp.body()) {
                lines.forEach(line -> {
                    if (Thread.currentThread().isInterrupted()) {
                        throw new StopWatch();
                    }
                    Object msg = Json.parse(line);
                    Map<String, @Nullable Object> result = Json.object(msg, "result");
                    if (!Json.array(result, "events").isEmpty()) {
                        onChange.accept(Json.number(Json.object(result, "header"), "revision", 0));
                    }
                });
            } catch (StopWatch e) {
                return;
            } catch (RuntimeException e) { // the stream broke (etcd stopped): the caller watches again
                throw new EtcdException("the watch on etcd at " + endpoint + " ended: " + e, e);
            }
            return;
        }
        throw Checks.checkNotNull(last, "a failure");
    }

    private static final class StopWatch extends RuntimeException {
        private static final long serialVersionUID = 1L;

        StopWatch() {
            super(null, null, false, false);
        }
    }

    @Override
    public void close() {
        http.shutdownNow();
    }

    /** One unary call, trying the endpoints in order; its parsed answer. */
    private @Nullable Object call(String path, String body) throws EtcdException {
        EtcdException last = null;
        for (URI endpoint : order()) {
            HttpRequest req = HttpRequest.newBuilder(endpoint.resolve(path))
                    .timeout(timeout)
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body))
                    .build();
            try {
                HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
                Object parsed = Json.parse(resp.body());
                if (resp.statusCode() != 200) {
                    // an answer: etcd refused the call (a lease not found...); another endpoint would say the same
                    throw new EtcdException(
                            "etcd at " + endpoint + " refused " + path + ": " + resp.statusCode() + " "
                                    + Json.string(parsed, "message", Json.string(parsed, "error", resp.body())),
                            null);
                }
                preferred = endpoints.indexOf(endpoint);
                return parsed;
            } catch (ConnectException | HttpTimeoutException e) {
                last = new EtcdException("etcd at " + endpoint + " did not answer " + path + ": " + e, e);
            } catch (IOException e) {
                if (e instanceof EtcdException x) {
                    throw x;
                }
                last = new EtcdException("etcd at " + endpoint + " failed " + path + ": " + e, e);
            } catch (IllegalArgumentException e) {
                last = new EtcdException("etcd at " + endpoint + " answered " + path + " with no JSON", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new EtcdException("interrupted calling etcd", e);
            }
        }
        throw Checks.checkNotNull(last, "a failure");
    }

    private List<URI> order() {
        int first = preferred;
        List<URI> out = new ArrayList<>(endpoints.size());
        for (int i = 0; i < endpoints.size(); i++) {
            out.add(endpoints.get((first + i) % endpoints.size()));
        }
        return out;
    }

    private static KeyValue keyValue(@Nullable Object kv) {
        Base64.Decoder d = Base64.getDecoder();
        String key = new String(d.decode(Json.string(kv, "key", "")), StandardCharsets.UTF_8);
        byte[] value = d.decode(Json.string(kv, "value", ""));
        return new KeyValue(key, value, Json.number(kv, "mod_revision", 0));
    }

    private static String b64(String s) {
        return b64(s.getBytes(StandardCharsets.UTF_8));
    }

    private static String b64(byte[] b) {
        return Base64.getEncoder().encodeToString(b);
    }

    /** The key just past every key starting with {@code prefix}: etcd's range end for a prefix. */
    static byte[] prefixEnd(String prefix) {
        byte[] b = prefix.getBytes(StandardCharsets.UTF_8);
        for (int i = b.length - 1; i >= 0; i--) {
            if (b[i] != (byte) 0xFF) {
                b[i]++;
                return java.util.Arrays.copyOf(b, i + 1);
            }
        }
        return new byte[] {0}; // every key
    }
}
