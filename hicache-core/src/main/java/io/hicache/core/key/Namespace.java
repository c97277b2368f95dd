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
import org.jspecify.annotations.Nullable;

/**
 * Everything besides the tokens that decides a page's bytes: the key-identity contract of docs/keys.md. Model id
 * and weights revision, KV dtype and quantization scheme, page byte order and page size in tokens, tensor-parallel
 * rank and size (rank 0 of 1 for pages every rank shares, as MLA's are), tenant, an extra key (LoRA adapter, cache
 * salt, pool part {@code part=<name>}, pipeline or context-parallel rank such as {@code "pp1"}), and the key format
 * version. SGLang's page keys carry none of this, and engines sharing a tier have been served another model's, another
 * revision's or another dtype's KV (SGLang #24758, #31920, #38362; vLLM #45767). Here the same page hash in two
 * namespaces is two different pages.
 *
 * <p>Unknown fields have a neutral value: {@code ""} for the texts, 0 for the page size. A namespace that leaves a
 * field neutral shares pages only with namespaces that leave it neutral too; docs/keys.md says which fields an
 * engine cannot know and the user must set (the weights revision, mostly).
 *
 * <p>{@link #formatVersion()} is the generation of the key format: {@link #FORMAT_VERSION} for namespaces made
 * here. Version 1 is the format of releases before the weights revision, quantization, page size and tenant were
 * fields; it has none of them (they must be neutral), and its {@link #id()} is the digest those releases computed,
 * so the pages they stored can be named (and are told apart: a version 1 id never equals a version 2 id).
 *
 * <p>Immutable. {@link #id()} is a 128-bit digest (SHA-256, cut to 16 bytes) of the format version and every field,
 * the same in every process and language (no hash seed enters it), safe to use in paths and object names whatever
 * characters the texts contain; stores write it into every page's header.
 */
public final class Namespace {
    /** Longest model id, weights revision, quantization, tenant or extra key accepted, in characters. */
    public static final int MAX_TEXT_LENGTH = 512;
    /** Largest page size in tokens accepted. */
    public static final int MAX_PAGE_TOKENS = 1 << 20;
    /** Bytes written by {@link #writeIdTo}: the id as raw bytes. */
    public static final int ID_BYTES = 16;
    /** The key format version of namespaces made here. */
    public static final int FORMAT_VERSION = 2;
    /** The oldest key format version that can still be named (to tell its pages apart, never to share them). */
    public static final int OLDEST_FORMAT_VERSION = 1;

    private final String modelId;
    private final String weightsRevision;
    private final KvDtype kvDtype;
    private final String quantization;
    private final PageByteOrder pageByteOrder;
    private final int pageTokens;
    private final int tpRank;
    private final int tpSize;
    private final String tenant;
    private final String extraKey;
    private final int formatVersion;
    private final byte[] idBytes;
    private final String id;

    private Namespace(Builder b) {
        this.modelId = text(b.modelId, "modelId");
        Checks.requireArgument(!modelId.isEmpty(), "modelId must not be empty");
        this.weightsRevision = text(b.weightsRevision, "weightsRevision");
        this.kvDtype = Checks.checkNotNull(b.kvDtype, "kvDtype");
        this.quantization = text(b.quantization, "quantization");
        this.pageByteOrder = Checks.checkNotNull(b.pageByteOrder, "pageByteOrder");
        Checks.requireArgument(
                b.pageTokens >= 0 && b.pageTokens <= MAX_PAGE_TOKENS,
                "pageTokens must be in [0, %d] (0: not stated), was %d",
                MAX_PAGE_TOKENS,
                b.pageTokens);
        this.pageTokens = b.pageTokens;
        Checks.checkPositive(b.tpSize, "tpSize");
        Checks.requireArgument(
                b.tpRank >= 0 && b.tpRank < b.tpSize, "tpRank must be in [0, %d), was %d", b.tpSize, b.tpRank);
        this.tpRank = b.tpRank;
        this.tpSize = b.tpSize;
        this.tenant = text(b.tenant, "tenant");
        this.extraKey = text(b.extraKey, "extraKey");
        Checks.requireArgument(
                b.formatVersion >= OLDEST_FORMAT_VERSION && b.formatVersion <= FORMAT_VERSION,
                "key format version %d is not known here (%d to %d)",
                b.formatVersion,
                OLDEST_FORMAT_VERSION,
                FORMAT_VERSION);
        Checks.requireArgument(
                b.formatVersion > 1
                        || (weightsRevision.isEmpty() && quantization.isEmpty() && pageTokens == 0 && tenant.isEmpty()),
                "key format version 1 has no weights revision, quantization, page size or tenant");
        this.formatVersion = b.formatVersion;
        this.idBytes = digest();
        this.id = HexFormat.of().formatHex(idBytes);
    }

    private static String text(@Nullable String value, String name) {
        Checks.checkNotNull(value, name);
        Checks.requireArgument(
                value.length() <= MAX_TEXT_LENGTH,
                "%s is %d characters, over %d",
                name,
                value.length(),
                MAX_TEXT_LENGTH);
        return value;
    }

    /** A namespace of the current format with the neutral value in every field {@link Builder} leaves unset. */
    public static Namespace of(String modelId, KvDtype kvDtype, PageByteOrder pageByteOrder, int tpRank, int tpSize) {
        return builder(modelId)
                .kvDtype(kvDtype)
                .pageByteOrder(pageByteOrder)
                .tensorParallel(tpRank, tpSize)
                .build();
    }

    /** The namespace of pages in {@code format} for one rank of a model: dtype, byte order and page size from it. */
    public static Namespace of(String modelId, PageFormat format, int tpRank, int tpSize) {
        return builder(modelId)
                .kvDtype(format.geometry().dtype())
                .pageByteOrder(format.byteOrder())
                .pageTokens(format.pageSizeTokens())
                .tensorParallel(tpRank, tpSize)
                .build();
    }

    /** A builder for a namespace of {@code modelId}: bfloat16, layer-major, rank 0 of 1, every other field neutral. */
    public static Builder builder(String modelId) {
        Builder b = new Builder();
        b.modelId = modelId;
        return b;
    }

    /** A builder holding this namespace's fields. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.modelId = modelId;
        b.weightsRevision = weightsRevision;
        b.kvDtype = kvDtype;
        b.quantization = quantization;
        b.pageByteOrder = pageByteOrder;
        b.pageTokens = pageTokens;
        b.tpRank = tpRank;
        b.tpSize = tpSize;
        b.tenant = tenant;
        b.extraKey = extraKey;
        b.formatVersion = formatVersion;
        return b;
    }

    /** This namespace with another extra key ({@code ""} for none). */
    public Namespace withExtraKey(String extraKey) {
        return toBuilder().extraKey(extraKey).build();
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
        return toBuilder().modelId(modelId).build();
    }

    /** This namespace for another KV dtype. */
    public Namespace withKvDtype(KvDtype kvDtype) {
        return toBuilder().kvDtype(kvDtype).build();
    }

    /** This namespace for another page byte order. */
    public Namespace withPageByteOrder(PageByteOrder pageByteOrder) {
        return toBuilder().pageByteOrder(pageByteOrder).build();
    }

    /** This namespace for another tensor-parallel rank and size. */
    public Namespace withTensorParallel(int tpRank, int tpSize) {
        return toBuilder().tensorParallel(tpRank, tpSize).build();
    }

    /** This namespace for another page size in tokens (0: not stated). */
    public Namespace withPageTokens(int pageTokens) {
        return toBuilder().pageTokens(pageTokens).build();
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

    /** The weights revision (a commit, a checkpoint digest), {@code ""} when not stated. */
    public String weightsRevision() {
        return weightsRevision;
    }

    /** The KV quantization scheme beyond the dtype (scales per token or channel), {@code ""} for none. */
    public String quantization() {
        return quantization;
    }

    /** Tokens per page, 0 when not stated. */
    public int pageTokens() {
        return pageTokens;
    }

    /** The tenant, {@code ""} for the default one. */
    public String tenant() {
        return tenant;
    }

    /** The key format version: {@link #FORMAT_VERSION}, or an older one this namespace was made to name. */
    public int formatVersion() {
        return formatVersion;
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
        // Length-prefixed UTF-8 fields under a version tag: no two field tuples encode alike. Version 1 is the
        // digest of the releases before format 2, byte for byte, so that their pages keep their names.
        String[] fields = formatVersion == 1
                ? new String[] {
                    "hicache-namespace-v1",
                    modelId,
                    kvDtype.configName(),
                    pageByteOrder.configName(),
                    Integer.toString(tpRank),
                    Integer.toString(tpSize),
                    extraKey
                }
                : new String[] {
                    "hicache-namespace-v" + formatVersion,
                    modelId,
                    weightsRevision,
                    kvDtype.configName(),
                    quantization,
                    pageByteOrder.configName(),
                    Integer.toString(pageTokens),
                    Integer.toString(tpRank),
                    Integer.toString(tpSize),
                    tenant,
                    extraKey
                };
        ByteArrayOutputStream out = new ByteArrayOutputStream(192);
        for (String field : fields) {
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
                && n.formatVersion == formatVersion
                && n.modelId.equals(modelId)
                && n.weightsRevision.equals(weightsRevision)
                && n.kvDtype == kvDtype
                && n.quantization.equals(quantization)
                && n.pageByteOrder == pageByteOrder
                && n.pageTokens == pageTokens
                && n.tpRank == tpRank
                && n.tpSize == tpSize
                && n.tenant.equals(tenant)
                && n.extraKey.equals(extraKey);
    }

    @Override
    public int hashCode() {
        return id.hashCode();
    }

    /** A readable form for logs; control characters in the model id or extra key are escaped. */
    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("Namespace[model=").append(printable(modelId));
        optional(b, "revision", weightsRevision);
        b.append(", dtype=").append(kvDtype);
        optional(b, "quant", quantization);
        b.append(", order=").append(pageByteOrder);
        if (pageTokens != 0) {
            b.append(", page=").append(pageTokens);
        }
        b.append(", tp=").append(tpRank).append('/').append(tpSize);
        optional(b, "tenant", tenant);
        optional(b, "extra", extraKey);
        if (formatVersion != FORMAT_VERSION) {
            b.append(", format=").append(formatVersion);
        }
        return b.append(", id=").append(id).append(']').toString();
    }

    private static void optional(StringBuilder b, String name, String value) {
        if (!value.isEmpty()) {
            b.append(", ").append(name).append('=').append(printable(value));
        }
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

    /**
     * Collects a namespace's fields; {@link #build} checks them. Not thread-safe; each {@link #build} makes a new,
     * immutable namespace.
     */
    public static final class Builder {
        private String modelId = "";
        private String weightsRevision = "";
        private KvDtype kvDtype = KvDtype.BFLOAT16;
        private String quantization = "";
        private PageByteOrder pageByteOrder = PageByteOrder.LAYER_MAJOR;
        private int pageTokens;
        private int tpRank;
        private int tpSize = 1;
        private String tenant = "";
        private String extraKey = "";
        private int formatVersion = FORMAT_VERSION;

        private Builder() {}

        public Builder modelId(String value) {
            modelId = value;
            return this;
        }

        /** The weights revision (a commit, a checkpoint digest): a changed checkpoint must change it. */
        public Builder weightsRevision(String value) {
            weightsRevision = value;
            return this;
        }

        public Builder kvDtype(KvDtype value) {
            kvDtype = value;
            return this;
        }

        /** The KV quantization scheme when the dtype does not say it all ({@code "fp8-per-token-scale"}). */
        public Builder quantization(String value) {
            quantization = value;
            return this;
        }

        public Builder pageByteOrder(PageByteOrder value) {
            pageByteOrder = value;
            return this;
        }

        /** Tokens per page (0: not stated). */
        public Builder pageTokens(int value) {
            pageTokens = value;
            return this;
        }

        public Builder tensorParallel(int rank, int size) {
            tpRank = rank;
            tpSize = size;
            return this;
        }

        public Builder tenant(String value) {
            tenant = value;
            return this;
        }

        public Builder extraKey(String value) {
            extraKey = value;
            return this;
        }

        /** An older key format version, to name the pages an older release stored; {@link #FORMAT_VERSION} by default. */
        public Builder formatVersion(int value) {
            formatVersion = value;
            return this;
        }

        /**
         * @throws IllegalArgumentException naming the field that is out of bounds
         * @throws NullPointerException when a field was set to null
         */
        public Namespace build() {
            return new Namespace(this);
        }
    }
}
