package io.hicache.bench;

import java.util.List;

/**
 * A named set of measurements that {@code hicache bench <name>} runs. Suites are found with
 * {@link java.util.ServiceLoader}; each measures HiCache's code and its reference side by side in one run
 * and reports ratios, because these machines are too noisy for absolute figures taken apart.
 *
 * <p>Implementations are stateless, with a public no-argument constructor.
 */
public interface BenchSuite {
    /** The name on the command line and in {@code bench-results/<name>.json}. */
    String name();

    /** One line saying what it measures and against what. */
    String description();

    /** Runs the measurements; {@code quick} asks for a short run that only checks the suite works. */
    List<BenchRow> run(boolean quick) throws Exception;
}
