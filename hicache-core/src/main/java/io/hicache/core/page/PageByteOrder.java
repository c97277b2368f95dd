package io.hicache.core.page;

/**
 * The order of the rows in a flat page, where a row is one token's vector for one layer and one part
 * (K or V): {@code heads * headDim} elements. SGLang flattens pages in these two orders, depending on the
 * host layout, so pages keep the byte format an SGLang engine would write for the same layout.
 */
public enum PageByteOrder {
    /** [part][layer][token]: {@code layer_first} and {@code page_first_direct} pages. */
    LAYER_MAJOR("layer_major"),
    /** [part][token][layer]: {@code page_first} pages. */
    TOKEN_MAJOR("token_major");

    private final String configName;

    PageByteOrder(String configName) {
        this.configName = configName;
    }

    /** The name used in namespaces: two layouts with the same byte order can share stored pages. */
    public String configName() {
        return configName;
    }

    @Override
    public String toString() {
        return configName;
    }
}
