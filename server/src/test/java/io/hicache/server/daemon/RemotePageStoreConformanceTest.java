package io.hicache.server.daemon;

import io.hicache.core.store.PageStore;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;

/**
 * The conformance kit against the {@code remote} store, talking to a real daemon over loopback: with the file store
 * as L3 and a roomy slab; with a slab too small for the kit's pages, so that pages are evicted to L3 and promoted back
 * (and batches are cut into several frames); and with no L3 at all.
 */
class RemotePageStoreConformanceTest {
    abstract static class Kit extends PageStoreConformanceKit {
        abstract TestDaemon daemon();

        @Override
        protected PageStore openStore() {
            return daemon().client();
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of(daemon().corrupter());
        }
    }

    @Nested
    class FileL3 extends Kit {
        static TestDaemon daemon;

        @BeforeAll
        static void start() throws Exception {
            daemon = TestDaemon.start(Map.of());
        }

        @AfterAll
        static void stop() throws Exception {
            daemon.close();
        }

        @Override
        TestDaemon daemon() {
            return daemon;
        }
    }

    @Nested
    class SmallSlabOverFileL3 extends Kit {
        static TestDaemon daemon;

        @BeforeAll
        static void start() throws Exception {
            daemon = TestDaemon.start(Map.of(
                    "server.host-size", "12MiB", "server.max-page-bytes", "2MiB", "server.max-frame-bytes", "3MiB"));
        }

        @AfterAll
        static void stop() throws Exception {
            daemon.close();
        }

        @Override
        TestDaemon daemon() {
            return daemon;
        }
    }

    @Nested
    class NoL3 extends Kit {
        static TestDaemon daemon;

        @BeforeAll
        static void start() throws Exception {
            daemon = TestDaemon.start(Map.of("server.store", "none"));
        }

        @AfterAll
        static void stop() throws Exception {
            daemon.close();
        }

        @Override
        TestDaemon daemon() {
            return daemon;
        }
    }
}
