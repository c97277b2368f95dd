package io.hicache.core.page;

import io.hicache.core.util.Checks;

/**
 * A page: {@code pageSizeTokens} tokens of KV in a given geometry and host layout, with its derived sizes
 * and the offsets of its rows when it is one flat block (in a store, on the wire, in a staging buffer).
 * Immutable.
 *
 * <pre>
 * LAYER_MAJOR (layer_first, page_first_direct)      TOKEN_MAJOR (page_first)
 * +--------+--------+-----+---------+               +--------+--------+-----+---------+
 * | K l0 t0| K l0 t1| ... | K l0 tP | ...           | K t0 l0| K t0 l1| ... | K t0 lL | ...
 * +--------+--------+-----+---------+               +--------+--------+-----+---------+
 * then K of layer 1 ... K of layer L-1, then V       then K of token 1 ... token P-1, then V
 * </pre>
 * Each cell is one row of {@link KvGeometry#rowBytes()} bytes. MLA pages have K only.
 *
 * @param geometry       per-rank KV geometry
 * @param pageSizeTokens tokens per page, at least 1 ({@code page-size})
 * @param layout         host layout, which fixes the order of rows in a flat page
 */
public record PageFormat(KvGeometry geometry, int pageSizeTokens, HostLayout layout) {
    /**
     * Largest page accepted: 1 GiB. Real pages are KiB to a few MiB (64 tokens of a 70B model in bf16 are
     * 20 MiB); a bigger one is almost certainly a unit mistake, and some stores cap object sizes.
     */
    public static final long MAX_PAGE_BYTES = 1L << 30;

    static final int MAX_PAGE_SIZE_TOKENS = 1 << 20;

    public PageFormat {
        Checks.checkNotNull(geometry, "geometry");
        Checks.checkNotNull(layout, "layout");
        Checks.checkInRange(pageSizeTokens, 1, MAX_PAGE_SIZE_TOKENS, "pageSizeTokens");
        long bytes = geometry.tokenBytes() * pageSizeTokens;
        Checks.requireArgument(
                bytes <= MAX_PAGE_BYTES,
                "a page of %d tokens of %s is %d bytes, over the %d-byte limit; use a smaller page-size",
                pageSizeTokens,
                geometry,
                bytes,
                MAX_PAGE_BYTES);
    }

    /** Bytes of one whole page: all layers, K and V. */
    public long pageBytes() {
        return geometry.tokenBytes() * pageSizeTokens;
    }

    /** Bytes of one part (all of K, or all of V) of a page, over all layers. */
    public long partBytes() {
        return geometry.rowBytes() * geometry.layers() * pageSizeTokens;
    }

    /** Bytes of one layer of a page, K and V together: what a per-layer load moves per page. */
    public long layerBytes() {
        return geometry.rowBytes() * geometry.attention().parts() * pageSizeTokens;
    }

    /** Bytes of one row: one token, one layer, one part. */
    public long rowBytes() {
        return geometry.rowBytes();
    }

    /** The order of rows in a flat page. */
    public PageByteOrder byteOrder() {
        return layout.pageByteOrder();
    }

    /**
     * Offset of the row for {@code part} (0 = K, 1 = V), {@code layer} and {@code token} in a flat page.
     *
     * @throws IndexOutOfBoundsException when an index is out of range
     */
    public long rowOffset(int part, int layer, int token) {
        int parts = geometry.attention().parts();
        int layers = geometry.layers();
        if (part < 0 || part >= parts || layer < 0 || layer >= layers || token < 0 || token >= pageSizeTokens) {
            throw new IndexOutOfBoundsException("row (part " + part + ", layer " + layer + ", token " + token
                    + ") outside a page of " + parts + " parts, " + layers + " layers, " + pageSizeTokens + " tokens");
        }
        long row = switch (byteOrder()) {
            case LAYER_MAJOR -> ((long) part * layers + layer) * pageSizeTokens + token;
            case TOKEN_MAJOR -> ((long) part * pageSizeTokens + token) * layers + layer;
        };
        return row * rowBytes();
    }

    @Override
    public String toString() {
        return "PageFormat[" + geometry + ", " + pageSizeTokens + " tokens, " + layout + ", " + pageBytes() + " bytes]";
    }
}
