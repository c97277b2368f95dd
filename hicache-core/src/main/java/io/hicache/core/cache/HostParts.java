package io.hicache.core.cache;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PagePart;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.store.HybridHits;
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The host tier of a hybrid model's parts (the window KV and the recurrent states), beside the tree that holds the
 * full-attention pages: off-heap slots for window pages and state checkpoints, keyed by the page hash of the KV page
 * they belong to, so that one hash names every part of a prefix (as in the page store, {@link PagePart}).
 *
 * <p>What is kept are <em>endpoints</em>: for a prefix of {@code e} pages, the window pages {@code [e - W, e)} and the
 * state after page {@code e - 1}, exactly what restoring it needs (SGLang's hybrid radix caches keep a Mamba state
 * per node end and tombstone the window KV no node end can use; here the endpoints are where the engine gave parts,
 * usually each commit's end). Window pages older than every endpoint's window are never kept: no suffix can use them.
 * Endpoints are evicted least recently used first, except those a {@link Hold} pins (a request using them, an upload
 * reading them); an entry shared by endpoints (window pages of overlapping ones) lives until the last goes.
 *
 * <p>Thread-safe (its own monitor: the prefetch's query loop fills it without the cache's lock). Owns its memory,
 * freed by {@link #close()}.
 */
final class HostParts implements AutoCloseable {
    /** One stored part: its slot and how many endpoints and holds refer to it. */
    private static final class Entry {
        final int slot;
        int refs;

        Entry(int slot) {
            this.slot = slot;
        }
    }

    /**
     * References to the entries of one endpoint: an endpoint kept in the LRU, or a pin while a request restores from
     * it or an upload reads it. Released once.
     */
    static final class Hold {
        final int endPage;
        /** The hash of the endpoint's last page. */
        final PageHash end;

        final List<PageHash> window;
        final @Nullable PageHash state;
        /** A pin (a request's, an upload's), not a kept endpoint. */
        final boolean pin;

        boolean released;

        Hold(int endPage, PageHash end, List<PageHash> window, @Nullable PageHash state, boolean pin) {
            this.endPage = endPage;
            this.end = end;
            this.pin = pin;
            this.window = window;
            this.state = state;
        }
    }

    /** An endpoint being filled from the page store: the slots taken for the parts the host did not hold. */
    record Fill(Hold hold, List<PagePart> parts, List<PageHash> hashes, List<MemorySegment> targets) {}

    private final HybridGeometry geometry;
    private final int windowPages;
    private final long windowBytes;
    private final long stateBytes;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment windowSlab;
    private final MemorySegment stateSlab;
    private final Slots freeWindow;
    private final Slots freeState;
    private final Map<PageHash, Entry> window = new HashMap<>();
    private final Map<PageHash, Entry> state = new HashMap<>();
    /** The endpoints kept, by their last page's hash, least recently used first. */
    private final LinkedHashMap<PageHash, Hold> endpoints = new LinkedHashMap<>(16, 0.75f, true);
    /** Pins per end: an end that is pinned is not evicted. */
    private final Map<PageHash, Integer> pins = new HashMap<>();

    private boolean closed;

    /**
     * Host memory of {@code bytes} for the parts of {@code geometry} in pages of {@code pageTokens}: half for window
     * pages and half for states when the model has both.
     *
     * @throws IllegalArgumentException when the geometry has no parts, or {@code bytes} holds less than one endpoint
     */
    HostParts(HybridGeometry geometry, int pageTokens, long bytes) {
        Checks.requireArgument(geometry.hybrid(), "a model of full-attention layers only has no parts to keep");
        this.geometry = geometry;
        this.windowPages = geometry.windowPages(pageTokens);
        this.windowBytes = geometry.windowPageBytes(pageTokens);
        this.stateBytes = geometry.stateBytes().orElse(0);
        long windowShare = stateBytes == 0 ? bytes : windowBytes == 0 ? 0 : bytes / 2;
        int windowSlots = windowBytes == 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, windowShare / windowBytes);
        int stateSlots = stateBytes == 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, (bytes - windowShare) / stateBytes);
        Checks.requireArgument(
                windowSlots >= windowPages && (stateBytes == 0 || stateSlots >= 1),
                "hicache-hybrid-host-bytes %s holds %s window pages of %s bytes and %s states of %s bytes: less than one"
                        + " prefix's end needs (%s window pages, %s state)",
                bytes,
                windowSlots,
                windowBytes,
                stateSlots,
                stateBytes,
                windowPages,
                stateBytes == 0 ? 0 : 1);
        this.windowSlab = windowSlots == 0 ? MemorySegment.NULL : arena.allocate(windowSlots * windowBytes, 64);
        this.stateSlab = stateSlots == 0 ? MemorySegment.NULL : arena.allocate(stateSlots * stateBytes, 64);
        this.freeWindow = new Slots(windowSlots);
        this.freeState = new Slots(stateSlots);
    }

    /** Window pages an endpoint keeps: {@code min(W, endPage)}. */
    int windowPagesAt(int endPage) {
        return Math.min(windowPages, endPage);
    }

    /**
     * The greatest {@code e <= kvPages} whose parts this tier holds: see {@link HybridHits#restorablePages}.
     *
     * @param hashes the prefix's page hashes, at least {@code kvPages} of them
     */
    synchronized int restorablePages(List<PageHash> hashes, int kvPages) {
        return HybridHits.restorablePages(kvPages, new int[0], trailing(hashes, this::heldHere));
    }

    /** Per page of {@code hashes}, whether this tier holds {@code part} of it. */
    synchronized boolean[] heldHere(PagePart part, List<PageHash> hashes) {
        Map<PageHash, Entry> entries = part == PagePart.SLIDING_WINDOW ? window : state;
        boolean[] held = new boolean[hashes.size()];
        for (int i = 0; i < held.length; i++) {
            held[i] = entries.containsKey(hashes.get(i));
        }
        return held;
    }

    /** The trailing parts of the model, over {@code held}: for {@link HybridHits#restorablePages}. */
    List<HybridHits.Trailing> trailing(List<PageHash> hashes, Held held) {
        List<HybridHits.Trailing> parts = new ArrayList<>(2);
        if (windowBytes > 0) {
            parts.add(new HybridHits.Trailing(windowPages, runOf(hashes, PagePart.SLIDING_WINDOW, held)));
        }
        if (stateBytes > 0) {
            parts.add(new HybridHits.Trailing(1, runOf(hashes, PagePart.RECURRENT_STATE, held)));
        }
        return parts;
    }

    /** Where a part of pages is held: asked a window's pages at a time, so that a store can be asked them at once. */
    @FunctionalInterface
    interface Held {
        boolean[] has(PagePart part, List<PageHash> hashes);
    }

    private static HybridHits.Presence runOf(List<PageHash> hashes, PagePart part, Held held) {
        return (from, to) -> {
            boolean[] has = held.has(part, hashes.subList(from, to));
            int n = 0;
            while (n < has.length && has[n]) {
                n++;
            }
            return n;
        };
    }

    /**
     * Pins the greatest endpoint {@code e <= kvPages} whose parts are held ({@link #restorablePages}), so that it
     * stays until {@link #release}; null when there is none (nothing of the prefix can be restored).
     */
    synchronized @Nullable Hold pinRestorable(List<PageHash> hashes, int kvPages) {
        return pinAt(hashes, restorablePages(hashes, kvPages));
    }

    /** Pins the endpoint of {@code endPage} pages; null when it is 0 or a part of it is not held. */
    synchronized @Nullable Hold pinAt(List<PageHash> hashes, int endPage) {
        checkOpen();
        if (endPage == 0 || restorablePages(hashes, endPage) != endPage) {
            return null;
        }
        Hold h = holdOf(hashes, endPage, true);
        pins.merge(h.end, 1, Integer::sum);
        for (PageHash p : h.window) {
            Checks.checkNotNull(window.get(p), "a pinned endpoint's window page").refs++;
        }
        if (h.state != null) {
            Checks.checkNotNull(state.get(h.state), "a pinned endpoint's state").refs++;
        }
        endpoints.get(h.end); // a use touches the endpoint kept there, if any
        return h;
    }

    /** Ends a pin; the entries go when nothing else refers to them. */
    synchronized void release(@Nullable Hold h) {
        if (h != null && !closed) {
            releaseEndpoint(h);
        }
    }

    /** What {@link #put} did. */
    enum Put {
        /** The endpoint is kept now: the caller writes it to the page store. */
        KEPT,
        /** It was kept already (and is touched): nothing to write. */
        ALREADY_KEPT,
        /** No room (every endpoint pinned): nothing kept; the prefix is restored only where other endpoints allow. */
        NO_ROOM
    }

    /**
     * Keeps {@code parts} as the endpoint of {@code hashes.size()} pages.
     *
     * @throws IllegalArgumentException when the parts do not have the model's shape for this endpoint (nothing kept)
     */
    synchronized Put put(List<PageHash> hashes, PrefixParts parts) {
        checkOpen();
        int end = hashes.size();
        Checks.requireArgument(end > 0, "parts belong to the end of a prefix of at least one page");
        checkShape(parts, end);
        if (endpoints.get(hashes.get(end - 1)) != null) { // the get is the touch
            return Put.ALREADY_KEPT;
        }
        Fill fill = beginFill(hashes, end);
        if (fill == null) {
            return Put.NO_ROOM;
        }
        for (int i = 0; i < fill.parts().size(); i++) {
            PageHash h = fill.hashes().get(i);
            MemorySegment source = fill.parts().get(i) == PagePart.SLIDING_WINDOW
                    ? parts.windowPages().get(fill.hold().window.indexOf(h))
                    : parts.state().orElseThrow();
            fill.targets().get(i).copyFrom(source);
        }
        finishFill(fill, true);
        return Put.KEPT;
    }

    /** Checks that {@code parts} are the shape of the endpoint of {@code end} pages. */
    void checkShape(PrefixParts parts, int end) {
        int w = windowPagesAt(end);
        Checks.requireArgument(
                parts.windowPages().size() == w,
                "the end of a prefix of %s pages has %s window pages (window %s pages), %s were given",
                end,
                w,
                windowPages,
                parts.windowPages().size());
        for (MemorySegment s : parts.windowPages()) {
            Checks.requireArgument(
                    s.byteSize() == windowBytes,
                    "a window page is %s bytes, one of %s was given",
                    windowBytes,
                    s.byteSize());
        }
        Checks.requireArgument(
                parts.state().isPresent() == stateBytes > 0,
                stateBytes > 0 ? "the model has recurrent layers: the state is needed" : "the model keeps no state");
        parts.state()
                .ifPresent(s -> Checks.requireArgument(
                        s.byteSize() == stateBytes, "the state is %s bytes, %s were given", stateBytes, s.byteSize()));
    }

    /**
     * Starts keeping the endpoint of {@code end} pages: references what is held, takes slots for the rest (evicting
     * endpoints least recently used first) and returns them to be filled; {@link #finishFill} keeps the endpoint or
     * gives the slots back. Null when the endpoint is kept already (it is touched) or there is no room.
     */
    synchronized @Nullable Fill beginFill(List<PageHash> hashes, int end) {
        checkOpen();
        Hold h = holdOf(hashes, end, false);
        if (endpoints.get(h.end) != null) { // the get is the touch
            return null;
        }
        int needWindow = 0;
        for (PageHash p : h.window) {
            needWindow += window.containsKey(p) ? 0 : 1;
        }
        int needState = h.state != null && !state.containsKey(h.state) ? 1 : 0;
        // What this endpoint shares with kept ones is referenced first, so that making room cannot free it.
        List<PageHash> retained = new ArrayList<>();
        for (PageHash p : h.window) {
            Entry e = window.get(p);
            if (e != null) {
                e.refs++;
                retained.add(p);
            }
        }
        Iterator<Hold> lru = endpoints.values().iterator();
        while ((freeWindow.size() < needWindow || freeState.size() < needState) && lru.hasNext()) {
            Hold victim = lru.next();
            if (pins.containsKey(victim.end)) {
                continue; // in use: evicting it would free nothing now and lose it later
            }
            lru.remove();
            releaseEndpoint(victim);
        }
        if (freeWindow.size() < needWindow || freeState.size() < needState) {
            for (PageHash p : retained) {
                unref(window, freeWindow, p);
            }
            return null;
        }
        List<PagePart> parts = new ArrayList<>();
        List<PageHash> keys = new ArrayList<>();
        List<MemorySegment> targets = new ArrayList<>();
        for (PageHash p : h.window) {
            if (!window.containsKey(p)) {
                Entry e = new Entry(freeWindow.take());
                e.refs = 1;
                window.put(p, e);
                parts.add(PagePart.SLIDING_WINDOW);
                keys.add(p);
                targets.add(windowSlab.asSlice(e.slot * windowBytes, windowBytes));
            }
        }
        if (h.state != null) {
            Entry e = state.get(h.state);
            if (e == null) {
                e = new Entry(freeState.take());
                state.put(h.state, e);
                parts.add(PagePart.RECURRENT_STATE);
                keys.add(h.state);
                targets.add(stateSlab.asSlice(e.slot * stateBytes, stateBytes));
            }
            e.refs++;
        }
        return new Fill(h, parts, keys, targets);
    }

    /** Ends a {@link #beginFill}: keeps the endpoint when every part landed, else drops what it took. */
    synchronized void finishFill(Fill fill, boolean ok) {
        if (closed) {
            return;
        }
        if (ok) {
            endpoints.put(fill.hold().end, fill.hold());
        } else {
            releaseEndpoint(fill.hold());
        }
    }

    /** Copies the pinned endpoint's parts into {@code targets} (the shape {@link #checkShape} checks). */
    synchronized void copyOut(Hold h, PrefixParts targets) {
        checkOpen();
        Checks.requireState(!h.released, "the endpoint was released");
        for (int i = 0; i < h.window.size(); i++) {
            Entry e = Checks.checkNotNull(window.get(h.window.get(i)), "a pinned window page");
            targets.windowPages().get(i).copyFrom(windowSlab.asSlice(e.slot * windowBytes, windowBytes));
        }
        if (h.state != null) {
            Entry e = Checks.checkNotNull(state.get(h.state), "a pinned state");
            targets.state().orElseThrow().copyFrom(stateSlab.asSlice(e.slot * stateBytes, stateBytes));
        }
    }

    /** The bytes of a pinned endpoint's parts, in the order {@code parts} lists them, for an upload. */
    synchronized List<MemorySegment> slices(Hold h, List<PagePart> parts) {
        List<MemorySegment> out = new ArrayList<>();
        for (PageHash p : h.window) {
            out.add(windowSlab.asSlice(
                    Checks.checkNotNull(window.get(p), "a pinned window page").slot * windowBytes, windowBytes));
            parts.add(PagePart.SLIDING_WINDOW);
        }
        if (h.state != null) {
            out.add(stateSlab.asSlice(
                    Checks.checkNotNull(state.get(h.state), "a pinned state").slot * stateBytes, stateBytes));
            parts.add(PagePart.RECURRENT_STATE);
        }
        return out;
    }

    /** Drops every endpoint no pin holds: a flush or a reset. */
    synchronized void clear() {
        for (Hold h : endpoints.values()) {
            releaseEndpoint(h); // a pinned end's entries stay until the pin goes
        }
        endpoints.clear();
    }

    /** Endpoints kept now. */
    synchronized int endpoints() {
        return endpoints.size();
    }

    private Hold holdOf(List<PageHash> hashes, int end, boolean pin) {
        int w = windowPagesAt(end);
        List<PageHash> win = windowBytes == 0 ? List.of() : List.copyOf(hashes.subList(end - w, end));
        PageHash last = hashes.get(end - 1);
        return new Hold(end, last, win, stateBytes == 0 ? null : last, pin);
    }

    private void releaseEndpoint(Hold h) {
        if (h.released) {
            return;
        }
        h.released = true;
        if (h.pin) {
            pins.computeIfPresent(h.end, (k, n) -> n == 1 ? null : n - 1);
        }
        for (PageHash p : h.window) {
            unref(window, freeWindow, p);
        }
        if (h.state != null) {
            unref(state, freeState, h.state);
        }
    }

    private static void unref(Map<PageHash, Entry> entries, Slots free, PageHash p) {
        Entry e = entries.get(p);
        if (e != null && --e.refs == 0) {
            entries.remove(p);
            free.give(e.slot);
        }
    }

    private void checkOpen() {
        Checks.requireState(!closed, "the hybrid parts' host memory is closed");
    }

    /** Frees the memory; pins still held are void. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            arena.close();
        }
    }

    /** Free slot numbers: a stack. */
    private static final class Slots {
        private final int[] free;
        private int top;

        Slots(int count) {
            free = new int[count];
            for (int i = 0; i < count; i++) {
                free[i] = count - 1 - i;
            }
            top = count;
        }

        int size() {
            return top;
        }

        int take() {
            return free[--top];
        }

        void give(int slot) {
            free[top++] = slot;
        }
    }

    /** For logs. */
    @Override
    public synchronized String toString() {
        return "HostParts[" + endpoints.size() + " endpoints, " + window.size() + " window pages, " + state.size()
                + " states, " + geometry + "]";
    }
}
