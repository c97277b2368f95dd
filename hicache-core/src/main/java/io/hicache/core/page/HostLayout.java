package io.hicache.core.page;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * How the host tier (L2) arranges KV, with SGLang's names ({@code hicache-mem-layout}). N is slots
 * (tokens), P pages, L layers, H heads, D head dim; the leading 2 is K and V (absent for MLA).
 *
 * <ul>
 *   <li>{@code layer_first} [2, L, N, H, D]: the device's own layout, so per-layer loads copy long runs;
 *       a page is scattered over the slab, so L3 I/O goes through a staging copy.
 *   <li>{@code page_first} [2, N, L, H, D]: one token's data for all layers is adjacent, so a page is a
 *       contiguous block and L3 I/O needs no staging; device copies are token-by-layer granular.
 *   <li>{@code page_first_direct} [2, P, L, page, H, D]: a page's tokens for one layer are adjacent, so a
 *       load can copy page-by-layer runs and L3 I/O still needs no staging.
 * </ul>
 *
 * <p>In a store, a page is one flat block whose order follows its layout; see {@link PageByteOrder}.
 */
public enum HostLayout {
    LAYER_FIRST("layer_first", PageByteOrder.LAYER_MAJOR),
    PAGE_FIRST("page_first", PageByteOrder.TOKEN_MAJOR),
    PAGE_FIRST_DIRECT("page_first_direct", PageByteOrder.LAYER_MAJOR);

    private final String configName;
    private final PageByteOrder pageByteOrder;

    HostLayout(String configName, PageByteOrder pageByteOrder) {
        this.configName = configName;
        this.pageByteOrder = pageByteOrder;
    }

    /** The name used in configuration ({@code hicache-mem-layout}) and logs. */
    public String configName() {
        return configName;
    }

    /** The order of a page's bytes when it leaves the host tier as one flat block. */
    public PageByteOrder pageByteOrder() {
        return pageByteOrder;
    }

    /** Parses a configuration name, case-insensitively. */
    public static HostLayout parse(String name) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        for (HostLayout layout : values()) {
            if (layout.configName.equals(wanted)) {
                return layout;
            }
        }
        throw new IllegalArgumentException("unknown host layout '" + name + "'; expected one of "
                + Arrays.stream(values()).map(HostLayout::configName).collect(Collectors.joining(", ")));
    }

    @Override
    public String toString() {
        return configName;
    }
}
