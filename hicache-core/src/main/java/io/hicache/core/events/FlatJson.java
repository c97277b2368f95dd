package io.hicache.core.events;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads one flat JSON object, {@code {"key": value, ...}}, whose values are strings, whole numbers, booleans or
 * {@code null}: the shape of SGLang's {@code --kv-events-config}. Jackson's streaming parser reads the text (the core
 * takes jackson-core alone, not the object mapper); this class only says which shapes are accepted. Stateless.
 */
final class FlatJson {
    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private FlatJson() {}

    /**
     * The object's members in order; a {@code null} value is a key mapped to {@code null}; whole numbers are longs.
     *
     * @throws IllegalArgumentException saying where the text stops being such an object
     */
    static Map<String, Object> parse(String text) {
        try (JsonParser p = JSON.createParser(text)) {
            expect(p, p.nextToken() == JsonToken.START_OBJECT, "an object");
            Map<String, Object> out = new LinkedHashMap<>();
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String key = p.currentName();
                JsonToken value = p.nextToken();
                out.put(
                        key,
                        switch (value) {
                            case VALUE_STRING -> p.getText();
                            case VALUE_NUMBER_INT -> {
                                expect(
                                        p,
                                        p.getNumberType() == JsonParser.NumberType.INT
                                                || p.getNumberType() == JsonParser.NumberType.LONG,
                                        "a number that fits 64 bits");
                                yield p.getLongValue();
                            }
                            case VALUE_TRUE, VALUE_FALSE -> p.getBooleanValue();
                            case VALUE_NULL -> null;
                            default ->
                                throw error(p, "a string, a whole number, true, false or null for \"" + key + "\"");
                        });
            }
            expect(p, p.currentToken() == JsonToken.END_OBJECT, "the end of the object");
            expect(p, p.nextToken() == null, "nothing after the object");
            return out;
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(
                    "not a JSON object: " + e.getOriginalMessage() + " at character "
                            + e.getLocation().getCharOffset(),
                    e);
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a String has no I/O to fail
        }
    }

    private static void expect(JsonParser p, boolean ok, String what) {
        if (!ok) {
            throw error(p, what);
        }
    }

    private static IllegalArgumentException error(JsonParser p, String what) {
        return new IllegalArgumentException("JSON: expected " + what + " at character "
                + p.currentLocation().getCharOffset());
    }
}
