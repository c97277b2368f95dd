package io.hicache.core.usage;

/**
 * The key-to-slot map behind {@link PageUsageIndex}: open addressing with linear probing in one {@code long[]}, each
 * cell holding the key's spread hash (high 32 bits) and its slot number plus one (low 32 bits; 0 marks an empty
 * cell). The hash in the cell lets a probe skip other keys, and a resize rehash, without touching the key objects;
 * removal shifts later cells back instead of leaving tombstones, so probe lengths do not grow with churn.
 *
 * <p>At most 3/4 of the cells are in use and the table doubles when that is reached, so it costs 10.7 to 21.3 bytes
 * per entry. Not thread-safe: the index's lock guards it.
 */
final class SlotTable {
    /** The table doubles once this fraction of its cells is in use. */
    private static final double MAX_LOAD = 0.75;

    private static final int MIN_CELLS = 16;
    private static final int MAX_CELLS = 1 << 30;

    private long[] cells;
    private int mask;
    private int size;
    private int growAt;

    SlotTable(int expectedEntries) {
        int cellCount = MIN_CELLS;
        while (cellCount < MAX_CELLS && cellCount * MAX_LOAD < expectedEntries) {
            cellCount <<= 1;
        }
        resize(cellCount);
    }

    /** The key's hash as the table keeps it: the key's own, multiplied so that sequential hash codes spread. */
    static int hash(Object key) {
        int h = key.hashCode() * 0x9E3779B9;
        return h ^ (h >>> 16);
    }

    /** The slot of {@code key}, whose {@link #hash} is {@code hash}, or -1; {@code keys} are the slots' keys. */
    int find(Object key, int hash, Object[] keys) {
        for (int i = hash & mask; ; i = (i + 1) & mask) {
            long cell = cells[i];
            if (cell == 0) {
                return -1;
            }
            if ((int) (cell >>> 32) == hash) {
                int slot = (int) cell - 1;
                Object k = keys[slot];
                if (k == key || k.equals(key)) {
                    return slot;
                }
            }
        }
    }

    /** Maps a key known to be absent, with hash {@code hash}, to {@code slot}. */
    void add(int hash, int slot) {
        if (size >= growAt) {
            if (cells.length == MAX_CELLS) {
                throw new IllegalStateException("the page usage index is full: " + size + " entries");
            }
            resize(cells.length << 1);
        }
        place(cells, mask, cell(hash, slot));
        size++;
    }

    /** Unmaps {@code slot}, whose key has hash {@code hash}; the slot must be mapped. */
    void remove(int hash, int slot) {
        long wanted = cell(hash, slot);
        int hole = hash & mask;
        while (cells[hole] != wanted) {
            hole = (hole + 1) & mask;
        }
        // Backward shift: a later cell of the same run moves into the hole unless its home lies after the hole,
        // which keeps every key reachable from its home without tombstones.
        for (int j = (hole + 1) & mask; cells[j] != 0; j = (j + 1) & mask) {
            int home = (int) (cells[j] >>> 32) & mask;
            if (((j - home) & mask) >= ((j - hole) & mask)) {
                cells[hole] = cells[j];
                hole = j;
            }
        }
        cells[hole] = 0;
        size--;
    }

    int size() {
        return size;
    }

    /** Cells, used or not: for the memory figure and tests. */
    int capacity() {
        return cells.length;
    }

    private static long cell(int hash, int slot) {
        return ((long) hash << 32) | ((slot + 1) & 0xFFFF_FFFFL);
    }

    private static void place(long[] cells, int mask, long cell) {
        int i = (int) (cell >>> 32) & mask;
        while (cells[i] != 0) {
            i = (i + 1) & mask;
        }
        cells[i] = cell;
    }

    private void resize(int cellCount) {
        long[] old = cells;
        cells = new long[cellCount];
        mask = cellCount - 1;
        growAt = (int) (cellCount * MAX_LOAD);
        if (old != null) {
            for (long cell : old) {
                if (cell != 0) {
                    place(cells, mask, cell);
                }
            }
        }
    }
}
