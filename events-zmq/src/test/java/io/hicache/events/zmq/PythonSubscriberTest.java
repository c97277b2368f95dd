package io.hicache.events.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real cache (emulated device) publishes through the zmq publisher to two subscribers outside the JVM, written in
 * Python with pyzmq and msgpack as a router is: one that listens from the start, one that joins after the first
 * requests and replays from sequence 0. Each decodes every batch, keeps a router's view, and reports; the test checks
 * the reports against block ids it computes itself from the tokens (SHA-256 over the previous page's hash and the
 * tokens as 4-byte little-endian, the first 8 bytes as a signed int64), the parents, token ids, media, sequence
 * numbers and what the cache then holds. Skipped (not failed) when /usr/bin/python3 lacks zmq or msgpack.
 *
 * <p>The subscriber is the one {@code docs/kv-events.md} tells routers to start; this test is what runs it.
 */
class PythonSubscriberTest {
    private static final int PAGE = 4;
    private static final String TOPIC = "kv-test";

    @TempDir
    Path work;

    /** SGLang's block ids of {@code tokens}' pages, from scratch. */
    static long[] blockIds(int[] tokens) throws Exception {
        long[] ids = new long[tokens.length / PAGE];
        byte[] prior = null;
        for (int p = 0; p < ids.length; p++) {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            if (prior != null) {
                sha.update(prior);
            }
            ByteBuffer page = ByteBuffer.allocate(4 * PAGE).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < PAGE; i++) {
                page.putInt(tokens[p * PAGE + i]);
            }
            sha.update(page.array());
            prior = sha.digest();
            String hex = HexFormat.of().formatHex(prior);
            ids[p] = Long.parseUnsignedLong(hex.substring(0, 16), 16); // hash_str_to_int64
        }
        return ids;
    }

    static int[] tokens(int base, int count) {
        int[] t = new int[count];
        Arrays.setAll(t, i -> base + i);
        return t;
    }

    static String csv(long[] values) {
        return Arrays.stream(values).mapToObj(Long::toString).collect(Collectors.joining(","));
    }

    static String csv(int[] values) {
        return Arrays.stream(values).mapToObj(Integer::toString).collect(Collectors.joining(","));
    }

    /** Serves {@code prompt} as an engine would (match, load back, compute the rest, commit); the KV bytes are zeros. */
    static void serve(HiCache cache, String id, int[] prompt) throws Exception {
        try (CacheRequest r = cache.request(id, prompt)) {
            assertTrue(r.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10)));
            int[] prefix = r.prefixPages();
            int[] fresh = r.allocate(prompt.length / PAGE - prefix.length);
            int[] all = Arrays.copyOf(prefix, prefix.length + fresh.length);
            System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
            r.commit(prompt, all, true);
        }
    }

    /** Waits until every event so far went out on the PUB socket; returns the last sequence number sent. */
    static long settle(HiCache cache, ZmqPublisher pub) throws Exception {
        assertTrue(cache.awaitIdle(Duration.ofSeconds(30)));
        long handed = cache.kvEventStats().publishedBatches();
        long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (pub.sentBatches() < handed && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(handed, pub.sentBatches());
        return handed - 1;
    }

    @Test
    void pythonSubscribersDecodeWhatTheCacheDidIncludingOneThatJoinsLateAndReplays() throws Exception {
        assumeTrue(
                PythonSubscriber.available(),
                "/usr/bin/python3 lacks zmq or msgpack (apt-get install python3-zmq " + "python3-msgpack)");
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : work, "hicache-events");
        ZmqPublisher pub = ZmqPublisher.open(KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpoint\": "
                + "\"tcp://127.0.0.1:*\", \"replay_endpoint\": \"tcp://127.0.0.1:*\", \"topic\": \"" + TOPIC + "\"}"));
        String endpoint = pub.publishEndpoint();
        String replay = pub.replayEndpoint().orElseThrow();
        double startSeconds = System.currentTimeMillis() / 1000.0;
        Settings settings = Settings.builder()
                .flag("page-size", Integer.toString(PAGE))
                .flag("hicache-ratio", "4")
                .flag("host.dir", hostDir.toString())
                .build();
        int[] a = tokens(0, 32); // 8 pages
        int[] b = concatenate(a, tokens(500, 8)); // a and 2 more pages
        int[] c = tokens(100_000, 64); // 16 pages: the whole device pool
        List<String> early;
        List<String> late;
        long lastSeq;
        long phaseOne;
        try (EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(64L << 20, 2);
                HiCache cache = HiCache.builder()
                        .config(HiCacheConfig.from(settings))
                        .namespace(Namespace.of("events-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                        .geometry(KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16))
                        .devicePages(16)
                        .runtime(device)
                        .kvEventPublisher(pub)
                        .open();
                PythonSubscriber first = PythonSubscriber.start(endpoint, replay, TOPIC, false, work)) {
            serve(cache, "a", a);
            settle(cache, pub);
            serve(cache, "b", b);
            phaseOne = settle(cache, pub) + 1;
            try (PythonSubscriber second = PythonSubscriber.start(endpoint, replay, TOPIC, true, work)) {
                serve(cache, "c", c); // a and b's tail leave the device (backed up: they stay on the host)
                settle(cache, pub);
                serve(cache, "a again", a); // back from the host; c leaves the device
                lastSeq = settle(cache, pub);
                early = first.stopAfter(lastSeq);
                late = second.stopAfter(lastSeq);
            }
            try (CacheRequest r = cache.request("look b", b);
                    CacheRequest s = cache.request("look c", c)) {
                assertEquals(32, r.deviceTokens(), "a is on the device");
                assertEquals(8, r.hostTokens(), "b's tail on the host only");
                assertEquals(0, s.deviceTokens());
                assertEquals(64, s.hostTokens());
            }
        } finally {
            try (var files = Files.walk(hostDir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        double endSeconds = System.currentTimeMillis() / 1000.0;

        Report one = Report.of(early);
        Report two = Report.of(late);
        List<Long> all = LongStream.rangeClosed(0, lastSeq).boxed().toList();
        assertEquals(all, one.seqs, "every batch once, in order: no gap the subscriber could not fill");
        assertEquals(all, two.seqs);
        assertTrue(
                two.sources.subList(0, (int) phaseOne).stream().allMatch("replay"::equals),
                "the late subscriber had the first batches from the replay: " + two.sources);
        assertEquals(one.events, two.events, "both decoded the same batches");
        for (String batch : one.batchLines) {
            String[] f = batch.split(" ");
            double ts = Double.parseDouble(f[3]);
            assertTrue(ts >= startSeconds - 1 && ts <= endSeconds + 1, "ts in seconds since the epoch: " + batch);
            assertEquals("0", f[4], "attn_dp_rank");
        }

        long[] aIds = blockIds(a);
        long[] bIds = blockIds(b);
        long[] tail = Arrays.copyOfRange(bIds, 8, 10);
        long[] cIds = blockIds(c);
        String storedA = " - 4 - " + csv(aIds) + " " + csv(a);
        String storedTail = " " + aIds[7] + " 4 - " + csv(tail) + " " + csv(tokens(500, 8));
        String storedC = " - 4 - " + csv(cIds) + " " + csv(c);
        assertEquals(
                2,
                one.events.stream().filter(("STORED GPU" + storedA)::equals).count(),
                "a reached the device twice (computed, then loaded back), from the root, with its tokens");
        assertEquals(
                1,
                one.events.stream()
                        .filter(("STORED CPU_PINNED" + storedA)::equals)
                        .count(),
                "backed up once");
        assertTrue(one.events.contains("STORED GPU" + storedTail), "the tail chains from a's last page: " + one.events);
        assertTrue(one.events.contains("STORED CPU_PINNED" + storedTail));
        assertTrue(one.events.contains("STORED GPU" + storedC));
        assertTrue(one.events.contains("STORED CPU_PINNED" + storedC));
        Set<Long> removedFromGpu = new LinkedHashSet<>();
        for (String e : one.events) {
            if (e.startsWith("REMOVED GPU ")) {
                Arrays.stream(e.substring(12).split(",")).map(Long::parseLong).forEach(removedFromGpu::add);
            }
        }
        Set<Long> expectedRemoved = new LinkedHashSet<>();
        LongStream.of(bIds).forEach(expectedRemoved::add);
        LongStream.of(cIds).forEach(expectedRemoved::add);
        assertEquals(new TreeSet<>(expectedRemoved), new TreeSet<>(removedFromGpu));

        Map<Long, String> expectedView = new TreeMap<>();
        LongStream.of(aIds).forEach(id -> expectedView.put(id, "CPU_PINNED,GPU"));
        LongStream.of(tail).forEach(id -> expectedView.put(id, "CPU_PINNED"));
        LongStream.of(cIds).forEach(id -> expectedView.put(id, "CPU_PINNED"));
        assertEquals(expectedView, one.view, "the router's view is what the cache holds");
        assertEquals(expectedView, two.view);
    }

    private static int[] concatenate(int[] x, int[] y) {
        int[] out = Arrays.copyOf(x, x.length + y.length);
        System.arraycopy(y, 0, out, x.length, y.length);
        return out;
    }

    /** A subscriber's report, parsed. */
    record Report(
            List<Long> seqs,
            List<String> sources,
            List<String> batchLines,
            List<String> events,
            Map<Long, String> view) {
        static Report of(List<String> lines) {
            List<Long> seqs = new ArrayList<>();
            List<String> sources = new ArrayList<>();
            List<String> batches = new ArrayList<>();
            List<String> events = new ArrayList<>();
            Map<Long, String> view = new TreeMap<>();
            for (String line : lines) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "BATCH" -> {
                        seqs.add(Long.parseLong(f[1]));
                        sources.add(f[2]);
                        batches.add(line);
                    }
                    case "STORED", "REMOVED", "CLEARED" -> events.add(line);
                    case "VIEW" -> view.put(Long.parseLong(f[1]), f[2]);
                    case "DONE" -> assertEquals(seqs.size(), Integer.parseInt(f[1]));
                    default -> throw new AssertionError("unexpected line from the subscriber: " + line);
                }
            }
            return new Report(seqs, sources, batches, events, view);
        }
    }
}
