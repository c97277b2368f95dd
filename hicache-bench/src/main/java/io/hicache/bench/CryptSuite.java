package io.hicache.bench;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.storage.crypt.CryptConfig;
import io.hicache.storage.crypt.EncryptedPageStore;
import io.hicache.storage.crypt.KeyRing;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * {@code crypt}: what encryption at rest costs. The {@code encrypted} store over the file store against the plain file
 * store, both with direct I/O in the same folder, in alternating rounds: put of a batch of 128 new pages and get of 128
 * stored pages, at 64 KiB and 1 MiB, as {@link FileSuite} measures the file store (each round at least 256 MiB; gets
 * are checked against the bytes put). Then AES-256-GCM alone on one core (this thread), through direct buffers over
 * off-heap memory as the store calls it ({@code Cipher.doFinal(ByteBuffer, ByteBuffer)}, a 92-byte AAD, a fresh
 * nonce per page), against a plain copy of the same bytes, and against the same cipher over heap arrays (the JDK's
 * fastest path, which the store does not take: it would put every page on the heap).
 *
 * <p>The folder is {@code HICACHE_BENCH_DIR} (or {@code hicache.bench.dir}), else the temporary folder, as for
 * {@code file}. Stateless; cleans up what it writes.
 */
public final class CryptSuite implements BenchSuite {
    private static final int BATCH = FileSuite.BATCH;
    private static final int[] PAGE_BYTES = FileSuite.PAGE_BYTES;
    private static final long ROUND_BYTES = 256L << 20;
    /** Header (namespace id, page hash) and tag the store adds: the AAD the raw rows authenticate is as long. */
    private static final int AAD_BYTES = 92;

    @Override
    public String name() {
        return "crypt";
    }

    @Override
    public String description() {
        return "encrypted store over the file store vs the file store (128-page batches, 64 KiB and 1 MiB, direct I/O); "
                + "AES-256-GCM on one core vs a copy and vs heap arrays";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        Path dir = Files.createTempDirectory(FileSuite.benchDir(), "hicache-bench-crypt");
        List<BenchRow> rows = new ArrayList<>();
        Comparison stores = quick
                ? Comparison.forRun(true)
                : Comparison.forRun(false, 1, 8, 250).withMinItemsPerRound(ROUND_BYTES);
        KeyRing keys = KeyRing.parse("bench " + newKey(), "the bench's key", null);
        try (Arena arena = Arena.ofShared()) {
            for (int pageBytes : PAGE_BYTES) {
                measureStores(dir, pageBytes, keys, stores, arena, rows);
            }
            Comparison raw = Comparison.forRun(quick);
            for (int pageBytes : PAGE_BYTES) {
                measureCipher(pageBytes, raw, arena, rows);
            }
        } finally {
            FileSuite.deleteTree(dir);
        }
        return rows;
    }

    private static void measureStores(
            Path dir, int pageBytes, KeyRing keys, Comparison comparison, Arena arena, List<BenchRow> rows)
            throws Exception {
        Function<Path, PageStore> file = root ->
                FilePageStore.open(FileStoreConfig.at(root).withDirectIo(true).withCapacityBytes(64L << 30));
        String size = (pageBytes >> 10) + "k";
        Path plainRoot = dir.resolve("file-" + size);
        Path sealedRoot = dir.resolve("encrypted-" + size);
        Namespace ns = Namespace.of("bench/crypt", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        List<MemorySegment> sources = new ArrayList<>(BATCH);
        List<MemorySegment> targets = new ArrayList<>(BATCH);
        SplittableRandom random = new SplittableRandom(pageBytes);
        for (int i = 0; i < BATCH; i++) {
            MemorySegment page = arena.allocate(pageBytes, 4096);
            for (long off = 0; off < pageBytes; off += 8) {
                page.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
            }
            sources.add(page);
            targets.add(arena.allocate(pageBytes, 4096));
        }
        long batchBytes = (long) BATCH * pageBytes;
        try (PageStore plain = file.apply(plainRoot);
                PageStore sealed = EncryptedPageStore.wrap(file.apply(sealedRoot), CryptConfig.of("file", keys))) {
            int[] round = {0, 0};
            rows.add(BenchRow.higherIsBetter(
                    "encrypted_file_put_" + size + "_direct_io",
                    "GB/s",
                    "file_put_" + size + "_direct_io",
                    comparison.measure(
                            () -> put(sealed, ns, round, 0, sources, batchBytes),
                            () -> put(plain, ns, round, 1, sources, batchBytes)),
                    1e-9));
            List<StoreKey> stored = FileSuite.keys(ns, 0);
            rows.add(BenchRow.higherIsBetter(
                    "encrypted_file_get_" + size + "_direct_io",
                    "GB/s",
                    "file_get_" + size + "_direct_io",
                    comparison.measure(
                            () -> get(sealed, stored, targets, batchBytes),
                            () -> get(plain, stored, targets, batchBytes)),
                    1e-9));
            check(sealed, stored, targets, sources);
            check(plain, stored, targets, sources);
        }
        FileSuite.deleteTree(plainRoot);
        FileSuite.deleteTree(sealedRoot);
    }

    private static long put(
            PageStore store, Namespace ns, int[] rounds, int which, List<MemorySegment> sources, long batchBytes)
            throws Exception {
        List<StoreKey> keys = FileSuite.keys(ns, rounds[which]++);
        FileSuite.requireAll(
                store.put(PageBatch.of(keys, sources), FileSuite.deadline()).get(10, TimeUnit.MINUTES), "put");
        return batchBytes;
    }

    private static long get(PageStore store, List<StoreKey> keys, List<MemorySegment> targets, long batchBytes)
            throws Exception {
        FileSuite.requireAll(
                store.get(PageBatch.of(keys, targets), FileSuite.deadline()).get(10, TimeUnit.MINUTES), "get");
        return batchBytes;
    }

    /** Gets the batch once more from {@code store} and compares every page with what was put. */
    private static void check(
            PageStore store, List<StoreKey> keys, List<MemorySegment> targets, List<MemorySegment> sources)
            throws Exception {
        for (MemorySegment t : targets) {
            t.fill((byte) 0);
        }
        get(store, keys, targets, 0);
        for (int i = 0; i < targets.size(); i++) {
            long size = targets.get(i).byteSize();
            if (MemorySegment.mismatch(sources.get(i), 0, size, targets.get(i), 0, size) >= 0) {
                throw new IllegalStateException(store.name() + " returned wrong bytes for page " + i);
            }
        }
    }

    /** AES-256-GCM of one page at a time on this thread, against a copy and against heap arrays. */
    private static void measureCipher(int pageBytes, Comparison comparison, Arena arena, List<BenchRow> rows)
            throws Exception {
        String size = pageBytes >= 1 << 20 ? (pageBytes >> 20) + "m" : (pageBytes >> 10) + "k";
        SecretKeySpec key = new SecretKeySpec(Base64.getDecoder().decode(newKey()), "AES");
        byte[] aad = new byte[AAD_BYTES];
        MemorySegment plain = arena.allocate(pageBytes, 4096);
        MemorySegment encrypted = arena.allocate(pageBytes + 16, 4096); // what the encrypt rows write
        MemorySegment sealed = arena.allocate(pageBytes + 16, 4096); // one page the decrypt rows open again and again
        MemorySegment copy = arena.allocate(pageBytes, 4096);
        SplittableRandom random = new SplittableRandom(7);
        for (long off = 0; off < pageBytes; off += 8) {
            plain.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
        }
        Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
        long[] counter = {0};
        Comparison.Workload encrypt = () -> {
            cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce(++counter[0])));
            cipher.updateAAD(aad);
            cipher.doFinal(plain.asByteBuffer(), encrypted.asByteBuffer());
            return pageBytes;
        };
        Comparison.Workload memcpy = () -> {
            MemorySegment.copy(plain, 0, copy, 0, pageBytes);
            return pageBytes;
        };
        rows.add(BenchRow.higherIsBetter(
                "aes_gcm_encrypt_" + size + "_one_core",
                "GB/s",
                "memory_copy_" + size,
                comparison.measure(encrypt, memcpy),
                1e-9));
        // One sealed page, opened again and again (a nonce may be reused for decryption).
        byte[] fixed = nonce(0);
        cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, fixed));
        cipher.updateAAD(aad);
        cipher.doFinal(plain.asByteBuffer(), sealed.asByteBuffer());
        Comparison.Workload decrypt = () -> {
            cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(128, fixed));
            cipher.updateAAD(aad);
            cipher.doFinal(sealed.asByteBuffer(), copy.asByteBuffer());
            return pageBytes;
        };
        rows.add(BenchRow.higherIsBetter(
                "aes_gcm_decrypt_" + size + "_one_core",
                "GB/s",
                "memory_copy_" + size,
                comparison.measure(decrypt, memcpy),
                1e-9));
        if (MemorySegment.mismatch(plain, 0, pageBytes, copy, 0, pageBytes) >= 0) {
            throw new IllegalStateException("AES-GCM did not give the page back");
        }
        // The reference the store cannot use: the same cipher over heap arrays (the page on the Java heap).
        byte[] heapPlain = plain.toArray(ValueLayout.JAVA_BYTE);
        byte[] heapSealed = new byte[pageBytes + 16];
        rows.add(BenchRow.higherIsBetter(
                "aes_gcm_encrypt_" + size + "_direct_buffers",
                "GB/s",
                "aes_gcm_encrypt_" + size + "_heap_arrays",
                comparison.measure(encrypt, () -> {
                    cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce(++counter[0])));
                    cipher.updateAAD(aad);
                    cipher.doFinal(heapPlain, 0, pageBytes, heapSealed, 0);
                    return pageBytes;
                }),
                1e-9));
        byte[] heapOpened = new byte[pageBytes];
        cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce(-1)));
        cipher.updateAAD(aad);
        cipher.doFinal(heapPlain, 0, pageBytes, heapSealed, 0);
        rows.add(BenchRow.higherIsBetter(
                "aes_gcm_decrypt_" + size + "_direct_buffers",
                "GB/s",
                "aes_gcm_decrypt_" + size + "_heap_arrays",
                comparison.measure(decrypt, () -> {
                    cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(128, nonce(-1)));
                    cipher.updateAAD(aad);
                    cipher.doFinal(heapSealed, 0, pageBytes + 16, heapOpened, 0);
                    return pageBytes;
                }),
                1e-9));
        if (!Arrays.equals(heapPlain, heapOpened)) {
            throw new IllegalStateException("AES-GCM over arrays did not give the page back");
        }
    }

    /** A 12-byte nonce from a counter: never repeated for encryption within a run, as the JDK requires. */
    private static byte[] nonce(long n) {
        return ByteBuffer.allocate(12).putLong(4, n).array();
    }

    private static String newKey() {
        byte[] key = new byte[32];
        new SecureRandom().nextBytes(key);
        return Base64.getEncoder().encodeToString(key);
    }
}
