package io.hicache.cluster.etcd;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * JSON as plain values, read with Jackson's streaming parser: objects as maps, arrays as lists, strings, longs,
 * doubles, booleans and null. Enough for etcd's gateway answers and the members' records. Stateless.
 */
public final class Json {
    private static final JsonFactory JSON = new JsonFactory();

    private Json() {}

    /** The value {@code text} holds; IllegalArgumentException when it is not JSON. */
    public static @Nullable Object parse(String text) {
        try (JsonParser p = JSON.createParser(text)) {
            p.nextToken();
            Object v = value(p);
            if (p.nextToken() != null) {
                throw new IllegalArgumentException("text after the JSON value");
            }
            return v;
        } catch (IOException e) {
            throw new IllegalArgumentException("not JSON: " + e.getMessage(), e);
        }
    }

    private static @Nullable Object value(JsonParser p) throws IOException {
        JsonToken t = p.currentToken();
        if (t == null) {
            throw new IOException("no value");
        }
        return switch (t) {
            case START_OBJECT -> {
                Map<String, @Nullable Object> m = new LinkedHashMap<>();
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String name = p.currentName();
                    p.nextToken();
                    m.put(name, value(p));
                }
                yield m;
            }
            case START_ARRAY -> {
                List<@Nullable Object> l = new ArrayList<>();
                while (p.nextToken() != JsonToken.END_ARRAY) {
                    l.add(value(p));
                }
                yield l;
            }
            case VALUE_STRING -> p.getText();
            case VALUE_NUMBER_INT -> p.getLongValue();
            case VALUE_NUMBER_FLOAT -> p.getDoubleValue();
            case VALUE_TRUE -> true;
            case VALUE_FALSE -> false;
            case VALUE_NULL -> null;
            default -> throw new IOException("unexpected " + t);
        };
    }

    /** A string as a JSON string literal. */
    public static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
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
        return b.append('"').toString();
    }

    /** {@code map.get(key)} as a map (empty when absent). */
    @SuppressWarnings("unchecked")
    public static Map<String, @Nullable Object> object(@Nullable Object map, String key) {
        if (map instanceof Map<?, ?> m && m.get(key) instanceof Map<?, ?> inner) {
            return (Map<String, @Nullable Object>) inner;
        }
        return Map.of();
    }

    /** {@code map.get(key)} as a list (empty when absent). */
    public static List<?> array(@Nullable Object map, String key) {
        return map instanceof Map<?, ?> m && m.get(key) instanceof List<?> l ? l : List.of();
    }

    /** {@code map.get(key)} as a long: etcd writes int64 fields as strings; absent is {@code absent}. */
    public static long number(@Nullable Object map, String key, long absent) {
        Object v = map instanceof Map<?, ?> m ? m.get(key) : null;
        if (v instanceof Long l) {
            return l;
        }
        if (v instanceof String s) {
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new UncheckedIOException(new IOException("field " + key + " is not a number: " + s));
            }
        }
        return absent;
    }

    /** {@code map.get(key)} as a string, or {@code absent}. */
    public static String string(@Nullable Object map, String key, String absent) {
        return map instanceof Map<?, ?> m && m.get(key) instanceof String s ? s : absent;
    }
}
