package io.hicache.bench;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import org.jspecify.annotations.Nullable;

/**
 * One measured figure next to the reference it is compared with, both measured in the same run. Immutable, so safe to
 * share between threads. Written to and read from {@code bench-results/<suite>.json} by {@link BenchJson} under the
 * names below.
 *
 * @param metric         what was measured, with its parameters in the name ({@code page_hash_p64})
 * @param value          the figure for HiCache's code
 * @param unit           the unit of both figures
 * @param reference      what the reference is ({@code jdk_sha256_same_bytes})
 * @param referenceValue the reference's figure ({@code reference_value} in the JSON)
 * @param ratio          subject over reference: the median of the ratios of paired rounds where the suite
 *                       measured in rounds, else {@code value / referenceValue}
 * @param better         {@code higher} or {@code lower}: which way is better for this metric
 * @param aim            the ratio the suite aims at for this row, or {@code null} where it sets none (the JSON then
 *                       has no {@code aim} field, as every file written before aims existed)
 * @param ratioMin       the lowest ratio of a single round, where the suite reports the spread of its rounds, else
 *                       {@code null} ({@code ratio_min} in the JSON, absent when null)
 * @param ratioMax       the highest ratio of a single round, alike ({@code ratio_max})
 */
@JsonPropertyOrder({
    "metric",
    "value",
    "unit",
    "reference",
    "reference_value",
    "ratio",
    "better",
    "aim",
    "ratio_min",
    "ratio_max"
})
public record BenchRow(
        String metric,
        double value,
        String unit,
        String reference,
        @JsonProperty("reference_value") double referenceValue,
        double ratio,
        String better,
        @JsonInclude(JsonInclude.Include.NON_NULL) @Nullable Double aim,

        @JsonProperty("ratio_min") @JsonInclude(JsonInclude.Include.NON_NULL) @Nullable
        Double ratioMin,

        @JsonProperty("ratio_max") @JsonInclude(JsonInclude.Include.NON_NULL) @Nullable
        Double ratioMax) {

    /** A row without a spread. */
    public BenchRow(
            String metric,
            double value,
            String unit,
            String reference,
            double referenceValue,
            double ratio,
            String better,
            @Nullable Double aim) {
        this(metric, value, unit, reference, referenceValue, ratio, better, aim, null, null);
    }

    /** A row without an aim. */
    public BenchRow(
            String metric,
            double value,
            String unit,
            String reference,
            double referenceValue,
            double ratio,
            String better) {
        this(metric, value, unit, reference, referenceValue, ratio, better, null);
    }

    /** A row for a throughput-like metric, where higher is better. */
    public static BenchRow higherIsBetter(
            String metric, double value, String unit, String reference, double referenceValue) {
        return new BenchRow(metric, value, unit, reference, referenceValue, value / referenceValue, "higher");
    }

    /** A throughput row whose ratio is the median of paired rounds' ratios. */
    public static BenchRow higherIsBetter(
            String metric, String unit, String reference, Comparison.Result result, double scale) {
        return new BenchRow(
                metric,
                result.subjectPerSecond() * scale,
                unit,
                reference,
                result.referencePerSecond() * scale,
                result.ratio(),
                "higher");
    }

    /** A row for a time-like metric, where lower is better. */
    public static BenchRow lowerIsBetter(
            String metric, double value, String unit, String reference, double referenceValue) {
        return new BenchRow(metric, value, unit, reference, referenceValue, value / referenceValue, "lower");
    }

    /** The pages a check found with wrong bytes among those it checked (lower is better; none is the only aim). */
    public static BenchRow wrongPages(String metric, long wrong, long checked) {
        return new BenchRow(metric, wrong, "pages", "pages_checked", checked, wrong / (double) checked, "lower");
    }

    /** This row with {@code ratio} as its aim: at least it where higher is better, at most where lower is. */
    public BenchRow withAim(double ratio) {
        return new BenchRow(
                metric, value, unit, reference, referenceValue, this.ratio, better, ratio, ratioMin, ratioMax);
    }

    /** This row with the lowest and highest ratio of its single rounds. */
    public BenchRow withSpread(double lowest, double highest) {
        return new BenchRow(metric, value, unit, reference, referenceValue, ratio, better, aim, lowest, highest);
    }

    /** Whether lower ratios are better for this row ({@code better} is {@code lower}). */
    boolean prefersLower() {
        return "lower".equals(better);
    }
}
