package io.hicache.bench;

import java.awt.Color;
import java.awt.Font;
import java.awt.image.BufferedImage;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.HorizontalBarChart;
import org.knowm.xchart.style.AxesChartStyler;
import org.knowm.xchart.style.HorizontalBarStyler;

/**
 * One panel of a suite's chart: the ratios of the rows that agree on which way is better, as horizontal bars on a log
 * scale that start at 1 (the reference), so that 0.5 and 2 stand as far from the reference as each other. Bars better
 * than the reference are blue, worse ones orange; a black line marks 1, a red mark on a row its aim where the row
 * records one. The title says which way is better. Each row's label names its reference
 * ({@code python_tcp_get_1m vs java_remote_get}); where such labels would be too long, rows are grouped under a heading
 * per reference instead ({@code vs contiguous_pinned_copy}). A ratio that is not positive has no bar on a log scale:
 * its label says so.
 *
 * <p>XChart lays the panel out (title, row labels, the log axis) from an invisible series; {@link RatioMarks} draws the
 * grid, the bars, their figures and the marks over it. Stateless: threads may draw panels at once, each its own; the
 * images belong to the caller. Needs a headless-capable AWT ({@link BenchCharts} sets it).
 */
final class RatioChart {
    static final int WIDTH = 1000;
    static final int ROW_PIXELS = 24;
    static final int FRAME_PIXELS = 140;
    static final Color BETTER = new Color(0x2F6FD0);
    static final Color WORSE = new Color(0xE08A2E);
    static final Font TICK_FONT = new Font(Font.SANS_SERIF, Font.PLAIN, 13);
    private static final int INLINE_LABEL_CHARS = 60;
    private static final Font TITLE_FONT = new Font(Font.SANS_SERIF, Font.BOLD, 15);
    private static final Color INVISIBLE = new Color(0, 0, 0, 0);

    private RatioChart() {}

    /**
     * One row of the panel: the label XChart writes, and the row it shows, or for a heading the heading's text (drawn
     * by {@link RatioMarks} in the plot, XChart's label being blank).
     */
    record Line(
            String label, @Nullable BenchRow row, @Nullable String heading) {}

    /** The panel for {@code rows} of {@code suite}, all with the same {@code better}, as an image. */
    static BufferedImage render(String suite, String date, List<BenchRow> rows) {
        boolean lower = rows.getFirst().prefersLower();
        List<Line> lines = layout(rows);
        HorizontalBarChart chart = new HorizontalBarChart(WIDTH, FRAME_PIXELS + ROW_PIXELS * lines.size());
        chart.setTitle(suite + ", " + date + ": " + (lower ? "lower" : "higher") + " is better");
        boolean aims = rows.stream().anyMatch(r -> r.aim() != null);
        chart.setXAxisTitle("ratio to the reference (log scale) \u00b7 blue: better \u00b7 orange: worse"
                + (aims ? " \u00b7 red: aim" : ""));
        double[] range = range(rows);
        style(chart.getStyler(), range);
        // Invisible bars of a value inside the range: XChart lays out the rows from them and draws none.
        chart.addSeries(
                "ratio",
                lines.stream().map(l -> Math.sqrt(range[0] * range[1])).toList(),
                lines.stream().map(Line::label).toList());
        chart.addAnnotation(new RatioMarks(lines, lower, range[0], range[1]));
        return BitmapEncoder.getBufferedImage(chart);
    }

    /** The rows' labels, with the reference in each, or under a heading per reference where that is too long. */
    private static List<Line> layout(List<BenchRow> rows) {
        List<Line> lines = new ArrayList<>();
        if (rows.stream().allMatch(r -> (r.metric() + " vs " + r.reference()).length() <= INLINE_LABEL_CHARS)) {
            rows.forEach(r -> lines.add(new Line(r.metric() + " vs " + r.reference() + suffix(r), r, null)));
            return lines;
        }
        Map<String, List<BenchRow>> byReference = new LinkedHashMap<>();
        rows.forEach(r -> byReference
                .computeIfAbsent(r.reference(), k -> new ArrayList<>())
                .add(r));
        byReference.forEach((reference, group) -> {
            // Blank, and unlike every other label: XChart drops empty labels and merges equal ones.
            lines.add(new Line(" ".repeat(lines.size() + 1), null, "vs " + reference));
            group.forEach(r -> lines.add(new Line(r.metric() + suffix(r), r, null)));
        });
        return lines;
    }

    /** The aim (at least it where higher is better, at most where lower is: the panel's title says which). */
    private static String suffix(BenchRow r) {
        String aim = r.aim() == null ? "" : " (aim " + figure(r.aim()) + ")";
        return aim + (hasBar(r) ? "" : " (ratio " + figure(r.ratio()) + ": no bar)");
    }

    private static boolean hasBar(BenchRow r) {
        return r.ratio() > 0 && Double.isFinite(r.ratio());
    }

    /** The axis range: 1, every ratio and aim, at least 0.8 to 1.25, and room beyond the bars for their figures. */
    private static double[] range(List<BenchRow> rows) {
        double min = 0;
        double max = 0;
        for (BenchRow r : rows) {
            for (Double v : new Double[] {hasBar(r) ? r.ratio() : null, r.aim()}) {
                if (v != null && v > 0 && Double.isFinite(v)) {
                    min = Math.min(min, Math.log10(v));
                    max = Math.max(max, Math.log10(v));
                }
            }
        }
        double pad = 0.18 * (max - min) + 0.03;
        return new double[] {
            Math.pow(10, Math.min(min - pad, -Math.log10(1.25))), Math.pow(10, Math.max(max + pad, Math.log10(1.25)))
        };
    }

    private static void style(HorizontalBarStyler styler, double[] range) {
        styler.setLegendVisible(false);
        styler.setChartBackgroundColor(Color.WHITE);
        styler.setPlotBackgroundColor(Color.WHITE);
        styler.setPlotBorderVisible(false);
        styler.setChartTitleFont(TITLE_FONT);
        styler.setChartTitleBoxVisible(false);
        styler.setAxisTitleFont(TICK_FONT);
        styler.setAxisTickLabelsFont(TICK_FONT);
        styler.setYAxisTitleVisible(false);
        styler.setYAxisLabelAlignment(AxesChartStyler.TextAlignment.Right);
        styler.setPlotGridHorizontalLinesVisible(false);
        // Narrow margins in the plot: XChart's default leaves 4% of a tall panel's height empty above and below.
        styler.setPlotContentSize(0.96);
        styler.setSeriesColors(new Color[] {INVISIBLE});
        // Every row keeps its label: XChart thins category labels below this spacing, and would with long ones.
        styler.setXAxisMaxLabelCount(Integer.MAX_VALUE);
        styler.setXAxisLogarithmic(true);
        styler.setXAxisLogarithmicDecadeOnly(false);
        styler.setXAxisMin(range[0]);
        styler.setXAxisMax(range[1]);
        // RatioMarks draws the grid, the tick marks and their labels: XChart's take the room, unseen.
        styler.setPlotGridVerticalLinesVisible(false);
        styler.setAxisTicksMarksVisible(false);
        styler.setXAxisTickLabelsColor(INVISIBLE);
        styler.setXAxisTickLabelsFormattingFunction(v -> "1");
    }

    /** {@code v} with three significant digits, written out in full. */
    static String figure(double v) {
        if (v == 0 || !Double.isFinite(v)) {
            return v == 0 ? "0" : Double.toString(v);
        }
        return new BigDecimal(v).round(new MathContext(3)).stripTrailingZeros().toPlainString();
    }
}
