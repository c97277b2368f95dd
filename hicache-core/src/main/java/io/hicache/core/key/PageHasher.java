package io.hicache.core.key;

import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Hashes token sequences into page hashes exactly as SGLang does, so that this service and SGLang engines
 * name the same prefix the same way and can share a store:
 *
 * <pre>
 * hash(page i) = SHA-256( bytes(hash(page i-1))  -- absent for the first page
 *                         || token[0] || token[1] || ... )  -- each token as 4-byte little-endian unsigned
 * </pre>
 *
 * <p>Token ids are unsigned 32-bit values carried in Java {@code int}s: an id of 2^31 or more is passed as its
 * two's-complement bit pattern, e.g. {@code (int) 3_000_000_000L}. Only whole pages are hashed; a trailing
 * partial page is left out, as the page-aligned radix tree never keys one.
 *
 * <p>Not thread-safe: one hasher per thread. It keeps one digest and one scratch buffer and allocates
 * nothing per page but the packed output.
 */
public final class PageHasher {
    private static final ValueLayout.OfInt TOKEN_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    /** Below this many tokens a plain loop encodes a page faster than a bulk copy (measured: bench keys). */
    private static final int BULK_COPY_MIN_TOKENS = 8;

    private final int pageSizeTokens;
    private final MessageDigest sha256;
    // [0, 32): the prior hash, which is where each digest lands; [32, ..): the page's tokens as bytes.
    private final byte[] scratch;
    private final MemorySegment scratchSegment;

    /** A hasher for pages of {@code pageSizeTokens} tokens. */
    public PageHasher(int pageSizeTokens) {
        this.pageSizeTokens = Checks.checkPositive(pageSizeTokens, "pageSizeTokens");
        Checks.requireArgument(
                pageSizeTokens <= (Integer.MAX_VALUE - PageHash.BYTES) / Integer.BYTES,
                "pageSizeTokens too large: %d",
                pageSizeTokens);
        try {
            this.sha256 = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no SHA-256", e);
        }
        this.scratch = new byte[PageHash.BYTES + pageSizeTokens * Integer.BYTES];
        this.scratchSegment = MemorySegment.ofArray(scratch);
    }

    /**
     * Where the chain of a request with extra key {@code extraKey} (a LoRA adapter, a cache salt) starts, in place of
     * no prior: the SHA-256 of the key's UTF-8 bytes, as newer SGLang roots such chains at a hash of the key. The same
     * tokens under two extra keys thus hash apart on every page, and their pages never share a store key.
     */
    public static PageHash extraKeyRoot(String extraKey) {
        Checks.requireArgument(!extraKey.isEmpty(), "the empty extra key has no root hash: its chains start with none");
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(extraKey.getBytes(StandardCharsets.UTF_8));
            return PageHash.fromBytes(digest, 0);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no SHA-256", e);
        }
    }

    /** Tokens per page. */
    public int pageSizeTokens() {
        return pageSizeTokens;
    }

    /** Hashes the whole pages of {@code tokens}, the first one without a prior. */
    public PageHashes hashPages(int[] tokens) {
        return hash(tokens, 0, tokens.length, null);
    }

    /** Hashes the whole pages of {@code tokens[from, to)}, the first one without a prior. */
    public PageHashes hashPages(int[] tokens, int from, int to) {
        return hash(tokens, from, to, null);
    }

    /** Hashes the whole pages of {@code tokens[from, to)}, chaining the first one from {@code prior}. */
    public PageHashes hashPages(int[] tokens, int from, int to, PageHash prior) {
        return hash(tokens, from, to, Objects.requireNonNull(prior, "prior"));
    }

    private PageHashes hash(int[] tokens, int from, int to, @Nullable PageHash prior) {
        Objects.checkFromToIndex(from, to, tokens.length);
        int pages = (to - from) / pageSizeTokens;
        long[] words = new long[4 * pages];
        int tokenBytes = pageSizeTokens * Integer.BYTES;
        boolean chained = prior != null;
        if (prior != null) {
            prior.writeTo(scratch, 0);
        }
        try {
            for (int p = 0; p < pages; p++) {
                int first = from + p * pageSizeTokens;
                if (pageSizeTokens >= BULK_COPY_MIN_TOKENS) {
                    MemorySegment.copy(tokens, first, scratchSegment, TOKEN_LE, PageHash.BYTES, pageSizeTokens);
                } else {
                    for (int t = 0; t < pageSizeTokens; t++) {
                        INT_LE.set(scratch, PageHash.BYTES + t * Integer.BYTES, tokens[first + t]);
                    }
                }
                if (chained) {
                    sha256.update(scratch, 0, PageHash.BYTES + tokenBytes);
                } else {
                    sha256.update(scratch, PageHash.BYTES, tokenBytes);
                    chained = true;
                }
                // The digest lands where the next page's prior belongs.
                sha256.digest(scratch, 0, PageHash.BYTES);
                words[4 * p] = (long) PageHash.LONG_BE.get(scratch, 0);
                words[4 * p + 1] = (long) PageHash.LONG_BE.get(scratch, 8);
                words[4 * p + 2] = (long) PageHash.LONG_BE.get(scratch, 16);
                words[4 * p + 3] = (long) PageHash.LONG_BE.get(scratch, 24);
            }
        } catch (DigestException e) {
            throw new IllegalStateException("SHA-256 refused a 32-byte output buffer", e);
        }
        return new PageHashes(words, 0, pages);
    }
}
