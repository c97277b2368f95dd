package io.hicache.testkit;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

/**
 * Runs a conformance kit class outside a build tool, through the JUnit Platform launcher, and reports every
 * case. The command line's {@code conformance} uses it, and so do the tests that show the kit catches broken
 * stores. Stateless and thread-safe: each call builds its own launcher.
 */
public final class ConformanceRunner {
    private ConformanceRunner() {}

    /** Runs every case of {@code kitClass} and reports them under the name {@code target}. */
    public static ConformanceReport run(Class<?> kitClass, String target) {
        return run(kitClass, target, c -> {});
    }

    /** As {@link #run(Class, String)}, telling {@code progress} of each case as it ends (on the running thread). */
    public static ConformanceReport run(Class<?> kitClass, String target, Consumer<ConformanceReport.Case> progress) {
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectClass(kitClass))
                // The kit's own deadlines bound every case; no parallel execution so cases do not interfere.
                .configurationParameter("junit.jupiter.execution.parallel.enabled", "false")
                .build();
        Recorder recorder = new Recorder(progress);
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, recorder);
        return new ConformanceReport(target, recorder.cases);
    }

    /** Collects one {@link ConformanceReport.Case} per test (not per container). */
    private static final class Recorder implements TestExecutionListener {
        final List<ConformanceReport.Case> cases = new ArrayList<>();
        final Map<String, Long> started = new ConcurrentHashMap<>();
        final Consumer<ConformanceReport.Case> progress;
        /** Null until the launcher starts the plan. */
        @Nullable
        TestPlan plan;

        Recorder(Consumer<ConformanceReport.Case> progress) {
            this.progress = progress;
        }

        private void record(ConformanceReport.Case c) {
            cases.add(c);
            progress.accept(c);
        }

        @Override
        public void testPlanExecutionStarted(TestPlan testPlan) {
            plan = testPlan;
        }

        @Override
        public void executionStarted(TestIdentifier id) {
            started.put(id.getUniqueId(), System.nanoTime());
        }

        @Override
        public void executionSkipped(TestIdentifier id, String reason) {
            if (id.isTest()) {
                record(new ConformanceReport.Case(name(id), ConformanceReport.Outcome.SKIPPED, reason, Duration.ZERO));
            }
        }

        @Override
        public void executionFinished(TestIdentifier id, TestExecutionResult result) {
            Long start = started.remove(id.getUniqueId());
            Duration elapsed = Duration.ofNanos(start == null ? 0 : System.nanoTime() - start);
            String detail = result.getThrowable()
                    .map(t -> result.getStatus() == TestExecutionResult.Status.ABORTED && t.getMessage() != null
                            ? t.getMessage()
                            : describe(t))
                    .orElse("");
            if (!id.isTest()) {
                // A failing container (say, @BeforeAll or the store's constructor) fails every case under it.
                if (result.getStatus() == TestExecutionResult.Status.FAILED) {
                    record(new ConformanceReport.Case(
                            name(id) + " (setup)", ConformanceReport.Outcome.FAILED, detail, elapsed));
                }
                return;
            }
            ConformanceReport.Outcome outcome = switch (result.getStatus()) {
                case SUCCESSFUL -> ConformanceReport.Outcome.PASSED;
                case ABORTED -> ConformanceReport.Outcome.SKIPPED;
                case FAILED -> ConformanceReport.Outcome.FAILED;
            };
            record(new ConformanceReport.Case(name(id), outcome, detail, elapsed));
        }

        private String name(TestIdentifier id) {
            if (id.getSource().orElse(null) instanceof MethodSource method) {
                // A parameterized invocation: the method name plus the invocation's display name.
                boolean invocation = plan != null
                        && plan.getParent(id)
                                .map(parent -> parent.getSource().orElse(null) instanceof MethodSource)
                                .orElse(false);
                return invocation
                        ? method.getMethodName() + " [" + id.getDisplayName().replaceFirst("^\\[\\d+\\] ", "") + "]"
                        : method.getMethodName();
            }
            return id.getDisplayName();
        }
    }

    private static String describe(Throwable t) {
        String message = t.getMessage();
        return t.getClass().getSimpleName() + (message == null ? "" : ": " + message.replace('\n', ' '));
    }
}
