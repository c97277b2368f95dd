package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.PrefixHits;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Tenants (docs/security.md) fuzzed: two tenants and a client of the shared token put, read, query, retain, delete and
 * clear the same namespaces and hashes at random, each checked after every step against a model of its own pages
 * only, so that anything one saw, removed or kept of another's would fail the step. Every request naming another
 * tenant's namespace is refused and changes nothing; a tenant gets no slab file and no lease; the admin token reaches a
 * tenant's pages by naming the tenant; a tenant's quota evicts its own pages only.
 */
class TenantIsolationTest {
    private static final String ALICE = "alice-token-0123456789";
    private static final String BOB = "bob-token-0123456789ab";
    private static final String SHARED = "shared-token-0123456789";
    private static final String ADMIN = "admin-token-0123456789";
    private static final int PAGE = 4096;

    @TempDir
    Path dir;

    /** One client and the pages it should see: by namespace index and hash index. */
    private record Actor(String name, RemotePageStore store, long salt, Set<List<Integer>> model) {}

    private static Namespace base(int i) {
        return Namespace.builder("fuzz-model-" + i)
                .kvDtype(io.hicache.core.page.KvDtype.BFLOAT16)
                .pageTokens(16)
                .build();
    }

    private TestDaemon daemon(Map<String, String> more) throws Exception {
        Files.writeString(dir.resolve("tenants"), "# two tenants\nalice " + ALICE + "\n\nbob " + BOB + "\n");
        Map<String, String> settings = new java.util.HashMap<>(more);
        settings.put("server.tenants-file", dir.resolve("tenants").toString());
        settings.put("server.auth-token", SHARED);
        settings.put("server.admin-token", ADMIN);
        return TestDaemon.start(settings);
    }

    private static RemotePageStore client(TestDaemon d, String token) {
        return RemotePageStore.open(RemoteStoreConfig.local(d.port(), token));
    }

    @Test
    void noTenantEverSeesKeepsOrRemovesAnothersPages() throws Exception {
        List<PageHash> hashes = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < 24; i++) {
            byte[] h = new byte[32];
            random.nextBytes(h);
            hashes.add(PageHash.fromBytes(h, 0));
        }
        try (TestDaemon d = daemon(Map.of());
                Arena arena = Arena.ofShared();
                RemotePageStore alice = client(d, ALICE);
                RemotePageStore bob = client(d, BOB);
                RemotePageStore shared = client(d, SHARED);
                RemotePageStore admin = client(d, ADMIN)) {
            List<Actor> actors = List.of(
                    new Actor("alice", alice, 1, new HashSet<>()),
                    new Actor("bob", bob, 2, new HashSet<>()),
                    new Actor("shared", shared, 3, new HashSet<>()));
            int refused = 0;
            for (int step = 0; step < 400; step++) {
                Actor a = actors.get(random.nextInt(actors.size()));
                int nsIndex = random.nextInt(2);
                Namespace ns = base(nsIndex);
                List<Integer> picked = new ArrayList<>();
                int n = 1 + random.nextInt(6);
                int first = random.nextInt(hashes.size() - n);
                for (int i = 0; i < n; i++) {
                    picked.add(first + i);
                }
                List<StoreKey> keys =
                        picked.stream().map(i -> ns.key(hashes.get(i))).toList();
                String where = "step " + step + " " + a.name();
                int op = random.nextInt(100);
                if (op < 30) {
                    BatchResult put = Pages.put(a.store(), filled(arena, keys, a.salt()));
                    for (int i = 0; i < n; i++) {
                        PageStatus s = put.status(i);
                        boolean had = a.model().contains(List.of(nsIndex, picked.get(i)));
                        assertEquals(had ? PageStatus.EXISTS : PageStatus.OK, s, where + " put " + i);
                        a.model().add(List.of(nsIndex, picked.get(i)));
                    }
                } else if (op < 50) {
                    PageBatch targets = empty(arena, keys);
                    BatchResult got = Pages.get(a.store(), targets);
                    for (int i = 0; i < n; i++) {
                        boolean mine = a.model().contains(List.of(nsIndex, picked.get(i)));
                        assertEquals(mine ? PageStatus.OK : PageStatus.MISS, got.status(i), where + " get " + i);
                        if (mine) {
                            assertTrue(
                                    PagePattern.firstMismatch(targets.page(i), keys.get(i), a.salt()) < 0,
                                    where + " bytes");
                        }
                    }
                } else if (op < 65) {
                    int run = 0;
                    while (run < n && a.model().contains(List.of(nsIndex, picked.get(run)))) {
                        run++;
                    }
                    assertEquals(run, Pages.hits(a.store(), keys), where + " leading hits");
                    PrefixHits hits =
                            a.store().prefixHits(keys, Pages.deadline()).get(10, TimeUnit.SECONDS);
                    assertEquals(run, hits.any(), where + " prefix hits");
                } else if (op < 72) {
                    BatchResult r = a.store()
                            .retain(keys, 50, Duration.ofMinutes(5), Pages.deadline())
                            .get(10, TimeUnit.SECONDS);
                    for (int i = 0; i < n; i++) {
                        boolean mine = a.model().contains(List.of(nsIndex, picked.get(i)));
                        assertEquals(mine ? PageStatus.OK : PageStatus.MISS, r.status(i), where + " retain " + i);
                    }
                } else if (op < 84) {
                    BatchResult r = a.store().delete(keys, Pages.deadline()).get(30, TimeUnit.SECONDS);
                    for (int i = 0; i < n; i++) {
                        boolean mine = a.model().remove(List.of(nsIndex, picked.get(i)));
                        assertEquals(mine ? PageStatus.OK : PageStatus.MISS, r.status(i), where + " delete " + i);
                    }
                } else if (op < 88) {
                    a.store().clear(ns, Pages.deadline()).get(30, TimeUnit.SECONDS);
                    a.model().removeIf(k -> k.getFirst() == nsIndex);
                } else {
                    // Naming a namespace of a tenant this client is not: refused, whatever the request.
                    String other = a.name().equals("alice") ? "bob" : "alice";
                    Namespace theirs = ns.toBuilder().tenant(other).build();
                    List<StoreKey> theirKeys =
                            picked.stream().map(i -> theirs.key(hashes.get(i))).toList();
                    refused++;
                    int kind = random.nextInt(4);
                    if (kind == 0) {
                        BatchResult r = Pages.get(a.store(), empty(arena, theirKeys));
                        for (int i = 0; i < n; i++) {
                            assertNotEquals(PageStatus.OK, r.status(i), where + " read another tenant's page");
                        }
                    } else if (kind == 1) {
                        BatchResult r =
                                a.store().delete(theirKeys, Pages.deadline()).get(30, TimeUnit.SECONDS);
                        for (int i = 0; i < n; i++) {
                            assertNotEquals(PageStatus.OK, r.status(i), where + " deleted another tenant's page");
                        }
                    } else if (kind == 2) {
                        assertEquals(0, Pages.hits(a.store(), theirKeys), where + " counted another tenant's pages");
                        // The question itself is refused (ERROR AUTH), not answered with a count of 0.
                        ExecutionException e = assertThrows(
                                ExecutionException.class,
                                () -> a.store()
                                        .prefixHits(theirKeys, Pages.deadline())
                                        .get(10, TimeUnit.SECONDS));
                        assertTrue(String.valueOf(e.getCause()).contains("auth"), where + " " + e.getCause());
                    } else {
                        assertThrows(
                                ExecutionException.class,
                                () -> a.store().clear(theirs, Pages.deadline()).get(30, TimeUnit.SECONDS),
                                where + " cleared another tenant's namespace");
                    }
                }
            }
            assertTrue(refused > 20, "few refusals were tried: " + refused);
            // Every actor's pages are exactly its model, read without the fuzz's order.
            for (Actor a : actors) {
                for (int nsIndex = 0; nsIndex < 2; nsIndex++) {
                    for (int h = 0; h < hashes.size(); h++) {
                        StoreKey k = base(nsIndex).key(hashes.get(h));
                        boolean mine = a.model().contains(List.of(nsIndex, h));
                        assertEquals(mine ? 1 : 0, Pages.hits(a.store(), List.of(k)), a.name() + " " + k);
                    }
                }
            }
            // The admin token reaches alice's pages by naming her.
            List<Integer> alices = actors.getFirst().model().iterator().next();
            Namespace alicesNs = base(alices.get(0)).toBuilder().tenant("alice").build();
            assertEquals(1, Pages.hits(admin, List.of(alicesNs.key(hashes.get(alices.get(1))))));
        }
    }

    @Test
    void aTenantGetsNoSlabFileNoLeaseAndOnlyItsOwnQuota() throws Exception {
        try (TestDaemon d = daemon(Map.of("server.tenant-quota", "1MiB", "server.store", "none"));
                Arena arena = Arena.ofShared();
                Pages pages = new Pages();
                RemotePageStore alice = client(d, ALICE);
                RemotePageStore bob = client(d, BOB)) {
            Namespace ns = base(0);
            List<StoreKey> keys = pages.keys(ns, 2);
            Pages.put(alice, filled(arena, keys, 1));
            assertThrows(
                    Exception.class,
                    () -> alice.lease(keys, PAGE, Duration.ofSeconds(5), Pages.deadline())
                            .get(10, TimeUnit.SECONDS),
                    "a tenant takes no lease: the slab file holds every tenant's pages");
            // Bob's pages, then alice over her quota: her own pages go, his stay.
            List<StoreKey> bobs = pages.keys(ns, 64);
            Pages.put(bob, filledOf(arena, bobs, 16 * 1024, 2));
            for (int i = 0; i < 8; i++) {
                BatchResult put = Pages.put(alice, filledOf(arena, pages.keys(ns, 16), 16 * 1024, 1));
                for (int j = 0; j < put.size(); j++) {
                    assertEquals(PageStatus.OK, put.status(j), "round " + i + " page " + j);
                }
            }
            assertEquals(64, Pages.stored(bob, bobs), "bob's pages stay while alice's quota evicts hers");
            assertTrue(d.server.cache.space.tenantBytes("alice") <= 1 << 20, "alice within her quota");
            assertEquals(0, Pages.hits(alice, keys), "alice's oldest pages went for her newer ones");
            String metrics = alice.daemonMetrics(Pages.deadline()).get(10, TimeUnit.SECONDS);
            assertTrue(metrics.contains("hicache_server_tenant_bytes{tenant=\"bob\"}"), metrics);
            assertTrue(metrics.contains("hicache_server_tenant_connections_total{tenant=\"alice\"}"), metrics);
        }
    }

    @Test
    void overTheRedisProtocolATenantIsConfinedAndMayNotFlushAll() throws Exception {
        try (TestDaemon d = daemon(Map.of("server.resp-port", "0"));
                java.net.Socket s = new java.net.Socket("127.0.0.1", d.server.respPort())) {
            s.setSoTimeout(10_000);
            java.io.OutputStream out = s.getOutputStream();
            java.io.BufferedReader in = new java.io.BufferedReader(
                    new java.io.InputStreamReader(s.getInputStream(), java.nio.charset.StandardCharsets.US_ASCII));
            out.write(("AUTH bob " + SHARED + "\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            assertTrue(in.readLine().startsWith("-WRONGPASS"), "the shared token cannot name a tenant");
            out.write(("AUTH alice " + ALICE + "\r\nSET k v\r\nFLUSHALL\r\n")
                    .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            assertEquals("+OK", in.readLine());
            assertEquals("+OK", in.readLine());
            assertTrue(in.readLine().startsWith("-NOPERM"), "a tenant may not flush every tenant's pages");
        }
    }

    @Test
    void aBadTenantsFileStopsTheStartNamingTheLine() throws Exception {
        Files.writeString(dir.resolve("bad"), "alice " + ALICE + "\nbob short\n");
        Exception e = assertThrows(
                Exception.class,
                () -> TestDaemon.start(
                                Map.of("server.tenants-file", dir.resolve("bad").toString()))
                        .close());
        assertTrue(e.getMessage().contains("line 2"), e.getMessage());
    }

    private static PageBatch filled(Arena arena, List<StoreKey> keys, long salt) {
        return filledOf(arena, keys, PAGE, salt);
    }

    private static PageBatch filledOf(Arena arena, List<StoreKey> keys, int bytes, long salt) {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (StoreKey k : keys) {
            MemorySegment page = arena.allocate(bytes);
            PagePattern.fill(page, k, salt);
            b.add(k, page);
        }
        return b.build();
    }

    private static PageBatch empty(Arena arena, List<StoreKey> keys) {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (StoreKey k : keys) {
            b.add(k, arena.allocate(PAGE));
        }
        return b.build();
    }
}
