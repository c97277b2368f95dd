package io.hicache.core.usage;

import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * The stored pages of one store or slab, in the order eviction takes them: by last use ({@link Order#RECENCY}: a
 * touch makes an entry the newest) or by insertion ({@link Order#INSERTION}: touches change nothing). Each entry has
 * its page's bytes, a pin count and two marks; the index keeps the total of entries and bytes, and per namespace too
 * when built with a namespace function.
 *
 * <ul>
 *   <li><b>Pinned</b> entries (a count: readers, a lease) are never eviction candidates.
 *   <li>A <b>claimed</b> entry (being evicted, or otherwise spoken for) is skipped by eviction and cannot be pinned;
 *       it still counts, until removed or {@linkplain #unclaim unclaimed}.
 *   <li>A <b>flagged</b> entry passes {@link Candidates#onlyFlagged()}: the daemon's slab flags the pages that L3
 *       already has, the only ones it may evict.
 * </ul>
 *
 * <p><b>Cost.</b> Insert, remove, touch, pin, unpin, claim and lookups are O(1). {@link #claimOldest} walks from
 * the oldest entry (of the namespace, if asked), so it costs one step per entry it claims or skips and never sorts.
 * {@link #keys} is a full walk, for clears.
 *
 * <p><b>Entries.</b> {@link #insert} and {@link #pin} return an entry's number, a {@code long} that names that entry
 * until it is removed; a number used after that names nothing (calls with it return false or -1), even when the same
 * key has been inserted again. Calls that take a number are how a pin, a claim or a removal is tied to the entry
 * its holder meant, not to whatever the key maps to later.
 *
 * <p><b>Memory.</b> Each entry is one record of three {@code long}s in a single array (previous and next slot;
 * generation, pin count and marks; bytes and the key's hash: 24 bytes, so that a walk or a removal touches one place),
 * plus the key's reference (4 bytes with compressed references) and a key-to-slot table of 8-byte cells at most 3/4
 * full (10.7 to 21.3 bytes per entry); the keys themselves are the caller's. With namespaces a record is five
 * {@code long}s (16 bytes more: the namespace list's links and the namespace's number). Slot arrays grow by half when
 * full and are not shrunk; freed slots are reused first. Measured at 10^7 entries ({@code ./hicache bench index},
 * {@code docs/benchmarks.md}): 42.8 bytes per entry, 59.1 with namespaces. An entry's bytes must be below 4 GiB; an
 * index holds at most 2^31 / 3 entries (2^31 / 5 with namespaces).
 *
 * <p>Keys must be immutable as far as {@code equals} and {@code hashCode} go. Thread-safe: every call holds one
 * internal lock, briefly; the namespace function runs outside it, a {@link Candidates#matching filter} inside it, so
 * a filter must be quick and must not call the index.
 *
 * @param <K> the key type
 */
public final class PageUsageIndex<K> {
    /** The entry number that names no entry. */
    public static final long NO_ENTRY = -1;
    /** {@link #insert(Object, long, int) Insert} mark: the entry starts with one pin. */
    public static final int PINNED = 1;
    /** {@link #insert(Object, long, int) Insert} mark: the entry starts claimed. */
    public static final int CLAIMED = 1 << 29;
    /** {@link #insert(Object, long, int) Insert} mark: the entry starts flagged. */
    public static final int FLAGGED = 1 << 30;
    /** The pin count's bits in a slot's state; {@link #CLAIMED} and {@link #FLAGGED} sit above them. */
    private static final int PIN_MASK = CLAIMED - 1;

    private static final int NIL = NamespaceLists.NIL;
    private static final int MIN_SLOTS = 16;
    private static final int LINKS = 0;
    private static final int STATE = 1;
    private static final int SIZE = 2;
    private static final int NS_LINKS = 3;
    private static final int NS = 4;
    private static final long LOW = 0xFFFF_FFFFL;
    /** The most bytes one entry may have: they are kept in 32 bits. */
    private static final long MAX_ENTRY_BYTES = LOW;

    /** The order eviction takes entries in. */
    public enum Order {
        /** Least recently used first: {@link #touch} moves an entry to the newest end. */
        RECENCY,
        /** Oldest inserted first: {@link #touch} changes nothing. */
        INSERTION
    }

    /**
     * An entry claimed by {@link #claimOldest}: the caller removes it ({@link #removeEntry}) or gives the claim back
     * ({@link #unclaim}). Immutable.
     *
     * @param key   the entry's key
     * @param entry the entry's number
     * @param bytes the entry's bytes
     */
    public record Claimed<K>(K key, long entry, long bytes) {}

    /**
     * Which entries {@link #claimOldest} may take, beyond being unpinned and unclaimed. Immutable.
     *
     * @param namespace only this namespace's entries (the index must track namespaces), or null for any
     * @param flagged   only {@linkplain #FLAGGED flagged} entries
     * @param filter    only keys it accepts, or null for any; it runs under the index's lock
     */
    public record Candidates<K>(
            @Nullable String namespace,
            boolean flagged,
            @Nullable Predicate<? super K> filter) {
        /** Every unpinned, unclaimed entry. */
        public static <K> Candidates<K> any() {
            return new Candidates<>(null, false, null);
        }

        /** These candidates, of {@code namespace} only. */
        public Candidates<K> inNamespace(String namespace) {
            return new Candidates<>(Checks.checkNotNull(namespace, "namespace"), flagged, filter);
        }

        /** These candidates, flagged ones only. */
        public Candidates<K> onlyFlagged() {
            return new Candidates<>(namespace, true, filter);
        }

        /** These candidates, those whose key {@code filter} accepts only. */
        public Candidates<K> matching(Predicate<? super K> filter) {
            return new Candidates<>(namespace, flagged, Checks.checkNotNull(filter, "filter"));
        }
    }

    /**
     * Starts an index that takes entries in {@code order}.
     *
     * @param <K> the key type
     */
    public static <K> Builder<K> builder(Order order) {
        return new Builder<>(Checks.checkNotNull(order, "order"));
    }

    /** Settings for a {@link PageUsageIndex}. Not thread-safe; build once. */
    public static final class Builder<K> {
        private final Order order;
        private @Nullable Function<? super K, String> namespaceOf;
        private int expectedEntries = MIN_SLOTS;

        private Builder(Order order) {
            this.order = order;
        }

        /** Tracks entries and bytes per namespace, {@code namespaceOf} telling a key's (16 more bytes an entry). */
        public Builder<K> namespaces(Function<? super K, String> namespaceOf) {
            this.namespaceOf = Checks.checkNotNull(namespaceOf, "namespaceOf");
            return this;
        }

        /** Sizes the arrays for {@code entries} up front, so that filling the index does not copy them. */
        public Builder<K> expectedEntries(int entries) {
            this.expectedEntries = (int) Checks.checkInRange(entries, 0, Integer.MAX_VALUE, "entries");
            return this;
        }

        public PageUsageIndex<K> build() {
            return new PageUsageIndex<>(this);
        }
    }

    private final Order order;
    private final @Nullable Function<? super K, String> namespaceOf;
    private final Object lock = new Object();
    private final SlotTable table;
    private final @Nullable NamespaceLists namespaces;

    // Per slot: its key (null when the slot is free) and a record of `stride` longs in `records`:
    //   LINKS     previous slot (high 32 bits) and next slot (low 32), oldest to newest; free slots chain by next
    //   STATE     generation (high 32) and pins and marks (low 32: PIN_MASK, CLAIMED, FLAGGED)
    //   SIZE      bytes (high 32, unsigned) and the key's table hash (low 32), so removal needs no key.hashCode()
    //   NS_LINKS  previous and next slot of the namespace's list (with namespaces only)
    //   NS        the namespace's number (with namespaces only)
    private final int stride;
    private Object[] keys;
    private long[] records;

    private int head = NIL;
    private int tail = NIL;
    private int freeSlot = NIL;
    /** Slots below this have been handed out at least once. */
    private int slotsUsed;

    private int size;
    private long totalBytes;

    private PageUsageIndex(Builder<K> b) {
        this.order = b.order;
        this.namespaceOf = b.namespaceOf;
        this.namespaces = namespaceOf == null ? null : new NamespaceLists();
        this.stride = namespaces == null ? 3 : 5;
        int slots = Math.max(MIN_SLOTS, b.expectedEntries);
        Checks.requireArgument(
                slots <= maxSlots(),
                "expectedEntries %d is over the most an index can hold, %d",
                b.expectedEntries,
                maxSlots());
        this.table = new SlotTable(b.expectedEntries);
        keys = new Object[slots];
        records = new long[slots * stride];
    }

    private int maxSlots() {
        return (Integer.MAX_VALUE - 8) / stride;
    }

    /* ---------------------------------------------------------------- adding and removing */

    /**
     * Adds {@code key} as the newest entry, unpinned, unclaimed and not flagged.
     *
     * @return the new entry's number, or {@link #NO_ENTRY} if {@code key} is in the index already (it is left alone)
     */
    public long insert(K key, long bytes) {
        return insert(key, bytes, 0);
    }

    /**
     * Adds {@code key} as the newest entry, with {@code marks}: {@link #PINNED} or {@link #CLAIMED} (not both),
     * {@link #FLAGGED}, or 0.
     *
     * @return the new entry's number, or {@link #NO_ENTRY} if {@code key} is in the index already (it is left alone)
     */
    public long insert(K key, long bytes, int marks) {
        Checks.checkNotNull(key, "key");
        Checks.checkInRange(bytes, 0, MAX_ENTRY_BYTES, "bytes");
        Checks.requireArgument(
                (marks & ~(PINNED | CLAIMED | FLAGGED)) == 0,
                "marks must combine PINNED, CLAIMED " + "and FLAGGED, was %x",
                marks);
        Checks.requireArgument((marks & (PINNED | CLAIMED)) != (PINNED | CLAIMED), "a claimed entry cannot be pinned");
        int hash = SlotTable.hash(key);
        String namespace = namespaceOf == null ? null : Checks.checkNotNull(namespaceOf.apply(key), "namespace of key");
        synchronized (lock) {
            if (table.find(key, hash, keys) >= 0) {
                return NO_ENTRY;
            }
            int slot = takeSlot();
            int r = slot * stride;
            keys[slot] = key;
            records[r + STATE] = (records[r + STATE] & ~LOW) | marks;
            records[r + SIZE] = bytes << 32 | (hash & LOW);
            table.add(hash, slot);
            linkNewest(slot);
            if (namespaces != null && namespace != null) {
                int ns = namespaces.idOf(namespace);
                records[r + NS] = ns;
                linkNewestInNamespace(slot, ns);
                namespaces.count[ns]++;
                namespaces.bytes[ns] += bytes;
            }
            size++;
            totalBytes += bytes;
            return entryOf(slot);
        }
    }

    /** Removes {@code key}'s entry, pinned or claimed as it may be; returns its bytes, or -1 if it had none. */
    public long remove(K key) {
        Checks.checkNotNull(key, "key");
        int hash = SlotTable.hash(key);
        synchronized (lock) {
            int slot = table.find(key, hash, keys);
            return slot < 0 ? -1 : removeSlot(slot);
        }
    }

    /** Removes the entry {@code entry} names, pinned or claimed as it may be; returns its bytes, or -1 if none. */
    public long removeEntry(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            return slot < 0 ? -1 : removeSlot(slot);
        }
    }

    /* ---------------------------------------------------------------- lookups */

    /** The number of {@code key}'s entry, or {@link #NO_ENTRY}. */
    public long entry(K key) {
        Checks.checkNotNull(key, "key");
        int hash = SlotTable.hash(key);
        synchronized (lock) {
            int slot = table.find(key, hash, keys);
            return slot < 0 ? NO_ENTRY : entryOf(slot);
        }
    }

    /** Whether {@code key} has an entry. */
    public boolean contains(K key) {
        return entry(key) != NO_ENTRY;
    }

    /** The key of the entry {@code entry} names, or null if it names none. */
    @SuppressWarnings("unchecked")
    public @Nullable K keyOf(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            return slot < 0 ? null : (K) keys[slot];
        }
    }

    /** The bytes of the entry {@code entry} names, or -1 if it names none. */
    public long bytesOf(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            return slot < 0 ? -1 : bytes(slot);
        }
    }

    /* ---------------------------------------------------------------- use, pins, claims, flags */

    /** A use of {@code key}'s page: in recency order its entry becomes the newest. False if it has no entry. */
    public boolean touch(K key) {
        Checks.checkNotNull(key, "key");
        int hash = SlotTable.hash(key);
        synchronized (lock) {
            int slot = table.find(key, hash, keys);
            if (slot >= 0) {
                touchSlot(slot);
            }
            return slot >= 0;
        }
    }

    /** As {@link #touch}, for the entry {@code entry} names; false if it names none. */
    public boolean touchEntry(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            if (slot >= 0) {
                touchSlot(slot);
            }
            return slot >= 0;
        }
    }

    /**
     * Pins {@code key}'s entry, so that eviction skips it until {@link #unpin}; does not touch it.
     *
     * @return the entry's number (for {@link #unpin}), or {@link #NO_ENTRY} if it has none or it is claimed
     */
    public long pin(K key) {
        Checks.checkNotNull(key, "key");
        int hash = SlotTable.hash(key);
        synchronized (lock) {
            int slot = table.find(key, hash, keys);
            return slot >= 0 && pinSlot(slot) ? entryOf(slot) : NO_ENTRY;
        }
    }

    /** As {@link #pin}, for the entry {@code entry} names; false if it names none or it is claimed. */
    public boolean pinEntry(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            return slot >= 0 && pinSlot(slot);
        }
    }

    /**
     * Takes one pin off the entry {@code entry} names; false if it names none (the entry was removed meanwhile).
     *
     * @throws IllegalStateException if the entry has no pin: unpinned more often than pinned
     */
    public boolean unpin(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            if (slot < 0) {
                return false;
            }
            int s = state(slot);
            Checks.requireState((s & PIN_MASK) > 0, "unpin of entry %s (key %s), which has no pin", entry, keys[slot]);
            setState(slot, s - 1);
            return true;
        }
    }

    /** Claims the entry {@code entry} names; false if it names none, or it is pinned or claimed already. */
    public boolean claimEntry(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            if (slot < 0 || (state(slot) & (PIN_MASK | CLAIMED)) != 0) {
                return false;
            }
            setState(slot, state(slot) | CLAIMED);
            return true;
        }
    }

    /** Gives back the claim on the entry {@code entry} names; false if it names none or it is not claimed. */
    public boolean unclaim(long entry) {
        synchronized (lock) {
            int slot = slotOf(entry);
            if (slot < 0 || (state(slot) & CLAIMED) == 0) {
                return false;
            }
            setState(slot, state(slot) & ~CLAIMED);
            return true;
        }
    }

    /** Sets or clears the flag of the entry {@code entry} names; false if it names none. */
    public boolean setFlagged(long entry, boolean flagged) {
        synchronized (lock) {
            int slot = slotOf(entry);
            if (slot < 0) {
                return false;
            }
            setState(slot, flagged ? state(slot) | FLAGGED : state(slot) & ~FLAGGED);
            return true;
        }
    }

    /* ---------------------------------------------------------------- eviction */

    /** As {@link #claimOldest(long, Candidates)} over every unpinned, unclaimed entry. */
    public List<Claimed<K>> claimOldest(long bytes) {
        return claimOldest(bytes, Candidates.any());
    }

    /**
     * Claims the oldest unpinned, unclaimed entries that {@code which} allows, oldest first, until their bytes
     * reach {@code bytes} or none is left; the caller removes each or gives its claim back. Costs one step per entry
     * claimed or passed over, whatever the index's size.
     *
     * @return the claimed entries, oldest first; empty when {@code bytes} is not positive
     * @throws IllegalStateException if {@code which} names a namespace and this index does not track namespaces
     */
    public List<Claimed<K>> claimOldest(long bytes, Candidates<? super K> which) {
        Checks.checkNotNull(which, "which");
        List<Claimed<K>> out = new ArrayList<>();
        if (bytes <= 0) {
            return out;
        }
        synchronized (lock) {
            int links = LINKS;
            int slot = head;
            if (which.namespace() != null) {
                NamespaceLists lists = requireNamespaces();
                int ns = lists.find(which.namespace());
                links = NS_LINKS;
                slot = ns == NIL ? NIL : lists.head[ns];
            }
            long sum = 0;
            for (; slot != NIL && sum < bytes; slot = next(slot, links)) {
                int s = state(slot);
                if ((s & (PIN_MASK | CLAIMED)) != 0 || which.flagged() && (s & FLAGGED) == 0) {
                    continue;
                }
                @SuppressWarnings("unchecked")
                K key = (K) keys[slot];
                if (which.filter() != null && !which.filter().test(key)) {
                    continue;
                }
                setState(slot, s | CLAIMED);
                long b = bytes(slot);
                out.add(new Claimed<>(key, entryOf(slot), b));
                sum += b;
            }
        }
        return out;
    }

    /** The keys {@code which} accepts, oldest first: a snapshot, for clears. Walks the whole index. */
    @SuppressWarnings("unchecked")
    public List<K> keys(Predicate<? super K> which) {
        Checks.checkNotNull(which, "which");
        List<K> out = new ArrayList<>();
        synchronized (lock) {
            for (int slot = head; slot != NIL; slot = next(slot, LINKS)) {
                if (which.test((K) keys[slot])) {
                    out.add((K) keys[slot]);
                }
            }
        }
        return out;
    }

    /* ---------------------------------------------------------------- totals */

    /** Entries now. */
    public int size() {
        synchronized (lock) {
            return size;
        }
    }

    /** Bytes of all entries now, claimed and pinned ones included. */
    public long bytes() {
        synchronized (lock) {
            return totalBytes;
        }
    }

    /**
     * Entries of {@code namespace} now.
     *
     * @throws IllegalStateException if this index does not track namespaces
     */
    public int size(String namespace) {
        Checks.checkNotNull(namespace, "namespace");
        synchronized (lock) {
            NamespaceLists lists = requireNamespaces();
            int ns = lists.find(namespace);
            return ns == NIL ? 0 : lists.count[ns];
        }
    }

    /**
     * Bytes of {@code namespace}'s entries now.
     *
     * @throws IllegalStateException if this index does not track namespaces
     */
    public long bytes(String namespace) {
        Checks.checkNotNull(namespace, "namespace");
        synchronized (lock) {
            NamespaceLists lists = requireNamespaces();
            int ns = lists.find(namespace);
            return ns == NIL ? 0 : lists.bytes[ns];
        }
    }

    /** Namespace numbers handed out so far, in use or free (tests: a namespace that empties gives its number back). */
    int namespaceNumbers() {
        synchronized (lock) {
            return namespaces == null ? 0 : namespaces.numbers();
        }
    }

    public Order order() {
        return order;
    }

    /** True if built with a namespace function. */
    public boolean tracksNamespaces() {
        return namespaces != null;
    }

    @Override
    public String toString() {
        synchronized (lock) {
            return "PageUsageIndex[" + order + ", " + size + " entries, " + totalBytes + " bytes"
                    + (namespaces == null ? "" : ", " + namespaces.namespaces() + " namespaces") + "]";
        }
    }

    /* ---------------------------------------------------------------- records (under the lock) */

    private int prev(int slot, int links) {
        return (int) (records[slot * stride + links] >>> 32);
    }

    private int next(int slot, int links) {
        return (int) records[slot * stride + links];
    }

    private void setPrev(int slot, int links, int prev) {
        int i = slot * stride + links;
        records[i] = (long) prev << 32 | (records[i] & LOW);
    }

    private void setNext(int slot, int links, int next) {
        int i = slot * stride + links;
        records[i] = (records[i] & ~LOW) | (next & LOW);
    }

    private int state(int slot) {
        return (int) records[slot * stride + STATE];
    }

    private void setState(int slot, int state) {
        int i = slot * stride + STATE;
        records[i] = (records[i] & ~LOW) | (state & LOW);
    }

    private int generation(int slot) {
        return (int) (records[slot * stride + STATE] >>> 32);
    }

    private long bytes(int slot) {
        return records[slot * stride + SIZE] >>> 32;
    }

    private int hash(int slot) {
        return (int) records[slot * stride + SIZE];
    }

    private int namespace(int slot) {
        return (int) records[slot * stride + NS];
    }

    private long entryOf(int slot) {
        return (long) generation(slot) << 32 | slot;
    }

    /** The slot {@code entry} names, or -1 if it names none (any more). */
    private int slotOf(long entry) {
        if (entry < 0) {
            return -1;
        }
        int slot = (int) entry;
        return slot < slotsUsed && keys[slot] != null && generation(slot) == (int) (entry >>> 32) ? slot : -1;
    }

    private boolean pinSlot(int slot) {
        int s = state(slot);
        if ((s & CLAIMED) != 0) {
            return false;
        }
        Checks.requireState((s & PIN_MASK) != PIN_MASK, "entry of key %s has too many pins", keys[slot]);
        setState(slot, s + 1);
        return true;
    }

    private void touchSlot(int slot) {
        if (order == Order.INSERTION) {
            return;
        }
        if (slot != tail) {
            unlink(slot);
            linkNewest(slot);
        }
        if (namespaces != null) {
            int ns = namespace(slot);
            if (slot != namespaces.tail[ns]) {
                unlinkFromNamespace(slot, ns);
                linkNewestInNamespace(slot, ns);
            }
        }
    }

    private long removeSlot(int slot) {
        long b = bytes(slot);
        table.remove(hash(slot), slot);
        unlink(slot);
        if (namespaces != null) {
            int ns = namespace(slot);
            unlinkFromNamespace(slot, ns);
            namespaces.bytes[ns] -= b;
            if (--namespaces.count[ns] == 0) {
                namespaces.release(ns); // nothing is kept for a namespace that holds nothing
            }
        }
        size--;
        totalBytes -= b;
        keys[slot] = null;
        // A new generation: numbers handed out for the old entry name nothing from now on.
        int r = slot * stride;
        records[r + STATE] = (long) ((generation(slot) + 1) & Integer.MAX_VALUE) << 32;
        records[r + SIZE] = 0;
        setNext(slot, LINKS, freeSlot);
        freeSlot = slot;
        return b;
    }

    private int takeSlot() {
        if (freeSlot != NIL) {
            int slot = freeSlot;
            freeSlot = next(slot, LINKS);
            return slot;
        }
        if (slotsUsed == keys.length) {
            Checks.requireState(slotsUsed < maxSlots(), "the page usage index is full: %d entries", size);
            int grown = (int) Math.min(maxSlots(), slotsUsed + (long) (slotsUsed >> 1));
            keys = Arrays.copyOf(keys, grown);
            records = Arrays.copyOf(records, grown * stride);
        }
        return slotsUsed++;
    }

    private void linkNewest(int slot) {
        setPrev(slot, LINKS, tail);
        setNext(slot, LINKS, NIL);
        if (tail == NIL) {
            head = slot;
        } else {
            setNext(tail, LINKS, slot);
        }
        tail = slot;
    }

    private void unlink(int slot) {
        int p = prev(slot, LINKS);
        int n = next(slot, LINKS);
        if (p == NIL) {
            head = n;
        } else {
            setNext(p, LINKS, n);
        }
        if (n == NIL) {
            tail = p;
        } else {
            setPrev(n, LINKS, p);
        }
    }

    private void linkNewestInNamespace(int slot, int ns) {
        NamespaceLists namespaces = requireNamespaces();
        int last = namespaces.tail[ns];
        setPrev(slot, NS_LINKS, last);
        setNext(slot, NS_LINKS, NIL);
        if (last == NIL) {
            namespaces.head[ns] = slot;
        } else {
            setNext(last, NS_LINKS, slot);
        }
        namespaces.tail[ns] = slot;
    }

    private void unlinkFromNamespace(int slot, int ns) {
        NamespaceLists namespaces = requireNamespaces();
        int p = prev(slot, NS_LINKS);
        int n = next(slot, NS_LINKS);
        if (p == NIL) {
            namespaces.head[ns] = n;
        } else {
            setNext(p, NS_LINKS, n);
        }
        if (n == NIL) {
            namespaces.tail[ns] = p;
        } else {
            setPrev(n, NS_LINKS, p);
        }
    }

    /** The namespace lists, which only an index that tracks namespaces has. */
    private NamespaceLists requireNamespaces() {
        NamespaceLists lists = namespaces;
        Checks.requireState(lists != null, "this page usage index does not track namespaces");
        return lists;
    }

    /* ---------------------------------------------------------------- for tests and the bench */

    /** Array elements allocated: (slots, table cells). */
    long[] capacities() {
        synchronized (lock) {
            return new long[] {keys.length, table.capacity()};
        }
    }

    /**
     * Checks every structural invariant, walking everything: the lists against the table and the totals, the free
     * slots against the rest. O(n); for tests. Throws {@link IllegalStateException} naming the first broken one.
     */
    void checkInvariants() {
        synchronized (lock) {
            int count = 0;
            long sum = 0;
            int last = NIL;
            for (int slot = head; slot != NIL; slot = next(slot, LINKS)) {
                Checks.requireState(keys[slot] != null, "slot %d in the list is free", slot);
                Checks.requireState(
                        prev(slot, LINKS) == last, "slot %d: prev %d, expected %d", slot, prev(slot, LINKS), last);
                Checks.requireState(hash(slot) == SlotTable.hash(keys[slot]), "slot %d: hash changed", slot);
                Checks.requireState(
                        table.find(keys[slot], hash(slot), keys) == slot, "slot %d: its key maps elsewhere", slot);
                Checks.requireState(++count <= size, "the list is longer than the size %d (a cycle?)", size);
                sum += bytes(slot);
                last = slot;
            }
            Checks.requireState(last == tail, "tail %d, list ends at %d", tail, last);
            Checks.requireState(
                    count == size && table.size() == size, "size %d, list %d, table %d", size, count, table.size());
            Checks.requireState(sum == totalBytes, "bytes %d, list sums to %d", totalBytes, sum);
            int free = 0;
            for (int slot = freeSlot; slot != NIL; slot = next(slot, LINKS)) {
                Checks.requireState(keys[slot] == null, "free slot %d has a key", slot);
                Checks.requireState(++free <= slotsUsed, "the free list is longer than the slots (a cycle?)");
            }
            Checks.requireState(free + size == slotsUsed, "%d free + %d used != %d slots", free, size, slotsUsed);
            if (namespaces != null) {
                checkNamespaces();
            }
        }
    }

    private void checkNamespaces() {
        NamespaceLists namespaces = requireNamespaces();
        int total = 0;
        for (int ns = 0; ns < namespaces.numbers(); ns++) {
            int count = 0;
            long sum = 0;
            int last = NIL;
            for (int slot = namespaces.head[ns]; slot != NIL; slot = next(slot, NS_LINKS)) {
                Checks.requireState(namespace(slot) == ns, "slot %d in the list of namespace %d", slot, ns);
                Checks.requireState(
                        prev(slot, NS_LINKS) == last,
                        "slot %d: namespace prev %d, expected %d",
                        slot,
                        prev(slot, NS_LINKS),
                        last);
                Checks.requireState(++count <= size, "namespace %d's list is too long (a cycle?)", ns);
                sum += bytes(slot);
                last = slot;
            }
            Checks.requireState(
                    last == namespaces.tail[ns],
                    "namespace %d: tail %d, list ends at %d",
                    ns,
                    namespaces.tail[ns],
                    last);
            Checks.requireState(
                    count == namespaces.count[ns] && sum == namespaces.bytes[ns],
                    "namespace %d: %d entries of %d bytes, totals say %d and %d",
                    ns,
                    count,
                    sum,
                    namespaces.count[ns],
                    namespaces.bytes[ns]);
            total += count;
        }
        Checks.requireState(total == size, "namespaces hold %d entries of %d", total, size);
    }
}
