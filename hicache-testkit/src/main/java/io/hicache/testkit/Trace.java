package io.hicache.testkit;

import io.hicache.core.util.Checks;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.tukaani.xz.XZInputStream;

/**
 * A request trace in Mooncake's format (FAST'25, {@code FAST25-release/traces}): one JSON object a line with
 * {@code timestamp} (ms), {@code input_length}, {@code output_length} (tokens) and {@code hash_ids}, one id per block
 * of {@link #BLOCK_TOKENS} prompt tokens, equal ids marking equal blocks (and, as ids chain, equal prefixes). The
 * Mooncake conversation trace ships in this jar ({@link #mooncakeConversation()}, Apache-2.0, its licence beside it).
 *
 * <p>Immutable.
 */
public final class Trace {
    /** Tokens per block of {@code hash_ids}. */
    public static final int BLOCK_TOKENS = 512;

    /**
     * One request.
     *
     * @param timestampMillis when it arrived, from the trace's start
     * @param inputTokens     its prompt's tokens
     * @param outputTokens    its answer's tokens
     * @param blocks          its prompt's block ids, in order
     */
    public record Request(long timestampMillis, int inputTokens, int outputTokens, int[] blocks) {
        /**
         * Prompt tokens derived from the block ids, so that equal blocks are equal runs of tokens and no two blocks
         * share a token: block {@code b}'s token {@code i} is {@code b * 512 + i}; the last block is cut at
         * {@code inputTokens} (or given whole, when the trace's length is shorter than its blocks).
         */
        public int[] tokens() {
            int n = Math.max(0, Math.min(inputTokens, blocks.length * BLOCK_TOKENS));
            if (n <= (blocks.length - 1) * BLOCK_TOKENS) {
                n = blocks.length * BLOCK_TOKENS;
            }
            int[] t = new int[n];
            for (int i = 0; i < n; i++) {
                t[i] = blocks[i / BLOCK_TOKENS] * BLOCK_TOKENS + i % BLOCK_TOKENS;
            }
            return t;
        }
    }

    private final List<Request> requests;

    private Trace(List<Request> requests) {
        this.requests = List.copyOf(requests);
    }

    /** The requests, in the trace's order. */
    public List<Request> requests() {
        return requests;
    }

    /** Blocks over all requests (a block counted each time a request has it). */
    public long blocks() {
        return requests.stream().mapToLong(r -> r.blocks().length).sum();
    }

    /** The Mooncake FAST'25 conversation trace: 12,031 requests of one hour of a production chat service. */
    public static Trace mooncakeConversation() {
        try (InputStream in = Trace.class.getResourceAsStream("traces/mooncake-conversation.jsonl.xz")) {
            Checks.requireState(in != null, "the conversation trace is missing from hicache-testkit's jar");
            return read(new XZInputStream(in));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A trace from a file: {@code .xz}-compressed or plain JSON lines. */
    public static Trace read(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            return read(file.toString().endsWith(".xz") ? new XZInputStream(in) : in);
        }
    }

    /**
     * A trace from JSON lines.
     *
     * @throws IllegalArgumentException naming the line that is not a request
     */
    public static Trace read(InputStream jsonLines) throws IOException {
        List<Request> out = new ArrayList<>();
        BufferedReader r = new BufferedReader(new InputStreamReader(jsonLines, StandardCharsets.UTF_8));
        String line;
        int number = 0;
        while ((line = r.readLine()) != null) {
            number++;
            if (line.isBlank()) {
                continue;
            }
            try {
                out.add(parse(line));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("line " + number + " is not a trace request: " + e.getMessage(), e);
            }
        }
        return new Trace(out);
    }

    private static Request parse(String line) {
        long ts = number(line, "timestamp");
        int input = (int) number(line, "input_length");
        int output = (int) number(line, "output_length");
        int open = line.indexOf('[', key(line, "hash_ids"));
        int close = line.indexOf(']', open);
        Checks.requireArgument(open > 0 && close > open, "no hash_ids list");
        String[] parts = line.substring(open + 1, close).split(",");
        int[] blocks = parts.length == 1 && parts[0].isBlank()
                ? new int[0]
                : Arrays.stream(parts).mapToInt(p -> Integer.parseInt(p.trim())).toArray();
        return new Request(ts, input, output, blocks);
    }

    private static int key(String line, String name) {
        int at = line.indexOf('"' + name + '"');
        Checks.requireArgument(at >= 0, "no \"%s\"", name);
        return at + name.length() + 2;
    }

    private static long number(String line, String name) {
        int at = line.indexOf(':', key(line, name)) + 1;
        int end = at;
        while (end < line.length() && (Character.isWhitespace(line.charAt(end)) || line.charAt(end) == '-')) {
            end++;
        }
        while (end < line.length() && Character.isDigit(line.charAt(end))) {
            end++;
        }
        return Long.parseLong(line.substring(at, end).trim());
    }
}
