package io.hicache.core.memory;

import io.hicache.core.page.PageFormat;

/**
 * Where a KV pool keeps a page on a device, as engines do: layer-first, each layer holding a K buffer and a
 * V buffer of token slots.
 *
 * <pre>
 * [layer][part][page][token][heads*dim]     a page's (layer, part) is one run of pageSize rows
 * </pre>
 *
 * <p>Every device runtime uses this arrangement, so copy code and kernels share one offset formula.
 * Stateless.
 */
public final class DeviceLayout {
    private DeviceLayout() {}

    /** Bytes of a pool of {@code pages} pages. */
    public static long poolBytes(PageFormat format, int pages) {
        return Math.multiplyExact(format.pageBytes(), (long) pages);
    }

    /** Bytes of one (layer, part) run of a page. */
    public static long chunkBytes(PageFormat format) {
        return format.rowBytes() * format.pageSizeTokens();
    }

    /** Offset of layer {@code layer}, part {@code part} of page {@code page} in a pool of {@code pages} pages. */
    public static long chunkOffset(PageFormat format, int pages, int page, int layer, int part) {
        int parts = format.geometry().attention().parts();
        return (((long) layer * parts + part) * pages + page) * chunkBytes(format);
    }
}
