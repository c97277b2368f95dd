package io.hicache.core.events;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads one flat JSON object, {@code {"key": value, ...}}, whose values are strings, integers, booleans or
 * {@code null}: the shape of SGLang's {@code --kv-events-config}. No nesting, no fractions. Stateless.
 */
final class FlatJson {
    private final String text;
    private int at;

    private FlatJson(String text) {
        this.text = text;
    }

    /**
     * The object's members in order; a {@code null} value is a key mapped to {@code null}.
     *
     * @throws IllegalArgumentException saying where the text stops being such an object
     */
    static Map<String, Object> parse(String text) {
        FlatJson p = new FlatJson(text);
        Map<String, Object> out = new LinkedHashMap<>();
        p.expect('{');
        if (!p.peek('}')) {
            do {
                String key = p.string();
                p.expect(':');
                if (out.containsKey(key)) {
                    throw p.error("\"" + key + "\" appears twice");
                }
                out.put(key, p.value());
            } while (p.accept(','));
        }
        p.expect('}');
        p.skipSpace();
        if (p.at != text.length()) {
            throw p.error("text after the object");
        }
        return out;
    }

    private Object value() {
        skipSpace();
        if (peek('"')) {
            return string();
        }
        for (String word : new String[] {"null", "true", "false"}) {
            if (text.startsWith(word, at)) {
                at += word.length();
                return word.equals("null") ? null : Boolean.valueOf(word);
            }
        }
        int start = at;
        if (at < text.length() && text.charAt(at) == '-') {
            at++;
        }
        while (at < text.length() && Character.isDigit(text.charAt(at))) {
            at++;
        }
        if (at == start || text.substring(start, at).equals("-")) {
            throw error("a string, a whole number, true, false or null");
        }
        try {
            return Long.parseLong(text.substring(start, at));
        } catch (NumberFormatException e) {
            throw error("a number that fits 64 bits");
        }
    }

    private String string() {
        expect('"');
        StringBuilder s = new StringBuilder();
        while (at < text.length() && text.charAt(at) != '"') {
            char c = text.charAt(at++);
            if (c == '\\' && at < text.length()) {
                char e = text.charAt(at++);
                switch (e) {
                    case '"', '\\', '/' -> s.append(e);
                    case 'n' -> s.append('\n');
                    case 't' -> s.append('\t');
                    case 'u' -> {
                        if (at + 4 > text.length()) {
                            throw error("four hex digits");
                        }
                        s.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                    }
                    default -> throw error("a known escape");
                }
            } else {
                s.append(c);
            }
        }
        expect('"');
        return s.toString();
    }

    private void skipSpace() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private boolean peek(char c) {
        skipSpace();
        return at < text.length() && text.charAt(at) == c;
    }

    private boolean accept(char c) {
        if (peek(c)) {
            at++;
            return true;
        }
        return false;
    }

    private void expect(char c) {
        if (!accept(c)) {
            throw error("'" + c + "'");
        }
    }

    private IllegalArgumentException error(String expected) {
        return new IllegalArgumentException("not a flat JSON object: expected " + expected + " at character " + at
                + " of " + text);
    }
}
