package io.hicache.core.memory;

import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.util.BitSet;

/**
 * The argument checks every device runtime applies to a copy before it starts, so all runtimes reject the same
 * mistakes with the same messages. Part of the device runtime SPI (for implementations such as the emulated and CUDA
 * runtimes), not of the API an engine calls. Stateless.
 */
public final class CopyChecks {
    private CopyChecks() {}

    /**
     * Checks a copy of {@code sources[i]} to {@code destinations[i]}.
     *
     * @throws IllegalArgumentException for lists of different lengths, an index out of range, or a destination
     *     named twice
     */
    public static void checkPairs(
            int[] sources,
            int sourceLimit,
            String sourceName,
            int[] destinations,
            int destinationLimit,
            String destinationName) {
        Checks.checkNotNull(sources, sourceName);
        Checks.checkNotNull(destinations, destinationName);
        Checks.requireArgument(
                sources.length == destinations.length,
                "a copy pairs each source with a destination: %d %s, %d %s",
                sources.length,
                sourceName,
                destinations.length,
                destinationName);
        BitSet seen = new BitSet();
        for (int i = 0; i < sources.length; i++) {
            int s = sources[i];
            int d = destinations[i];
            // Tested inline, messages built only on failure: this runs once per page of every copy.
            if (s < 0 || s >= sourceLimit) {
                throw new IllegalArgumentException(
                        String.format("%s[%d] = %d is out of range [0, %d)", sourceName, i, s, sourceLimit));
            }
            if (d < 0 || d >= destinationLimit) {
                throw new IllegalArgumentException(
                        String.format("%s[%d] = %d is out of range [0, %d)", destinationName, i, d, destinationLimit));
            }
            if (seen.get(d)) {
                throw new IllegalArgumentException(String.format(
                        "%s[%d] = %d is named twice: two pages cannot land on one", destinationName, i, d));
            }
            seen.set(d);
        }
    }

    /**
     * Checks that a host slab holds pages of the pool's geometry and page size (its layout may differ).
     *
     * @throws IllegalArgumentException naming both formats
     */
    public static void checkSameGeometry(PageFormat pool, HostSlab host) {
        PageFormat slab = host.format();
        Checks.requireArgument(
                slab.geometry().equals(pool.geometry()) && slab.pageSizeTokens() == pool.pageSizeTokens(),
                "the host slab holds %s, the KV pool %s: geometry and page size must match",
                slab,
                pool);
    }

    /**
     * Checks that {@code [firstLayer, firstLayer + layerCount)} is a non-empty range of the format's layers.
     *
     * @throws IllegalArgumentException naming the range and the layers
     */
    public static void checkLayers(PageFormat format, int firstLayer, int layerCount) {
        int layers = format.geometry().layers();
        Checks.requireArgument(
                firstLayer >= 0 && layerCount > 0 && firstLayer <= layers - layerCount,
                "layers [%d, %d) are not a range of the format's %d layers",
                firstLayer,
                firstLayer + layerCount,
                layers);
    }
}
