package io.hicache.storage.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.core.sync.ResponseTransformer;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * A torn object (issue 22): what a service that does not make puts atomic shows of a put cut short or still landing,
 * an object shorter than the length it records, or a body without its metadata yet (s3rver writes the body first).
 * It is a miss to gets and lookups, counted; never a size mismatch, which would tell the caller it asked with the
 * wrong page size, nor corrupt, which is for bytes that fail their checksum.
 */
class S3TornObjectTest {
    private static final String BUCKET = "hicache-torn";
    private static final int PAGE_BYTES = 1 << 20;
    private static final Namespace NS = Namespace.of("torn", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @TempDir
    Path dir;

    @Test
    void anObjectShorterThanItsRecordedLengthIsACountedMissNotASizeMismatch() throws Exception {
        try (LocalS3 server = new LocalS3(dir, BUCKET);
                S3PageStore store = S3PageStore.open(server.config(BUCKET));
                S3Client client = server.client();
                Arena arena = Arena.ofShared()) {
            StoreKey key = NS.key(PageHash.fromHex("7e".repeat(32)));
            MemorySegment page = arena.allocate(PAGE_BYTES);
            PagePattern.fill(page, key);
            assertEquals(
                    PageStatus.OK,
                    store.put(PageBatch.of(List.of(key), List.of(page)), deadline())
                            .get(1, TimeUnit.MINUTES)
                            .status(0));
            String name = store.objectKey(key);
            Map<String, String> metadata =
                    client.headObject(b -> b.bucket(BUCKET).key(name)).metadata();

            // What a torn put leaves: the first 300 KiB of the body under the whole page's metadata.
            byte[] prefix = page.asSlice(0, 300 * 1024).toArray(ValueLayout.JAVA_BYTE);
            client.putObject(b -> b.bucket(BUCKET).key(name).metadata(metadata), RequestBody.fromBytes(prefix));
            assertEquals(
                    prefix.length,
                    client.getObject(b -> b.bucket(BUCKET).key(name), ResponseTransformer.toBytes())
                            .asByteArray()
                            .length,
                    "the server did not keep the torn object");

            MemorySegment target = arena.allocate(PAGE_BYTES);
            PagePattern.fillSentinel(target);
            BatchResult got = store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                    .get(1, TimeUnit.MINUTES);
            assertEquals(PageStatus.MISS, got.status(0), got::toString);
            assertTrue(PagePattern.isSentinel(target), "a torn object was written into the target");
            assertEquals(1, store.tornObjects());
            assertEquals(1, store.stats().getMisses());
            assertEquals(0, store.stats().failedPages(), "a torn object counted as a failure");

            assertEquals(
                    0,
                    store.leadingHits(List.of(key), deadline()).get(1, TimeUnit.MINUTES),
                    "a lookup counted a torn object as a hit");
            assertEquals(2, store.tornObjects());

            // The next put of the page replaces it.
            assertEquals(
                    PageStatus.OK,
                    store.put(PageBatch.of(List.of(key), List.of(page)), deadline())
                            .get(1, TimeUnit.MINUTES)
                            .status(0));
            assertEquals(
                    PageStatus.OK,
                    store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                            .get(1, TimeUnit.MINUTES)
                            .status(0));
            assertTrue(PagePattern.matches(target, key));
            assertEquals(2, store.tornObjects());
        }
    }

    @Test
    void anObjectWithoutItsMetadataIsACountedMissNotCorruptWhileFlippedBytesStayCorrupt() throws Exception {
        try (LocalS3 server = new LocalS3(dir, BUCKET);
                S3PageStore store = S3PageStore.open(server.config(BUCKET));
                S3Client client = server.client();
                Arena arena = Arena.ofShared()) {
            StoreKey key = NS.key(PageHash.fromHex("5a".repeat(32)));
            String name = store.objectKey(key);
            MemorySegment page = arena.allocate(PAGE_BYTES);
            PagePattern.fill(page, key);
            MemorySegment target = arena.allocate(PAGE_BYTES);

            // What a put still landing on s3rver shows: the whole body (then an empty one) before any metadata.
            byte[] body = page.toArray(ValueLayout.JAVA_BYTE);
            for (byte[] landed : List.of(body, new byte[0])) {
                client.putObject(b -> b.bucket(BUCKET).key(name), RequestBody.fromBytes(landed));
                PagePattern.fillSentinel(target);
                BatchResult got = store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                        .get(1, TimeUnit.MINUTES);
                assertEquals(PageStatus.MISS, got.status(0), got::toString);
                assertTrue(got.detail(0).orElse("").contains("no hicache-crc32c metadata"), got::toString);
                assertTrue(PagePattern.isSentinel(target), "an object without metadata was written into the target");
                assertEquals(
                        0,
                        store.leadingHits(List.of(key), deadline()).get(1, TimeUnit.MINUTES),
                        "a lookup counted an object without metadata as a hit");
            }
            assertEquals(4, store.tornObjects());
            assertEquals(2, store.stats().getMisses());
            assertEquals(0, store.stats().corruptPages(), "an object without metadata counted as corrupt");

            // The page put whole, then one byte flipped under its metadata: that is corrupt, and not torn.
            assertEquals(
                    PageStatus.OK,
                    store.put(PageBatch.of(List.of(key), List.of(page)), deadline())
                            .get(1, TimeUnit.MINUTES)
                            .status(0));
            S3PageStoreConformanceTest.flipAByte(client, BUCKET, name);
            BatchResult got = store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                    .get(1, TimeUnit.MINUTES);
            assertEquals(PageStatus.CORRUPT, got.status(0), got::toString);
            assertEquals(1, store.stats().corruptPages());
            assertEquals(4, store.tornObjects());
        }
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }
}
