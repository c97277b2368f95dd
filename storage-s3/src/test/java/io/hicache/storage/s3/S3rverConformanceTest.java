package io.hicache.storage.s3;

import io.hicache.core.store.PageStore;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The conformance kit against the S3 store on s3rver ({@link LocalS3rver}), a second S3 implementation, whose puts
 * are not atomic: what the kit's concurrent gets see of a put still landing must be a miss, never a corrupt page.
 * Skipped, with the reason, where Node.js or s3rver is not installed ({@code .ci/run} installs s3rver); the cases
 * s3rver itself cannot pass are skipped with theirs ({@link NotOnS3rver}).
 */
@ExtendWith(S3rverConformanceTest.NotOnS3rver.class)
class S3rverConformanceTest extends PageStoreConformanceKit {
    private static final String BUCKET = "hicache-kit";

    @TempDir
    static Path dir;

    static LocalS3rver server;

    @BeforeAll
    static void startServer() throws Exception {
        LocalS3rver.unavailable().ifPresent(Assumptions::abort);
        server = new LocalS3rver(dir, BUCKET);
    }

    @AfterAll
    static void stopServer() {
        if (server != null) {
            server.close();
        }
    }

    @Override
    protected PageStore openStore() {
        return S3PageStore.open(server.config(BUCKET));
    }

    @Override
    protected Optional<PageCorrupter> corrupter() {
        return Optional.of((store, key) -> {
            try (S3Client client = server.client()) {
                S3PageStoreConformanceTest.flipAByte(client, BUCKET, ((S3PageStore) store).objectKey(key));
            }
        });
    }

    /**
     * The kit's cases that s3rver fails whatever the store does, each skipped with why (the kit's cases cannot be
     * overridden from outside its package).
     */
    static final class NotOnS3rver implements ExecutionCondition {
        private static final Map<String, String> CASES = Map.of(
                "clearAllRemovesEverything",
                "s3rver 3.7.1 is wrong here: its DeleteObjects deletes the keys concurrently, each delete removing "
                        + "the folder it emptied, so two race on one folder and the request answers 500 (ENOENT on "
                        + "scandir) while its deletes go on, and the SDK's retries race with those in turn; clearing the "
                        + "whole bucket, which holds what earlier cases left, failed all three attempts in every run");

        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            return context.getTestMethod()
                    .map(m -> CASES.get(m.getName()))
                    .map(ConditionEvaluationResult::disabled)
                    .orElse(ConditionEvaluationResult.enabled("s3rver conforms in this case"));
        }
    }
}
