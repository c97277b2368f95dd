package io.hicache.core.key;

import io.hicache.core.util.Checks;
import java.util.AbstractList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * An immutable sequence of page hashes, packed four longs per page (no object per page), as produced by
 * {@link PageHasher} for a token sequence. Slicing shares the packed array, so splitting a radix-tree
 * node's hashes at a page boundary copies nothing. Thread-safe.
 */
public final class PageHashes {
    private static final PageHashes EMPTY = new PageHashes(new long[0], 0, 0);

    private final long[] words;
    private final int first;
    private final int size;

    PageHashes(long[] words, int first, int size) {
        this.words = words;
        this.first = first;
        this.size = size;
    }

    /** No hashes. */
    public static PageHashes empty() {
        return EMPTY;
    }

    /** The given hashes, in order. */
    public static PageHashes of(List<PageHash> hashes) {
        long[] words = new long[hashes.size() * 4];
        for (int i = 0; i < hashes.size(); i++) {
            PageHash h = Checks.checkNotNull(hashes.get(i), "hashes[" + i + "]");
            words[4 * i] = h.w0;
            words[4 * i + 1] = h.w1;
            words[4 * i + 2] = h.w2;
            words[4 * i + 3] = h.w3;
        }
        return new PageHashes(words, 0, hashes.size());
    }

    /** Number of pages. */
    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /** The hash of page {@code index}. */
    public PageHash get(int index) {
        Objects.checkIndex(index, size);
        int w = 4 * (first + index);
        return new PageHash(words[w], words[w + 1], words[w + 2], words[w + 3]);
    }

    /** The hash of the last page: the prior that the next page chains from. */
    public PageHash last() {
        Checks.requireState(size > 0, "no page hashes");
        return get(size - 1);
    }

    /** Pages {@code [from, to)}, sharing storage with this sequence. */
    public PageHashes slice(int from, int to) {
        Objects.checkFromToIndex(from, to, size);
        return from == to ? EMPTY : new PageHashes(words, first + from, to - from);
    }

    /** This sequence followed by {@code more}. */
    public PageHashes concat(PageHashes more) {
        if (more.size == 0) {
            return this;
        }
        if (size == 0) {
            return more;
        }
        long[] joined = Arrays.copyOfRange(words, 4 * first, 4 * (first + size + more.size));
        System.arraycopy(more.words, 4 * more.first, joined, 4 * size, 4 * more.size);
        return new PageHashes(joined, 0, size + more.size);
    }

    /** A list view; each access creates one {@link PageHash}. */
    public List<PageHash> asList() {
        return new AbstractList<>() {
            @Override
            public PageHash get(int index) {
                return PageHashes.this.get(index);
            }

            @Override
            public int size() {
                return size;
            }
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PageHashes p
                && p.size == size
                && Arrays.equals(words, 4 * first, 4 * (first + size), p.words, 4 * p.first, 4 * (p.first + size));
    }

    @Override
    public int hashCode() {
        int h = 1;
        for (int i = 4 * first; i < 4 * (first + size); i++) {
            h = 31 * h + Long.hashCode(words[i]);
        }
        return h;
    }

    @Override
    public String toString() {
        return size <= 4 ? asList().toString() : "PageHashes[" + size + " pages, last " + last() + "]";
    }
}
