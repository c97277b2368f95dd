package io.hicache.bench;

/**
 * One measured figure next to the reference it is compared with, both measured in the same run. Immutable.
 *
 * @param metric         what was measured, with its parameters in the name ({@code page_hash_p64})
 * @param value          the figure for HiCache's code
 * @param unit           the unit of both figures
 * @param reference      what the reference is ({@code jdk_sha256_same_bytes})
 * @param referenceValue the reference's figure
 * @param ratio          subject over reference: the median of the ratios of paired rounds where the suite
 *                       measured in rounds, else {@code value / referenceValue}
 * @param better         {@code higher} or {@code lower}: which way is better for this metric
 */
public record BenchRow(String metric, double value, String unit, String reference, double referenceValue,
        double ratio, String better) {

    /** A row for a throughput-like metric, where higher is better. */
    public static BenchRow higherIsBetter(String metric, double value, String unit, String reference,
            double referenceValue) {
        return new BenchRow(metric, value, unit, reference, referenceValue, value / referenceValue, "higher");
    }

    /** A throughput row whose ratio is the median of paired rounds' ratios. */
    static BenchRow higherIsBetter(String metric, String unit, String reference, Comparison.Result result,
            double scale) {
        return new BenchRow(metric, result.subjectPerSecond() * scale, unit, reference,
                result.referencePerSecond() * scale, result.ratio(), "higher");
    }

    /** A row for a time-like metric, where lower is better. */
    public static BenchRow lowerIsBetter(String metric, double value, String unit, String reference,
            double referenceValue) {
        return new BenchRow(metric, value, unit, reference, referenceValue, value / referenceValue, "lower");
    }
}
