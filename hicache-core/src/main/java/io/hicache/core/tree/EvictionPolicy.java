package io.hicache.core.tree;

import java.util.Locale;

/**
 * The order in which leaves are evicted: the leaf with the lowest priority goes first. Kept apart from the tree so
 * that a policy can be chosen ({@code radix-eviction-policy}) or added without touching it. Implementations are
 * stateless and thread-safe.
 */
public interface EvictionPolicy {
    /** The node's eviction priority: lower is evicted sooner. */
    long priority(TreeNode node);

    /** The policy's configuration name. */
    String name();

    /** Least recently used first (SGLang's default). */
    EvictionPolicy LRU = new EvictionPolicy() {
        @Override
        public long priority(TreeNode node) {
            return node.lastAccess();
        }

        @Override
        public String name() {
            return "lru";
        }
    };

    /** Least frequently used first, then least recently used among equals. */
    EvictionPolicy LFU = new EvictionPolicy() {
        @Override
        public long priority(TreeNode node) {
            // Hit count in the high bits, recency in the low 40: a tie on hits falls back to LRU.
            return ((long) Math.min(node.hitCount(), (1 << 23) - 1) << 40) | (node.lastAccess() & ((1L << 40) - 1));
        }

        @Override
        public String name() {
            return "lfu";
        }
    };

    /** The policy named {@code name} ({@code lru} or {@code lfu}). */
    static EvictionPolicy named(String name) {
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "lru" -> LRU;
            case "lfu" -> LFU;
            default ->
                throw new IllegalArgumentException("unknown eviction policy '" + name + "': expected lru or lfu");
        };
    }
}
