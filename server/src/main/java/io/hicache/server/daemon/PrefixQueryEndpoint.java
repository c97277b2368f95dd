package io.hicache.server.daemon;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.storage.remote.protocol.ProtocolException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * {@code POST /v1/prefix-hits} on the metrics port: PREFIX_HITS for routers that do not speak the binary protocol
 * (docs/routing.md). The body is one JSON object: the namespace's fields ({@code model}, {@code dtype}, and optionally
 * {@code order}, {@code tp_rank}, {@code tp_size}, {@code extra}, {@code revision}, {@code quant}, {@code page_tokens},
 * {@code tenant}, {@code format}), then either {@code hashes} (SGLang page hashes as 64 hex digits, a chain from its
 * first page) or {@code tokens} (token ids, hashed here into whole pages of {@code page_tokens}), and optionally
 * {@code timeout_ms}. The answer: {@code {"pages": n, "slab": s, "l3": l, "any": a, "l3_state": "answered"}}. Errors
 * are 400 (the body), 401 (token), 403 (another tenant's namespace), 405, 413, each with {@code {"error": "..."}}.
 *
 * <p>Who may ask: a daemon with a token (auth, admin or tenant) wants it as {@code Authorization: Bearer TOKEN}; a
 * tenant's token confines the question to its own namespaces ({@link Tenants}). Thread-safe; runs on the HTTP
 * server's threads.
 */
final class PrefixQueryEndpoint implements HttpHandler {
    /** Bodies larger than this are refused: 8 MiB holds about 120,000 hashes or a million tokens. */
    static final int MAX_BODY_BYTES = 8 << 20;

    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private final ReadThrough reads;
    private final Function<@Nullable String, Optional<Tenants.Access>> authorize;

    /**
     * @param authorize the access a bearer token (null: none sent) gives, empty when it gives none
     */
    PrefixQueryEndpoint(ReadThrough reads, Function<@Nullable String, Optional<Tenants.Access>> authorize) {
        this.reads = reads;
        this.authorize = authorize;
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"POST".equals(ex.getRequestMethod())) {
                ex.getResponseHeaders().set("Allow", "POST");
                error(ex, 405, "POST a JSON object (docs/routing.md)");
                return;
            }
            String auth = ex.getRequestHeaders().getFirst("Authorization");
            String token = auth != null && auth.startsWith("Bearer ") ? auth.substring(7) : null;
            Optional<Tenants.Access> access = authorize.apply(token);
            if (access.isEmpty()) {
                error(ex, 401, token == null ? "this daemon wants Authorization: Bearer TOKEN" : "wrong token");
                return;
            }
            byte[] body;
            try (InputStream in = ex.getRequestBody()) {
                body = in.readNBytes(MAX_BODY_BYTES + 1);
            }
            if (body.length > MAX_BODY_BYTES) {
                error(ex, 413, "a body over " + MAX_BODY_BYTES + " bytes");
                return;
            }
            Query q;
            try {
                q = parse(body);
            } catch (IllegalArgumentException e) {
                error(ex, 400, String.valueOf(e.getMessage()));
                return;
            }
            Namespace ns;
            try {
                ns = access.get().confine(q.namespace);
            } catch (ProtocolException e) { // another tenant's namespace
                error(ex, 403, e.getMessage());
                return;
            } catch (IllegalArgumentException e) {
                error(ex, 400, String.valueOf(e.getMessage()));
                return;
            }
            List<StoreKey> keys = new ArrayList<>(q.hashes.size());
            for (PageHash h : q.hashes) {
                keys.add(new StoreKey(ns, h));
            }
            ReadThrough.PrefixRuns runs = keys.isEmpty()
                    ? new ReadThrough.PrefixRuns(0, 0, 0, ReadThrough.PrefixRuns.NO_L3)
                    : reads.prefixHits(keys, Deadline.after(q.timeout));
            reply(
                    ex,
                    200,
                    "{\"pages\": " + keys.size() + ", \"slab\": " + runs.slab() + ", \"l3\": " + runs.l3()
                            + ", \"any\": " + runs.any() + ", \"l3_state\": \"" + stateName(runs.l3State())
                            + "\"}\n");
        }
    }

    static String stateName(int state) {
        return switch (state) {
            case ReadThrough.PrefixRuns.NO_L3 -> "none";
            case ReadThrough.PrefixRuns.ANSWERED -> "answered";
            case ReadThrough.PrefixRuns.L3_LATE -> "late";
            default -> "failed";
        };
    }

    /** A parsed question. */
    private record Query(Namespace namespace, List<PageHash> hashes, Duration timeout) {}

    private static Query parse(byte[] body) {
        String model = null;
        String dtype = null;
        String extra = "";
        String revision = "";
        String quant = "";
        String tenant = "";
        long order = 0;
        long rank = 0;
        long size = 1;
        long pageTokens = 0;
        long format = Namespace.FORMAT_VERSION;
        long timeoutMillis = 5_000;
        List<PageHash> hashes = null;
        int[] tokens = null;
        try (JsonParser p = JSON.createParser(body)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new IllegalArgumentException("the body is not a JSON object");
            }
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String key = p.currentName();
                p.nextToken();
                switch (key) {
                    case "model" -> model = text(p, key);
                    case "dtype" -> dtype = text(p, key);
                    case "extra" -> extra = text(p, key);
                    case "revision" -> revision = text(p, key);
                    case "quant" -> quant = text(p, key);
                    case "tenant" -> tenant = text(p, key);
                    case "order" -> order = number(p, key);
                    case "tp_rank" -> rank = number(p, key);
                    case "tp_size" -> size = number(p, key);
                    case "page_tokens" -> pageTokens = number(p, key);
                    case "format" -> format = number(p, key);
                    case "timeout_ms" -> timeoutMillis = number(p, key);
                    case "hashes" -> hashes = hashes(p);
                    case "tokens" -> tokens = tokens(p);
                    default -> throw new IllegalArgumentException("unknown field \"" + key + "\" (docs/routing.md)");
                }
            }
            if (p.nextToken() != null) {
                throw new IllegalArgumentException("something after the object");
            }
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new IllegalArgumentException("unreadable body: " + e.getMessage());
        }
        if (model == null || dtype == null) {
            throw new IllegalArgumentException("\"model\" and \"dtype\" are required");
        }
        if ((hashes == null) == (tokens == null)) {
            throw new IllegalArgumentException("give either \"hashes\" or \"tokens\"");
        }
        if (order > 1
                || rank < 0
                || size < 1
                || rank >= size
                || size > 0xFFFF
                || pageTokens < 0
                || pageTokens > Namespace.MAX_PAGE_TOKENS
                || timeoutMillis < 1
                || timeoutMillis > 600_000) {
            throw new IllegalArgumentException("a field out of range (order 0-1, 0 <= tp_rank < tp_size, page_tokens"
                    + " 0-" + Namespace.MAX_PAGE_TOKENS + ", timeout_ms 1-60000)");
        }
        Namespace ns;
        try {
            ns = Namespace.builder(model)
                    .kvDtype(KvDtype.parse(dtype))
                    .pageByteOrder(order == 0 ? PageByteOrder.LAYER_MAJOR : PageByteOrder.TOKEN_MAJOR)
                    .tensorParallel((int) rank, (int) size)
                    .extraKey(extra)
                    .formatVersion((int) format)
                    .weightsRevision(revision)
                    .quantization(quant)
                    .pageTokens((int) pageTokens)
                    .tenant(tenant)
                    .build();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("bad namespace: " + e.getMessage());
        }
        if (tokens != null) {
            if (pageTokens == 0) {
                throw new IllegalArgumentException("\"tokens\" needs \"page_tokens\" (the engine's page size)");
            }
            PageHasher hasher = new PageHasher((int) pageTokens);
            hashes = (extra.isEmpty()
                            ? hasher.hashPages(tokens)
                            : hasher.hashPages(tokens, 0, tokens.length, PageHasher.extraKeyRoot(extra)))
                    .asList();
        }
        return new Query(ns, hashes == null ? List.of() : hashes, Duration.ofMillis(timeoutMillis));
    }

    private static String text(JsonParser p, String key) throws IOException {
        if (p.currentToken() != JsonToken.VALUE_STRING) {
            throw new IllegalArgumentException("\"" + key + "\" must be a string");
        }
        return p.getText();
    }

    private static long number(JsonParser p, String key) throws IOException {
        if (p.currentToken() != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
            throw new IllegalArgumentException("\"" + key + "\" must be a whole number");
        }
        return p.getLongValue();
    }

    private static List<PageHash> hashes(JsonParser p) throws IOException {
        if (p.currentToken() != JsonToken.START_ARRAY) {
            throw new IllegalArgumentException("\"hashes\" must be an array of hex strings");
        }
        List<PageHash> out = new ArrayList<>();
        while (p.nextToken() == JsonToken.VALUE_STRING) {
            try {
                out.add(PageHash.fromHex(p.getText()));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("hash " + out.size() + ": " + e.getMessage());
            }
        }
        if (p.currentToken() != JsonToken.END_ARRAY) {
            throw new IllegalArgumentException("\"hashes\" must hold strings only");
        }
        return out;
    }

    private static int[] tokens(JsonParser p) throws IOException {
        if (p.currentToken() != JsonToken.START_ARRAY) {
            throw new IllegalArgumentException("\"tokens\" must be an array of token ids");
        }
        int[] out = new int[1024];
        int n = 0;
        while (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
            long t = p.getLongValue();
            if (t < 0 || t > 0xFFFF_FFFFL) {
                throw new IllegalArgumentException("token " + n + " is not an unsigned 32-bit id");
            }
            if (n == out.length) {
                out = java.util.Arrays.copyOf(out, 2 * n);
            }
            out[n++] = (int) t;
        }
        if (p.currentToken() != JsonToken.END_ARRAY) {
            throw new IllegalArgumentException("\"tokens\" must hold whole numbers only");
        }
        return java.util.Arrays.copyOf(out, n);
    }

    private static void error(HttpExchange ex, int status, String message) throws IOException {
        reply(ex, status, "{\"error\": \"" + jsonEscape(message) + "\"}\n");
    }

    private static String jsonEscape(String s) {
        StringBuilder b = new StringBuilder(s.length() + 8);
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.toString();
    }

    private static void reply(HttpExchange ex, int status, String json) throws IOException {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }
}
