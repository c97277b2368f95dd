/**
 * Benchmark suites and the {@code hicache bench} frame: each suite measures HiCache's code and a reference side
 * by side in one run and reports ratios, as a table and as {@code bench-results/<suite>.json} (through Jackson,
 * {@link io.hicache.bench.BenchJson}); {@code hicache bench report} draws them as charts
 * ({@code BenchCharts}).
 */
package io.hicache.bench;
