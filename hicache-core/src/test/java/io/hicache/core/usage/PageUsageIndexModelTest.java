package io.hicache.core.usage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.usage.PageUsageIndex.Candidates;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import io.hicache.core.usage.PageUsageIndex.Order;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Predicate;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The index against a plain model built on {@link LinkedHashMap} (access order for recency), under a long random
 * sequence of every operation, with stale entry numbers, colliding hash codes and namespaces. After every step the
 * totals must agree; every claim must return exactly the entries the model picks; every so often the whole order and
 * the internal invariants are checked.
 */
class PageUsageIndexModelTest {
    private static final int NAMESPACES = 3;

    /** A key whose hash codes collide a lot, to exercise probing and backward-shift removal. */
    record Key(int id, boolean clash) {
        @Override
        public int hashCode() {
            return clash ? id % 5 : Integer.hashCode(id);
        }

        String namespace() {
            return "ns" + id % NAMESPACES;
        }
    }

    /** What the model knows of one entry. */
    static final class Model {
        final long bytes;
        final long entry;
        int pins;
        boolean claimed;
        boolean flagged;

        Model(long bytes, long entry) {
            this.bytes = bytes;
            this.entry = entry;
        }
    }

    @ParameterizedTest(name = "{0}, clashing hashes {1}, seed {2}")
    @CsvSource({
        "RECENCY, false, 1",
        "RECENCY, true, 2",
        "INSERTION, false, 3",
        "INSERTION, true, 4",
        "RECENCY, false, 5"
    })
    void behavesLikeTheModel(Order order, boolean clash, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        PageUsageIndex<Key> index =
                PageUsageIndex.<Key>builder(order).namespaces(Key::namespace).build();
        LinkedHashMap<Key, Model> model = new LinkedHashMap<>(16, 0.75f, order == Order.RECENCY);
        List<Long> issued = new ArrayList<>(); // every entry number handed out, live or not
        Map<Long, Key> owner = new HashMap<>();
        int keySpace = 400;
        for (int step = 0; step < 60_000; step++) {
            Key k = new Key(r.nextInt(keySpace), clash);
            long anyEntry = issued.isEmpty() ? PageUsageIndex.NO_ENTRY : issued.get(r.nextInt(issued.size()));
            Model byEntry = live(model, owner, anyEntry);
            switch (r.nextInt(12)) {
                case 0, 1 -> {
                    long bytes = r.nextInt(100);
                    int marks = switch (r.nextInt(4)) {
                        case 0 -> PageUsageIndex.PINNED;
                        case 1 -> PageUsageIndex.CLAIMED | PageUsageIndex.FLAGGED;
                        case 2 -> PageUsageIndex.FLAGGED;
                        default -> 0;
                    };
                    long e = index.insert(k, bytes, marks);
                    if (model.containsKey(k)) {
                        assertEquals(PageUsageIndex.NO_ENTRY, e, "insert of a present key");
                    } else {
                        assertNotEquals(PageUsageIndex.NO_ENTRY, e);
                        Model m = new Model(bytes, e);
                        m.pins = (marks & PageUsageIndex.PINNED) != 0 ? 1 : 0;
                        m.claimed = (marks & PageUsageIndex.CLAIMED) != 0;
                        m.flagged = (marks & PageUsageIndex.FLAGGED) != 0;
                        model.put(k, m);
                        issued.add(e);
                        owner.put(e, k);
                    }
                }
                case 2 -> {
                    Model m = model.remove(k);
                    assertEquals(m == null ? -1 : m.bytes, index.remove(k));
                }
                case 3 -> {
                    if (byEntry != null) {
                        model.remove(owner.get(anyEntry));
                    }
                    assertEquals(byEntry == null ? -1 : byEntry.bytes, index.removeEntry(anyEntry));
                }
                case 4 -> assertEquals(model.get(k) != null, index.touch(k)); // get() moves it in access order
                case 5 -> {
                    if (byEntry != null) {
                        model.get(owner.get(anyEntry));
                    }
                    assertEquals(byEntry != null, index.touchEntry(anyEntry));
                }
                case 6 -> {
                    Model m = peek(model, k);
                    long e = index.pin(k);
                    if (m == null || m.claimed) {
                        assertEquals(PageUsageIndex.NO_ENTRY, e);
                    } else {
                        assertEquals(m.entry, e);
                        m.pins++;
                    }
                }
                case 7 -> {
                    if (byEntry != null && byEntry.pins > 0) {
                        byEntry.pins--;
                        assertEquals(true, index.unpin(anyEntry));
                    } else if (byEntry != null) {
                        assertThrows(IllegalStateException.class, () -> index.unpin(anyEntry));
                    } else {
                        assertEquals(false, index.unpin(anyEntry), "an unpin by a stale number");
                    }
                }
                case 8 -> {
                    boolean can = byEntry != null && byEntry.pins == 0 && !byEntry.claimed;
                    assertEquals(can, index.claimEntry(anyEntry));
                    if (can) {
                        byEntry.claimed = true;
                    }
                }
                case 9 -> {
                    boolean can = byEntry != null && byEntry.claimed;
                    assertEquals(can, index.unclaim(anyEntry));
                    if (can) {
                        byEntry.claimed = false;
                    }
                }
                case 10 -> {
                    boolean flag = r.nextBoolean();
                    assertEquals(byEntry != null, index.setFlagged(anyEntry, flag));
                    if (byEntry != null) {
                        byEntry.flagged = flag;
                    }
                }
                default -> claim(index, model, r);
            }
            checkTotals(index, model);
            if (step % 2_000 == 0) {
                index.checkInvariants();
                assertEquals(new ArrayList<>(model.keySet()), index.keys(x -> true), "order differs at step " + step);
            }
        }
        index.checkInvariants();
    }

    /** A claim with random candidates; then each claimed entry is removed or given back, at random. */
    private static void claim(PageUsageIndex<Key> index, LinkedHashMap<Key, Model> model, SplittableRandom r) {
        long wanted = r.nextInt(300);
        String ns = r.nextBoolean() ? null : "ns" + r.nextInt(NAMESPACES + 1);
        boolean flagged = r.nextBoolean();
        Predicate<Key> filter = r.nextBoolean() ? null : k -> k.id() % 2 == 0;
        Candidates<Key> which = Candidates.any();
        which = ns == null ? which : which.inNamespace(ns);
        which = flagged ? which.onlyFlagged() : which;
        which = filter == null ? which : which.matching(filter);
        List<Key> expected = new ArrayList<>();
        long sum = 0;
        if (wanted > 0) {
            for (Map.Entry<Key, Model> e : model.entrySet()) {
                Model m = e.getValue();
                if (sum >= wanted) {
                    break;
                }
                if (m.pins > 0
                        || m.claimed
                        || flagged && !m.flagged
                        || ns != null && !e.getKey().namespace().equals(ns)
                        || filter != null && !filter.test(e.getKey())) {
                    continue;
                }
                expected.add(e.getKey());
                sum += m.bytes;
            }
        }
        List<Claimed<Key>> got = index.claimOldest(wanted, which);
        assertEquals(expected, got.stream().map(Claimed::key).toList(), "claimed other entries");
        for (Claimed<Key> c : got) {
            Model m = peek(model, c.key());
            assertEquals(m.entry, c.entry());
            assertEquals(m.bytes, c.bytes());
            m.claimed = true;
            switch (r.nextInt(4)) {
                case 0, 1 -> {
                    model.remove(c.key());
                    assertEquals(m.bytes, index.removeEntry(c.entry()));
                }
                case 2 -> {
                    m.claimed = false;
                    assertEquals(true, index.unclaim(c.entry()));
                }
                default -> {
                    // left claimed: later claims must skip it
                }
            }
        }
    }

    private static void checkTotals(PageUsageIndex<Key> index, Map<Key, Model> model) {
        assertEquals(model.size(), index.size());
        long bytes = 0;
        long[] nsBytes = new long[NAMESPACES];
        int[] nsCount = new int[NAMESPACES];
        for (Map.Entry<Key, Model> e : model.entrySet()) {
            bytes += e.getValue().bytes;
            nsBytes[e.getKey().id() % NAMESPACES] += e.getValue().bytes;
            nsCount[e.getKey().id() % NAMESPACES]++;
        }
        assertEquals(bytes, index.bytes());
        for (int ns = 0; ns < NAMESPACES; ns++) {
            assertEquals(nsBytes[ns], index.bytes("ns" + ns));
            assertEquals(nsCount[ns], index.size("ns" + ns));
        }
    }

    /** The model's entry for {@code key}, without touching its access order. */
    private static Model peek(LinkedHashMap<Key, Model> model, Key key) {
        for (Map.Entry<Key, Model> e : model.entrySet()) {
            if (e.getKey().equals(key)) {
                return e.getValue();
            }
        }
        return null;
    }

    /** The model's entry that {@code entry} names, if it is still live, without touching the access order. */
    private static Model live(LinkedHashMap<Key, Model> model, Map<Long, Key> owner, long entry) {
        Key k = owner.get(entry);
        Model m = k == null ? null : peek(model, k);
        return m != null && m.entry == entry ? m : null;
    }
}
