package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.storage.remote.DaemonAdmin;
import io.hicache.storage.remote.PrefixHits;
import io.hicache.storage.remote.PrefixHits.L3State;
import io.hicache.storage.remote.RemotePageStore;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * PREFIX_HITS against what the daemon holds (docs/protocol.md §3): the slab's, L3's and either's leading runs when a
 * chain is in both tiers, only in L3 (flushed), only in the slab (put while no store was attached), split between them,
 * broken by a gap; a daemon without L3; the HTTP endpoint of docs/routing.md, which hashes token ids as SGLang does. The question touches
 * no page: asking it does not change what eviction takes.
 */
class PrefixHitsTest {
    private static final Duration T = Duration.ofSeconds(20);

    private static PrefixHits ask(RemotePageStore c, List<StoreKey> keys) throws Exception {
        return c.prefixHits(keys, Pages.deadline()).get(30, TimeUnit.SECONDS);
    }

    private static void await(BooleanSupplier done, String what) throws InterruptedException {
        long until = System.nanoTime() + 20_000_000_000L;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > until) {
                throw new AssertionError("not within 20 s: " + what);
            }
            Thread.sleep(10);
        }
    }

    @Test
    void eachTiersRunIsCountedFromTheFirstPage() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of());
                Pages pages = new Pages();
                RemotePageStore c = d.client()) {
            DaemonAdmin admin = new DaemonAdmin(c);
            Namespace ns = Pages.namespace("prefix");
            List<StoreKey> chain = pages.keys(ns, 10);

            Pages.put(c, pages.filled(chain, 4096));
            await(() -> d.server.pendingWriteBehindPages() == 0, "the write-behind");
            assertEquals(new PrefixHits(10, 10, 10, L3State.ANSWERED), ask(c, chain));
            assertEquals(new PrefixHits(10, 10, 10, L3State.ANSWERED), ask(c, chain), "asking changed nothing");

            admin.flush(T).get(30, TimeUnit.SECONDS);
            assertEquals(new PrefixHits(0, 10, 10, L3State.ANSWERED), ask(c, chain), "only L3 holds the chain");

            Pages.get(c, pages.empty(chain.subList(0, 3), 4096)); // promotes three pages
            assertEquals(new PrefixHits(3, 10, 10, L3State.ANSWERED), ask(c, chain));

            // A chain whose prefix only L3 holds and whose suffix only the slab holds (put while detached).
            List<StoreKey> split = pages.keys(ns, 8);
            Pages.put(c, pages.filled(split.subList(0, 4), 4096));
            await(() -> d.server.pendingWriteBehindPages() == 0, "the write-behind");
            admin.flush(T).get(30, TimeUnit.SECONDS);
            admin.detach(T).get(30, TimeUnit.SECONDS);
            Pages.put(c, pages.filled(split.subList(4, 8), 4096));
            admin.attach("file", Map.of("file.root", d.fileRoot.resolve("store").toString()), T)
                    .get(30, TimeUnit.SECONDS);
            assertEquals(new PrefixHits(0, 4, 8, L3State.ANSWERED), ask(c, split));

            // A gap: the run of either tier ends at the first page no tier holds. (The second FLUSH emptied the slab.)
            Pages.get(c, pages.empty(chain.subList(0, 2), 4096));
            List<StoreKey> gapped = new ArrayList<>(chain);
            gapped.add(5, pages.keys(ns, 1).getFirst());
            assertEquals(new PrefixHits(2, 5, 5, L3State.ANSWERED), ask(c, gapped));

            // The HTTP endpoint: SGLang's page hashes of the token ids, asked by hex or by tokens.
            Namespace routed = Namespace.builder("routed")
                    .kvDtype(KvDtype.BFLOAT16)
                    .pageByteOrder(PageByteOrder.LAYER_MAJOR)
                    .pageTokens(4)
                    .build();
            int[] tokens = new int[4 * 6];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = 1000 + i;
            }
            List<PageHash> hashes = new PageHasher(4).hashPages(tokens).asList();
            List<StoreKey> routedKeys = hashes.stream().map(routed::key).toList();
            Pages.put(c, pages.filled(routedKeys.subList(0, 4), 4096));
            HttpClient http = HttpClient.newHttpClient();
            String body = "{\"model\": \"routed\", \"dtype\": \"bf16\", \"page_tokens\": 4, \"tokens\": "
                    + java.util.Arrays.toString(tokens) + "}";
            HttpResponse<String> answer = http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + d.server.metricsPort() + "/v1/prefix-hits"))
                            .POST(HttpRequest.BodyPublishers.ofString(body))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            assertTrue(answer.body().contains("\"pages\": 6, \"slab\": 4"), answer.body());
            assertTrue(answer.body().contains("\"any\": 4"), answer.body());
            HttpResponse<String> bad = http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + d.server.metricsPort() + "/v1/prefix-hits"))
                            .POST(HttpRequest.BodyPublishers.ofString("{\"model\": \"m\", \"dtype\": \"bf16\"}"))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(400, bad.statusCode());
            assertTrue(bad.body().contains("either \\\"hashes\\\" or \\\"tokens\\\""), bad.body());
        }
    }

    @Test
    void aDaemonWithoutL3SaysSo() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                Pages pages = new Pages();
                RemotePageStore c = d.client()) {
            List<StoreKey> chain = pages.keys(Pages.namespace("nol3"), 5);
            Pages.put(c, pages.filled(chain.subList(0, 2), 4096));
            assertEquals(new PrefixHits(2, 0, 2, L3State.NO_L3), ask(c, chain));
        }
    }
}
