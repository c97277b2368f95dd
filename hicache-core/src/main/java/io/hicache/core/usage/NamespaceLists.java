package io.hicache.core.usage;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * Per-namespace totals and list ends for {@link PageUsageIndex}: each namespace holding entries has a small number,
 * and with it the first (oldest) and last slot of its own list, its entry count and its bytes. A namespace's number
 * is given back when its last entry leaves and handed to the next new namespace, so the index keeps nothing for the
 * namespaces that came and went (a daemon whose clients use a fresh cache salt per request meets millions); its
 * arrays and name table keep the size the most namespaces at once gave them. Not
 * thread-safe: the index's lock guards it.
 */
final class NamespaceLists {
    static final int NIL = -1;

    private final Map<String, Integer> ids = new HashMap<>();
    /** The namespace of each number in use, null for a free number. */
    private String[] names = new String[4];
    /** Numbers given back, reused first: a stack. */
    private int[] free = new int[4];

    private int freeCount;
    /** Numbers handed out so far, in use or free: the arrays' used length. */
    private int numbers;

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
        int n;
        if (freeCount > 0) {
            n = free[--freeCount];
        } else {
            n = numbers++;
            if (n == head.length) {
                int grown = n * 2;
                head = Arrays.copyOf(head, grown);
                tail = Arrays.copyOf(tail, grown);
                count = Arrays.copyOf(count, grown);
                bytes = Arrays.copyOf(bytes, grown);
                names = Arrays.copyOf(names, grown);
                free = Arrays.copyOf(free, grown);
            }
        }
        head[n] = NIL;
        tail[n] = NIL;
        count[n] = 0;
        bytes[n] = 0;
        names[n] = namespace;
        ids.put(namespace, n);
        return n;
    }

    /** Gives back the number of a namespace whose last entry left ({@code count} 0). */
    void release(int n) {
        ids.remove(names[n]);
        names[n] = null;
        head[n] = NIL;
        tail[n] = NIL;
        free[freeCount++] = n;
    }

    /** The number of {@code namespace}, or {@link #NIL} if it holds no entry. */
    int find(String namespace) {
        Integer id = ids.get(namespace);
        return id == null ? NIL : id;
    }

    /** Namespaces holding entries now. */
    int namespaces() {
        return ids.size();
    }

    /** Numbers handed out so far, in use or free: every number is below it. */
    int numbers() {
        return numbers;
    }
}
