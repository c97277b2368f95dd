package io.hicache.core.usage;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * Per-namespace totals and list ends for {@link PageUsageIndex}: each namespace seen gets a small number, and with
 * it the first (oldest) and last slot of its own list, its entry count and its bytes. Numbers are never reused: a
 * store serves few namespaces (models and ranks), so one that empties keeps its few bytes here. Not thread-safe: the
 * index's lock guards it.
 */
final class NamespaceLists {
    static final int NIL = -1;

    private final Map<String, Integer> ids = new HashMap<>();
    int[] head = new int[4];
    int[] tail = new int[4];
    int[] count = new int[4];
    long[] bytes = new long[4];

    /** The number of {@code namespace}, given one now if it has none. */
    int idOf(String namespace) {
        Integer id = ids.get(namespace);
        if (id != null) {
            return id;
        }
        int n = ids.size();
        if (n == head.length) {
            int grown = n * 2;
            head = Arrays.copyOf(head, grown);
            tail = Arrays.copyOf(tail, grown);
            count = Arrays.copyOf(count, grown);
            bytes = Arrays.copyOf(bytes, grown);
        }
        head[n] = NIL;
        tail[n] = NIL;
        ids.put(namespace, n);
        return n;
    }

    /** The number of {@code namespace}, or {@link #NIL} if it never had an entry. */
    int find(String namespace) {
        Integer id = ids.get(namespace);
        return id == null ? NIL : id;
    }

    int namespaces() {
        return ids.size();
    }
}
