package io.hicache.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.StreamWriteFeature;
import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.core.util.Separators;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectWriter;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.deser.std.StdScalarDeserializer;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.ser.std.StdScalarSerializer;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * The bench's JSON, through Jackson: {@code bench-results/<suite>.json} written from a {@link BenchReport} and read
 * back into one, and other programs' JSON output read as trees. The shape is the one the files in
 * {@code bench-results/} have always had: two-space indents, {@code "name": value}, figures rounded to six significant
 * digits and written out in full ({@code 16112300}, not {@code 1.61123E7}), a figure that is not a number as
 * {@code null} (read back as NaN), map keys sorted. Fields a file has and the report does not know are ignored.
 *
 * <p>Stateless; its mapper is configured once and safe to use from any thread.
 */
final class BenchJson {
    private static final ObjectMapper MAPPER = mapper();
    private static final ObjectWriter WRITER = MAPPER.writer(new DefaultPrettyPrinter()
            .withObjectIndenter(new DefaultIndenter("  ", "\n"))
            .withArrayIndenter(new DefaultIndenter("  ", "\n"))
            .withSeparators(Separators.createDefaultInstance().withObjectFieldValueSpacing(Separators.Spacing.AFTER)));

    private BenchJson() {}

    /** {@code report} as JSON text, ending with a newline. */
    static String write(BenchReport report) throws IOException {
        return WRITER.writeValueAsString(report) + "\n";
    }

    /** The report in {@code json}. */
    static BenchReport read(String json) throws IOException {
        return MAPPER.readValue(json, BenchReport.class);
    }

    /**
     * The report in {@code file}, or empty when the file holds JSON of another shape (no {@code suite} and
     * {@code rows}: {@code gpu_roundtrip.json}, which a Python script writes, is one).
     *
     * @throws IOException when the file cannot be read or is not JSON
     */
    static Optional<BenchReport> readIfReport(Path file) throws IOException {
        JsonNode tree = MAPPER.readTree(Files.readString(file));
        if (!tree.isObject()
                || !tree.path("suite").isTextual()
                || !tree.path("rows").isArray()) {
            return Optional.empty();
        }
        return Optional.of(MAPPER.treeToValue(tree, BenchReport.class));
    }

    /** Any JSON text as a tree, for output of other programs ({@code iperf3 -J}). */
    static JsonNode tree(String json) throws IOException {
        return MAPPER.readTree(json);
    }

    private static ObjectMapper mapper() {
        SimpleModule figures = new SimpleModule("bench-figures")
                .addSerializer(Double.class, new FigureSerializer(Double.class))
                .addSerializer(double.class, new FigureSerializer(double.class))
                .addDeserializer(double.class, new FigureDeserializer(double.class))
                .addDeserializer(Double.class, new FigureDeserializer(Double.class));
        return JsonMapper.builder()
                .addModule(new JavaTimeModule())
                .addModule(figures)
                .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
                .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS)
                .enable(StreamWriteFeature.WRITE_BIGDECIMAL_AS_PLAIN)
                .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
                .build();
    }

    /** A figure with six significant digits, written out in full; NaN and the infinities as {@code null}. */
    private static final class FigureSerializer extends StdScalarSerializer<Double> {
        private static final long serialVersionUID = 1L;

        FigureSerializer(Class<Double> type) {
            super(type);
        }

        @Override
        public void serialize(Double value, JsonGenerator gen, SerializerProvider provider) throws IOException {
            if (value.isNaN() || value.isInfinite()) {
                gen.writeNull();
            } else {
                gen.writeNumber(new BigDecimal(value).round(new MathContext(6)).stripTrailingZeros());
            }
        }
    }

    /** A figure; {@code null} (a figure that was not a number when written) reads as NaN, not 0. */
    private static final class FigureDeserializer extends StdScalarDeserializer<Double> {
        private static final long serialVersionUID = 1L;
        private final boolean primitive;

        FigureDeserializer(Class<Double> type) {
            super(type);
            this.primitive = type.isPrimitive();
        }

        @Override
        public Double deserialize(JsonParser p, DeserializationContext context) throws IOException {
            return p.getValueAsDouble();
        }

        @Override
        public @Nullable Double getNullValue(DeserializationContext context) {
            return primitive ? Double.NaN : null;
        }
    }
}
