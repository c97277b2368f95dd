package io.hicache.bench;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * {@code keys}: page-hash throughput of {@link PageHasher} (chaining, token encoding, packed output) against
 * the JDK's raw SHA-256 over exactly the same bytes, prepared in advance: the prior hash and the page's
 * tokens, one digest per page. The ratio is what the key scheme costs beyond SHA-256 itself. Stateless.
 */
public final class KeysSuite implements BenchSuite {
    static final int[] PAGE_SIZES = {1, 16, 64, 256};
    private static final int TOKENS = 1 << 16;

    /** Results escape here so the JIT cannot drop the work. */
    static volatile long sink;

    @Override
    public String name() {
        return "keys";
    }

    @Override
    public String description() {
        return "page-hash throughput (pages/s, GB/s of token ids) against raw JDK SHA-256 over the same bytes";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        int[] tokens = new SplittableRandom(42).ints(TOKENS, 0, 152_064).toArray();
        Comparison comparison = Comparison.forRun(quick);
        List<BenchRow> rows = new ArrayList<>();
        for (int pageSize : PAGE_SIZES) {
            PageHasher hasher = new PageHasher(pageSize);
            int pages = TOKENS / pageSize;
            RawInputs raw = RawInputs.of(tokens, pageSize, hasher.hashPages(tokens));
            MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
            byte[] out = new byte[PageHash.BYTES];
            Comparison.Result result = comparison.measure(
                    () -> {
                        PageHashes hashes = hasher.hashPages(tokens);
                        sink += hashes.last().prefix64();
                        return pages;
                    },
                    () -> {
                        for (int p = 0; p < pages; p++) {
                            sha256.update(raw.bytes, raw.offsets[p], raw.offsets[p + 1] - raw.offsets[p]);
                            sha256.digest(out, 0, PageHash.BYTES);
                        }
                        sink += out[0];
                        return pages;
                    });
            String reference = "jdk_sha256_same_bytes";
            rows.add(BenchRow.higherIsBetter("page_hash_p" + pageSize, "pages/s", reference, result, 1));
            rows.add(BenchRow.higherIsBetter(
                    "page_hash_token_bytes_p" + pageSize,
                    "GB/s",
                    reference,
                    result,
                    pageSize * (double) Integer.BYTES / 1e9));
        }
        return rows;
    }

    /** Every page's digest input laid out back to back: prior hash (none for page 0), then tokens little-endian. */
    record RawInputs(byte[] bytes, int[] offsets) {
        static RawInputs of(int[] tokens, int pageSize, PageHashes hashes) throws Exception {
            int pages = hashes.size();
            ByteBuffer buf = ByteBuffer.allocate(pages * (PageHash.BYTES + pageSize * Integer.BYTES))
                    .order(ByteOrder.LITTLE_ENDIAN);
            int[] offsets = new int[pages + 1];
            for (int p = 0; p < pages; p++) {
                offsets[p] = buf.position();
                if (p > 0) {
                    buf.put(hashes.get(p - 1).toBytes());
                }
                for (int t = 0; t < pageSize; t++) {
                    buf.putInt(tokens[p * pageSize + t]);
                }
            }
            offsets[pages] = buf.position();
            // Check the reference hashes what the hasher hashes: its digest of the last page must match.
            MessageDigest check = MessageDigest.getInstance("SHA-256");
            check.update(buf.array(), offsets[pages - 1], offsets[pages] - offsets[pages - 1]);
            if (!PageHash.fromBytes(check.digest(), 0).equals(hashes.last())) {
                throw new IllegalStateException("reference inputs do not reproduce the page hashes");
            }
            return new RawInputs(buf.array(), offsets);
        }
    }
}
