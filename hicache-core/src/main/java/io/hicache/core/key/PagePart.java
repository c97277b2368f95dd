package io.hicache.core.key;

import io.hicache.core.util.Checks;

/**
 * A part of a hybrid model's page: what one layer kind keeps of the prefix a page hash names. A full-attention model
 * has the {@link #KV} part only. A hybrid model also has sliding-window KV (the last pages of a window), a recurrent
 * state checkpointed after a page (Mamba, linear attention), or sparse attention's indexer keys. Each part is stored
 * under its own namespace ({@link Namespace#forPart}) and the same page hash, so one hash names every part of a prefix
 * and no part is ever read as another. The names are SGLang's pool names ({@code PoolName}), and the namespaces the
 * ones its storage backend in {@code clients/python} (hicache.sglang.hybrid) writes.
 *
 * <p>Immutable.
 */
public enum PagePart {
    /** The full-attention KV page: the part every model has, in the namespace itself. */
    KV("kv", Restore.ALL_PAGES),
    /** Sliding-window KV: a prefix needs the window's last pages only. */
    SLIDING_WINDOW("swa", Restore.TRAILING_PAGES),
    /** A recurrent state (Mamba, linear attention) after a page: a prefix needs the one at its end. */
    RECURRENT_STATE("mamba", Restore.TRAILING_PAGES),
    /** Sparse attention's indexer keys (DeepSeek's DSA): every page of a prefix needs its own. */
    SPARSE_INDEXER("indexer", Restore.ALL_PAGES),
    /** A standalone speculative-decoding draft model's KV page. */
    DRAFT("draft", Restore.ALL_PAGES),
    /** The draft model's sliding-window KV. */
    DRAFT_SLIDING_WINDOW("draft_swa", Restore.TRAILING_PAGES),
    /** The draft model's indexer keys. */
    DRAFT_SPARSE_INDEXER("draft_indexer", Restore.ALL_PAGES);

    /** Which pages of a prefix a part must hold for the prefix to be restored. */
    public enum Restore {
        /** Every page of the prefix. */
        ALL_PAGES,
        /** The last pages only (a window, or the one state at the end). */
        TRAILING_PAGES
    }

    private final String wireName;
    private final Restore restore;

    PagePart(String wireName, Restore restore) {
        this.wireName = wireName;
        this.restore = restore;
    }

    /** The name in namespaces and in SGLang ({@code "kv"}, {@code "swa"}, {@code "mamba"}, {@code "indexer"}...). */
    public String wireName() {
        return wireName;
    }

    /** Which of a prefix's pages this part must hold. */
    public Restore restore() {
        return restore;
    }

    /**
     * The part named {@code wireName}.
     *
     * @throws IllegalArgumentException for a name no part has, listing the names
     */
    public static PagePart fromWireName(String wireName) {
        Checks.checkNotNull(wireName, "wireName");
        for (PagePart p : values()) {
            if (p.wireName.equals(wireName)) {
                return p;
            }
        }
        throw new IllegalArgumentException(
                "no page part '" + wireName + "' (kv, swa, mamba, indexer, draft, draft_swa, draft_indexer)");
    }
}
