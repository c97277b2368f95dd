package io.hicache.bench;

import io.hicache.core.util.Checks;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.geom.Rectangle2D;
import java.util.List;
import org.knowm.xchart.internal.chartpart.Annotation;

/**
 * What {@link RatioChart} draws over XChart's layout: the grid and the ticks of the ratio axis ({@link RatioTicks}),
 * the bars from 1 to each ratio with their figures, each row's aim, the line at 1 and the headings. Rows sit where
 * XChart's horizontal bar plot puts its categories: the plot's content share of its height, centred, cut in equal steps
 * from the top. Not thread-safe: XChart paints it on the thread that renders the chart.
 */
final class RatioMarks extends Annotation {
    private static final Font FIGURE_FONT = new Font(Font.SANS_SERIF, Font.PLAIN, 12);
    private static final Font HEADING_FONT = new Font(Font.SANS_SERIF, Font.BOLD, 13);
    private static final Color GRID = new Color(0xD8D8D8);
    private static final Color REFERENCE_LINE = new Color(0x222222);
    static final Color AIM = new Color(0xD0202A);

    private final List<RatioChart.Line> lines;
    private final boolean lower;
    private final double low;
    private final double high;

    /** Marks for {@code lines}, whose rows all prefer {@code lower} ratios or not, on an axis from low to high. */
    RatioMarks(List<RatioChart.Line> lines, boolean lower, double low, double high) {
        super(false);
        this.lines = lines;
        this.lower = lower;
        this.low = low;
        this.high = high;
    }

    @Override
    public void paint(Graphics2D g) {
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_OFF);
        g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
        int top = getYAxisScreenValueForMin();
        int bottom = getYAxisScreenValueForMax();
        int left = getXAxisScreenValueForMin();
        int right = getXAxisScreenValueForMax();
        List<Double> ticks = RatioTicks.ticks(low, high, getXAxisScreenValue(high) - getXAxisScreenValue(low));
        g.setColor(GRID);
        g.setStroke(new BasicStroke(1f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {3f, 3f}, 0f));
        ticks.forEach(t -> g.drawLine(getXAxisScreenValue(t), top, getXAxisScreenValue(t), bottom));

        double height = bottom - top;
        double content = styler.getPlotContentSize() * height;
        double step = content / lines.size();
        double first = top + (height - content) / 2;
        int one = getXAxisScreenValue(1);
        g.setFont(FIGURE_FONT);
        FontMetrics metrics = g.getFontMetrics();
        for (int i = 0; i < lines.size(); i++) {
            BenchRow r = lines.get(i).row();
            if (r != null) {
                row(g, metrics, r, first + step * (i + 0.5), step, one);
            }
        }
        g.setColor(REFERENCE_LINE);
        g.setStroke(new BasicStroke(2f));
        g.drawLine(one, top, one, bottom);
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).row() == null) {
                // a line without a row is a heading's
                heading(
                        g,
                        Checks.checkNotNull(lines.get(i).heading(), "a heading line's text"),
                        left,
                        first + step * (i + 0.5));
            }
        }
        tickLabels(g, ticks, bottom);
        bounds = new Rectangle2D.Double(left, top, right - left, height);
    }

    /** The bar of one row from 1 to its ratio, its aim, and its figure beyond the bar's end, on white. */
    private void row(Graphics2D g, FontMetrics metrics, BenchRow r, double centre, double step, int one) {
        boolean bar = r.ratio() > 0 && Double.isFinite(r.ratio());
        int end = bar ? getXAxisScreenValue(r.ratio()) : one;
        if (bar) {
            double thickness = step * 0.7;
            g.setColor((r.ratio() < 1) == lower ? RatioChart.BETTER : RatioChart.WORSE);
            g.fill(new Rectangle2D.Double(Math.min(one, end), centre - thickness / 2, Math.abs(end - one), thickness));
        }
        if (r.aim() != null && r.aim() > 0) {
            int x = getXAxisScreenValue(r.aim());
            g.setColor(AIM);
            g.setStroke(new BasicStroke(3f));
            g.drawLine(x, (int) (centre - step * 0.48), x, (int) (centre + step * 0.48));
        }
        if (bar) {
            String text = RatioChart.figure(r.ratio());
            int width = metrics.stringWidth(text);
            int x = r.ratio() >= 1 ? end + 4 : end - 4 - width;
            int baseline = (int) (centre + metrics.getAscent() / 2.0 - 1);
            g.setColor(Color.WHITE);
            g.fillRect(x - 1, baseline - metrics.getAscent(), width + 2, metrics.getAscent() + metrics.getDescent());
            g.setColor(Color.BLACK);
            g.drawString(text, x, baseline);
        }
    }

    /** A heading at the plot's left edge, on white, over the grid and the line at 1. */
    private static void heading(Graphics2D g, String text, int left, double centre) {
        g.setFont(HEADING_FONT);
        FontMetrics metrics = g.getFontMetrics();
        int x = left + 6;
        int baseline = (int) (centre + metrics.getAscent() / 2.0 - 1);
        g.setColor(Color.WHITE);
        g.fillRect(x - 3, baseline - metrics.getAscent() - 1, metrics.stringWidth(text) + 6, metrics.getHeight() + 1);
        g.setColor(Color.DARK_GRAY);
        g.drawString(text, x, baseline);
    }

    /** The ticks' labels under the plot, where XChart keeps room for its own (drawn invisible). */
    private void tickLabels(Graphics2D g, List<Double> ticks, int bottom) {
        g.setFont(RatioChart.TICK_FONT);
        g.setColor(Color.BLACK);
        FontMetrics metrics = g.getFontMetrics();
        for (double t : ticks) {
            String text = RatioChart.figure(t);
            int x = getXAxisScreenValue(t);
            g.drawLine(x, bottom, x, bottom + 3);
            g.drawString(text, x - metrics.stringWidth(text) / 2, bottom + 5 + metrics.getAscent());
        }
    }
}
