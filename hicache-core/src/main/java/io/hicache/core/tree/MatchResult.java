package io.hicache.core.tree;

/**
 * What a {@link RadixTree#match} found for a sequence of tokens. Along any path, the nodes evicted from the device
 * come last, so a match is a device part followed by a host-only tail. Immutable, but the nodes it names change as
 * the tree does: lock {@link #lastDeviceNode()} before relying on the device part.
 *
 * @param devicePages    pages of the prefix on the device
 * @param hostPages      pages of the tail that only the host holds
 * @param lastDeviceNode the deepest matched node on the device (the root when none is)
 * @param lastHostNode   the deepest matched node backed up to the host (the root when none is): where a prefetch
 *                       from the page store anchors
 * @param lastNode       the deepest matched node
 */
public record MatchResult(
        int devicePages, int hostPages, TreeNode lastDeviceNode, TreeNode lastHostNode, TreeNode lastNode) {
    /** Pages matched on either tier. */
    public int matchedPages() {
        return devicePages + hostPages;
    }
}
