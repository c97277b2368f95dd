package io.hicache.bench;

import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.awt.image.IndexColorModel;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import javax.imageio.ImageIO;

/**
 * {@code hicache bench report}: reads every {@code <suite>.json} of a results folder and draws
 * {@code <suite>.png} into a charts folder, one {@link RatioChart} panel for the rows where higher is better and one
 * below it for those where lower is. Files of another shape are named and skipped. Works without a display: it sets
 * {@code java.awt.headless} before it draws.
 *
 * <p>Stateless; two calls at once must not write the same charts folder.
 */
final class BenchCharts {
    private BenchCharts() {}

    /** Draws a chart for each report in {@code results} into {@code charts}; returns the files written. */
    static List<Path> render(Path results, Path charts, PrintStream out) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<Path> files;
        try (Stream<Path> listing = Files.list(results)) {
            files = listing.filter(f -> f.getFileName().toString().endsWith(".json"))
                    .sorted()
                    .toList();
        }
        Files.createDirectories(charts);
        List<Path> written = new ArrayList<>();
        for (Path file : files) {
            Optional<BenchReport> report = BenchJson.readIfReport(file);
            if (report.isEmpty() || report.get().rows().isEmpty()) {
                out.println("skipped " + file + ": not a bench report with rows");
                continue;
            }
            Path png = charts.resolve(report.get().suite() + ".png");
            ImageIO.write(indexed(image(report.get())), "png", png.toFile());
            out.println("wrote " + png);
            written.add(png);
        }
        return written;
    }

    /** The chart of one report: the higher-is-better panel, then the lower-is-better one, each where rows have it. */
    static BufferedImage image(BenchReport report) {
        String date = report.date().toString().substring(0, 10);
        List<BufferedImage> panels = new ArrayList<>();
        for (boolean lower : new boolean[] {false, true}) {
            List<BenchRow> rows = report.rows().stream()
                    .filter(r -> r.prefersLower() == lower)
                    .toList();
            if (!rows.isEmpty()) {
                panels.add(RatioChart.render(report.suite(), date, rows));
            }
        }
        int height = panels.stream().mapToInt(BufferedImage::getHeight).sum();
        BufferedImage image = new BufferedImage(RatioChart.WIDTH, height, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = image.createGraphics();
        try {
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, image.getWidth(), height);
            int y = 0;
            for (BufferedImage panel : panels) {
                g.drawImage(panel, 0, y, null);
                y += panel.getHeight();
            }
        } finally {
            g.dispose();
        }
        return image;
    }

    /**
     * {@code image} with a palette of its 256 commonest colours, the rest mapped to the nearest of them: charts have a
     * few flat colours plus the grey steps of smoothed text (a few more than 256), and a palette PNG is a third of the
     * size of a true-colour one.
     */
    static BufferedImage indexed(BufferedImage image) {
        int width = image.getWidth();
        int height = image.getHeight();
        int[] pixels = image.getRGB(0, 0, width, height, null, 0, width);
        Map<Integer, Integer> counts = new HashMap<>();
        for (int p : pixels) {
            counts.merge(p & 0xFFFFFF, 1, Integer::sum);
        }
        int[] palette = counts.entrySet().stream()
                .sorted(Map.Entry.<Integer, Integer>comparingByValue().reversed())
                .limit(256)
                .mapToInt(Map.Entry::getKey)
                .toArray();
        byte[] r = new byte[palette.length];
        byte[] g = new byte[palette.length];
        byte[] b = new byte[palette.length];
        Map<Integer, Integer> index = new HashMap<>();
        for (int i = 0; i < palette.length; i++) {
            r[i] = (byte) (palette[i] >> 16);
            g[i] = (byte) (palette[i] >> 8);
            b[i] = (byte) palette[i];
            index.put(palette[i], i);
        }
        int[] samples = new int[pixels.length];
        for (int i = 0; i < pixels.length; i++) {
            samples[i] = index.computeIfAbsent(pixels[i] & 0xFFFFFF, c -> nearest(c, palette));
        }
        BufferedImage out = new BufferedImage(
                width, height, BufferedImage.TYPE_BYTE_INDEXED, new IndexColorModel(8, palette.length, r, g, b));
        out.getRaster().setSamples(0, 0, width, height, 0, samples);
        return out;
    }

    private static int nearest(int colour, int[] palette) {
        int best = 0;
        long bestDistance = Long.MAX_VALUE;
        for (int i = 0; i < palette.length; i++) {
            long distance = 0;
            for (int shift = 0; shift <= 16; shift += 8) {
                long d = ((colour >> shift) & 0xFF) - ((palette[i] >> shift) & 0xFF);
                distance += d * d;
            }
            if (distance < bestDistance) {
                best = i;
                bestDistance = distance;
            }
        }
        return best;
    }
}
