package io.hicache.core.key;

import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

/**
 * Everything besides the tokens that decides a page's bytes: model, KV dtype, page byte order, tensor-parallel
 * rank and size, and an optional extra key (LoRA adapter, cache salt, tenant). SGLang's page keys carry none
 * of this, and its users have been served another model's or another dtype's KV (issues #24758, #33268,
 * #26747). Here the same page hash in two namespaces is two different pages.
 *
 * <p>Other parallel dimensions that change a rank's bytes (a pipeline stage's layers, a context-parallel
 * rank's tokens) must go into the extra key, for example {@code "pp1"}.
 *
 * <p>Immutable. {@link #id()} is a 128-bit digest of all fields, safe to use in paths and object names
 * whatever characters the model id or extra key contain.
 */
public final class Namespace {
    /** Longest model id or extra key accepted, in characters. */
    public static final int MAX_TEXT_LENGTH = 512;
    /** Bytes written by {@link #writeIdTo}: the id as raw bytes. */
    public static final int ID_BYTES = 16;

    private final String modelId;
    private final KvDtype kvDtype;
    private final PageByteOrder pageByteOrder;
    private final int tpRank;
    private final int tpSize;
    private final String extraKey;
    private final byte[] idBytes;
    private final String id;

    private Namespace(
            String modelId, KvDtype kvDtype, PageByteOrder pageByteOrder, int tpRank, int tpSize, String extraKey) {
        Checks.checkNotNull(modelId, "modelId");
        Checks.requireArgument(!modelId.isEmpty(), "modelId must not be empty");
        Checks.requireArgument(
                modelId.length() <= MAX_TEXT_LENGTH,
                "modelId is %d characters, over %d",
                modelId.length(),
                MAX_TEXT_LENGTH);
        Checks.checkNotNull(extraKey, "extraKey");
        Checks.requireArgument(
                extraKey.length() <= MAX_TEXT_LENGTH,
                "extraKey is %d characters, over %d",
                extraKey.length(),
                MAX_TEXT_LENGTH);
        Checks.checkPositive(tpSize, "tpSize");
        Checks.requireArgument(tpRank >= 0 && tpRank < tpSize, "tpRank must be in [0, %d), was %d", tpSize, tpRank);
        this.modelId = modelId;
        this.kvDtype = Checks.checkNotNull(kvDtype, "kvDtype");
        this.pageByteOrder = Checks.checkNotNull(pageByteOrder, "pageByteOrder");
        this.tpRank = tpRank;
        this.tpSize = tpSize;
        this.extraKey = extraKey;
        this.idBytes = digest();
        this.id = HexFormat.of().formatHex(idBytes);
    }

    /** A namespace without an extra key. */
    public static Namespace of(String modelId, KvDtype kvDtype, PageByteOrder pageByteOrder, int tpRank, int tpSize) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, "");
    }

    /** The namespace of pages in {@code format} for one rank of a model. */
    public static Namespace of(String modelId, PageFormat format, int tpRank, int tpSize) {
        return of(modelId, format.geometry().dtype(), format.byteOrder(), tpRank, tpSize);
    }

    /** This namespace with another extra key ({@code ""} for none). */
    public Namespace withExtraKey(String extraKey) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, extraKey);
    }

    /**
     * The namespace of {@code part} of this namespace's pages: this one for {@link PagePart#KV}, else this one with
     * {@code part=<name>} after its extra key ({@code "part=mamba"}, {@code "lora-a/part=swa"}), as SGLang's backend
     * in {@code clients/python} names them. Ranks are this namespace's: a part that an MLA model keeps per rank (its
     * recurrent state) starts from the rank's own namespace, not from the shared rank 0 of 1.
     */
    public Namespace forPart(PagePart part) {
        Checks.checkNotNull(part, "part");
        if (part == PagePart.KV) {
            return this;
        }
        String tag = "part=" + part.wireName();
        return withExtraKey(extraKey.isEmpty() ? tag : extraKey + "/" + tag);
    }

    /** This namespace for another model. */
    public Namespace withModelId(String modelId) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, extraKey);
    }

    /** This namespace for another KV dtype. */
    public Namespace withKvDtype(KvDtype kvDtype) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, extraKey);
    }

    /** This namespace for another page byte order. */
    public Namespace withPageByteOrder(PageByteOrder pageByteOrder) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, extraKey);
    }

    /** This namespace for another tensor-parallel rank and size. */
    public Namespace withTensorParallel(int tpRank, int tpSize) {
        return new Namespace(modelId, kvDtype, pageByteOrder, tpRank, tpSize, extraKey);
    }

    /**
     * This namespace with no tensor-parallel rank in it (rank 0 of 1): for pages that are the same bytes on every rank,
     * as an MLA model's latent KV is, so that all ranks share one copy of each page in the page store.
     */
    public Namespace sharedByRanks() {
        return withTensorParallel(0, 1);
    }

    /** The store key of page {@code hash} in this namespace. */
    public StoreKey key(PageHash hash) {
        return new StoreKey(this, hash);
    }

    /** The store keys of {@code hashes} in this namespace, in order. */
    public List<StoreKey> keys(PageHashes hashes) {
        List<StoreKey> keys = new ArrayList<>(hashes.size());
        for (int i = 0; i < hashes.size(); i++) {
            keys.add(new StoreKey(this, hashes.get(i)));
        }
        return keys;
    }

    public String modelId() {
        return modelId;
    }

    public KvDtype kvDtype() {
        return kvDtype;
    }

    public PageByteOrder pageByteOrder() {
        return pageByteOrder;
    }

    public int tpRank() {
        return tpRank;
    }

    public int tpSize() {
        return tpSize;
    }

    /** The extra key, {@code ""} when there is none. */
    public String extraKey() {
        return extraKey;
    }

    /** 32 lowercase hex characters: a digest of every field, equal exactly when the namespaces are equal. */
    public String id() {
        return id;
    }

    /** Writes the id's 16 raw bytes to {@code dst[offset ..]}. */
    public void writeIdTo(byte[] dst, int offset) {
        System.arraycopy(idBytes, 0, dst, offset, ID_BYTES);
    }

    private byte[] digest() {
        // Length-prefixed fields under a version tag: no two field tuples encode alike.
        ByteArrayOutputStream out = new ByteArrayOutputStream(128);
        for (String field : new String[] {
            "hicache-namespace-v1",
            modelId,
            kvDtype.configName(),
            pageByteOrder.configName(),
            Integer.toString(tpRank),
            Integer.toString(tpSize),
            extraKey
        }) {
            byte[] utf8 = field.getBytes(StandardCharsets.UTF_8);
            out.write(utf8.length >>> 8);
            out.write(utf8.length);
            out.writeBytes(utf8);
        }
        try {
            byte[] sha = MessageDigest.getInstance("SHA-256").digest(out.toByteArray());
            return Arrays.copyOf(sha, ID_BYTES);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no SHA-256", e);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Namespace n
                && n.id.equals(id)
                && n.modelId.equals(modelId)
                && n.extraKey.equals(extraKey)
                && n.kvDtype == kvDtype
                && n.pageByteOrder == pageByteOrder
                && n.tpRank == tpRank
                && n.tpSize == tpSize;
    }

    @Override
    public int hashCode() {
        return id.hashCode();
    }

    /** A readable form for logs; control characters in the model id or extra key are escaped. */
    @Override
    public String toString() {
        return "Namespace[model=" + printable(modelId) + ", dtype=" + kvDtype + ", order=" + pageByteOrder
                + ", tp=" + tpRank + "/" + tpSize + (extraKey.isEmpty() ? "" : ", extra=" + printable(extraKey))
                + ", id=" + id + "]";
    }

    private static String printable(String s) {
        StringBuilder b = new StringBuilder(s.length());
        s.codePoints().forEach(c -> {
            if (Character.isISOControl(c)) {
                b.append(String.format("\\u%04x", c));
            } else {
                b.appendCodePoint(c);
            }
        });
        return b.toString();
    }
}
