package io.hicache.server.daemon;

import static io.hicache.server.daemon.FuzzBurst.allowed;
import static io.hicache.server.daemon.FuzzBurst.keys;
import static io.hicache.server.daemon.FuzzBurst.pick;
import static io.hicache.server.daemon.FuzzBurst.shortDeadline;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Wire;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One round of the fuzz's short-deadline phase, on a namespace of its own: pages stored with a normal deadline, then
 * GET, LEASE and LEADING_HITS of them and of pages never stored, then PUT of new pages, DELETE of stored ones and of
 * ones never stored, all pipelined with deadlines of 1 to 5 ms; then a GET with a normal deadline of what must be
 * there and what must be gone; and every other round a CLEAR with a short deadline and a GET of what it left. The
 * pages of a round not cleared are read and deleted again {@value #ROUNDS_LATER} rounds later, from L3 by then. What
 * docs/protocol.md section 1 allows at a deadline: TIMED_OUT (or ERROR TIMED_OUT) where the work was not done, never
 * OK for a page not stored (nor for its removal), never MISS for one stored.
 *
 * @param slab      the daemon's slab file, read where a LEASE says a page is
 * @param slabBytes its size
 * @param past      the pages left stored by earlier rounds of the connection, oldest first
 */
record FuzzDeadlineRound(
        RawClient c,
        AtomicLong ids,
        SplittableRandom r,
        FileChannel slab,
        long slabBytes,
        Deque<List<StoreKey>> past,
        FuzzBurst.Violations violations,
        String name) {
    private static final int PAGE = FuzzWire.PAGE;
    /** Rounds after which a round's pages are read again: by then the small slab has evicted most of them to L3. */
    private static final int ROUNDS_LATER = 3;

    /** Pages of one namespace: stored, never stored, and what the round's writes did to them. */
    private record Group(
            String label,
            List<StoreKey> stored,
            List<StoreKey> absent,
            Set<StoreKey> there,
            Set<StoreKey> gone,
            Set<StoreKey> maybe) {
        Group(String label, List<StoreKey> stored, List<StoreKey> absent) {
            this(label, stored, absent, new HashSet<>(stored), new HashSet<>(absent), new HashSet<>());
        }

        List<StoreKey> all() {
            List<StoreKey> all = new ArrayList<>(there);
            all.addAll(gone);
            all.addAll(maybe);
            return all;
        }
    }

    void run() throws IOException {
        Namespace ns = Pages.namespace("fuzz-deadlines");
        List<StoreKey> stored = new ArrayList<>();
        List<StoreKey> candidates = keys(ns, 8 + r.nextInt(9), r);
        FuzzBurst put = burst();
        put.add(id -> FuzzWire.put(id, 0, candidates, PAGE), f -> {
            PageStatus[] s = FuzzWire.statuses(Wire.PUT, f, candidates.size());
            for (int i = 0; i < s.length; i++) {
                violations.expect(
                        "PUT (30 s) new",
                        Set.of(PageStatus.OK, PageStatus.REJECTED),
                        s[i],
                        name + ": PUT of a new page, 30 s");
                if (s[i] == PageStatus.OK) {
                    stored.add(candidates.get(i));
                }
            }
        });
        put.run(c);
        if (stored.isEmpty()) {
            return;
        }
        List<Group> groups = new ArrayList<>();
        groups.add(new Group("new", stored, keys(ns, 4, r)));
        if (past.size() >= ROUNDS_LATER) {
            List<StoreKey> old = past.pollFirst();
            groups.add(new Group("old", old, keys(old.getFirst().namespace(), 2, r)));
        }
        reads(groups);
        writes(groups);
        check(groups, "after the writes");
        Group now = groups.getFirst();
        boolean kept = !r.nextBoolean() || "not started".equals(clear(ns, now));
        if (kept && !now.there().isEmpty()) {
            past.addLast(List.copyOf(now.there()));
        }
    }

    private FuzzBurst burst() {
        return new FuzzBurst(ids, violations, name);
    }

    private void reads(List<Group> groups) throws IOException {
        FuzzBurst b = burst();
        List<Long> leases = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            int t = shortDeadline(r);
            String what = name + ", deadline " + t + " ms, ";
            Group g = groups.get(r.nextInt(groups.size()));
            List<StoreKey> stored = g.stored();
            List<StoreKey> absent = g.absent();
            List<StoreKey> both = new ArrayList<>(stored);
            both.addAll(absent);
            List<StoreKey> some = pick(both, 1 + r.nextInt(6), r);
            switch (r.nextInt(5)) {
                case 0, 1 ->
                    b.add(id -> FuzzWire.get(id, t, some, PAGE), f -> {
                        List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, some.size());
                        for (int j = 0; j < some.size(); j++) {
                            boolean isStored = stored.contains(some.get(j));
                            violations.expect(
                                    "GET " + (isStored ? "stored " : "never stored ") + g.label(),
                                    allowed(true, isStored ? PageStatus.OK : PageStatus.MISS),
                                    pages.get(j).status(),
                                    what + "GET of a page " + (isStored ? "stored" : "never stored"));
                            violations.expectBytes(some.get(j), pages.get(j), what + "GET");
                        }
                    });
                // Held 10 s, released at the end of the round: a lease ends at its hold, after which its pages may
                // move, and on a loaded machine (CI with other builds) this client has read an answer more than the
                // 100 ms it once asked for after the daemon sent it, and found the pages' rooms reused.
                case 2 ->
                    b.add(id -> FuzzWire.lease(id, t, some, PAGE, 10_000), f -> {
                        FuzzWire.Lease lease = FuzzWire.lease(f, some.size());
                        leases.add(lease.id());
                        for (int j = 0; j < some.size(); j++) {
                            boolean isStored = stored.contains(some.get(j));
                            FuzzWire.Page page = lease.pages().get(j);
                            violations.expect(
                                    "LEASE " + (isStored ? "stored " : "never stored ") + g.label(),
                                    isStored
                                            ? allowed(true, PageStatus.OK, PageStatus.REJECTED)
                                            : allowed(true, PageStatus.MISS),
                                    page.status(),
                                    what + "LEASE of a page " + (isStored ? "stored" : "never stored"));
                            leased(some.get(j), page, what + "LEASE");
                        }
                    });
                default -> {
                    // stored pages, then one never stored (and maybe more stored): the count is the first ones
                    List<StoreKey> run = pick(stored, r.nextInt(stored.size() + 1), r);
                    int expected = run.size();
                    run.add(absent.get(r.nextInt(absent.size())));
                    run.addAll(pick(stored, r.nextInt(3), r));
                    b.add(id -> FuzzWire.leadingHits(id, t, run), f -> {
                        if (FuzzWire.errorCode(f) == Wire.E_TIMED_OUT) {
                            violations.seen("LEADING_HITS " + g.label() + " ERROR TIMED_OUT");
                            return;
                        }
                        int hits = FuzzWire.hits(f);
                        violations.seen("LEADING_HITS " + g.label() + " " + (hits == expected ? "right" : "wrong"));
                        if (hits != expected) {
                            violations.add(
                                    "LEADING_HITS of stored pages, then one never stored: a wrong count",
                                    what + "LEADING_HITS of " + expected + " stored pages and then one never stored "
                                            + "answered " + hits);
                        }
                    });
                }
            }
        }
        b.run(c);
        FuzzBurst release = burst();
        for (long lease : leases) {
            release.add(id -> FuzzWire.release(id, lease), f -> {
                ByteBuffer p = FuzzWire.answerTo(Wire.RELEASE, f);
                if (p.remaining() != 1 || (p.get(0) & 0xFE) != 0) {
                    violations.add(
                            "a RELEASE answer not one byte, 0 or 1",
                            name + ": a RELEASE answer of " + p.remaining() + " bytes");
                }
            });
        }
        if (!release.isEmpty()) {
            release.run(c);
        }
    }

    /** An OK leased page lies in the slab with its bytes (it cannot move while leased); others have no offset. */
    private void leased(StoreKey key, FuzzWire.Page page, String what) {
        if (page.status() != PageStatus.OK) {
            if (page.offset() != -1) {
                violations.add(
                        "a LEASE page not OK with an offset", what + ": a page " + page.status() + " with an offset");
            }
            return;
        }
        if (page.length() != PAGE || page.offset() < 0 || page.offset() + PAGE > slabBytes) {
            violations.add(
                    "a LEASE page OK outside the slab",
                    what + ": an OK page of " + page.length() + " bytes at " + page.offset());
            return;
        }
        ByteBuffer bytes = ByteBuffer.allocate(PAGE);
        try {
            while (bytes.hasRemaining() && slab.read(bytes, page.offset() + bytes.position()) > 0) {
                // reading
            }
        } catch (IOException e) {
            violations.add("cannot read the slab", what + ": cannot read the slab: " + e);
            return;
        }
        violations.expectBytes(
                key,
                new FuzzWire.Page(PageStatus.OK, PAGE, page.crc(), page.offset(), bytes.array()),
                what + " (its bytes in the slab)");
    }

    /**
     * PUT of new pages, DELETE of stored pages and of pages never stored, for the new group; DELETE of stored pages for
     * the old one; all pipelined with short deadlines.
     */
    private void writes(List<Group> groups) throws IOException {
        FuzzBurst b = burst();
        for (Group g : groups) {
            List<StoreKey> toDelete = pick(g.stored(), 1 + r.nextInt(g.stored().size()), r);
            int tDelete = shortDeadline(r);
            if (g.label().equals("new")) {
                List<StoreKey> fresh = keys(g.stored().getFirst().namespace(), 1 + r.nextInt(4), r);
                int tPut = shortDeadline(r);
                b.add(id -> FuzzWire.put(id, tPut, fresh, PAGE), f -> {
                    PageStatus[] s = FuzzWire.statuses(Wire.PUT, f, fresh.size());
                    for (int i = 0; i < s.length; i++) {
                        violations.expect(
                                "PUT new",
                                allowed(true, PageStatus.OK, PageStatus.REJECTED),
                                s[i],
                                name + ", deadline " + tPut + " ms, PUT of a new page");
                        (s[i] == PageStatus.OK ? g.there() : g.gone()).add(fresh.get(i)); // else not stored
                    }
                });
                int tAbsent = shortDeadline(r);
                b.add(id -> FuzzWire.delete(id, tAbsent, g.absent()), f -> {
                    for (PageStatus s :
                            FuzzWire.statuses(Wire.DELETE, f, g.absent().size())) {
                        violations.expect(
                                "DELETE never stored",
                                allowed(true, PageStatus.MISS),
                                s,
                                name + ", deadline " + tAbsent + " ms, DELETE of a page never stored");
                    }
                });
            }
            b.add(id -> FuzzWire.delete(id, tDelete, toDelete), f -> {
                PageStatus[] s = FuzzWire.statuses(Wire.DELETE, f, toDelete.size());
                for (int i = 0; i < s.length; i++) {
                    violations.expect(
                            "DELETE stored " + g.label(),
                            allowed(true, PageStatus.OK),
                            s[i],
                            name + ", deadline " + tDelete + " ms, DELETE of a stored page (" + g.label() + ")");
                    g.there().remove(toDelete.get(i));
                    (s[i] == PageStatus.OK ? g.gone() : g.maybe()).add(toDelete.get(i));
                }
            });
        }
        b.run(c);
    }

    /** GETs each group's pages with a normal deadline: those there must be OK, those gone MISS. */
    private void check(List<Group> groups, String when) throws IOException {
        FuzzBurst b = burst();
        for (Group g : groups) {
            List<StoreKey> all = g.all();
            b.add(id -> FuzzWire.get(id, 0, all, PAGE), f -> {
                List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, all.size());
                for (int i = 0; i < all.size(); i++) {
                    StoreKey k = all.get(i);
                    String what = name + ", " + when + ", GET (30 s) of a page (" + g.label() + ") ";
                    if (g.there().contains(k)) {
                        violations.expect(
                                "check: stored",
                                Set.of(PageStatus.OK),
                                pages.get(i).status(),
                                what + "acknowledged as stored");
                    } else if (g.gone().contains(k)) {
                        violations.expect(
                                "check: gone",
                                Set.of(PageStatus.MISS),
                                pages.get(i).status(),
                                what + "acknowledged as deleted or not stored");
                    } else {
                        violations.expect(
                                "check: delete timed out",
                                Set.of(PageStatus.OK, PageStatus.MISS),
                                pages.get(i).status(),
                                what + "whose DELETE timed out");
                    }
                    violations.expectBytes(k, pages.get(i), what.trim());
                }
            });
        }
        b.run(c);
    }

    /**
     * A CLEAR with a short deadline, then a check: done (all gone), partial (anything), or not started (nothing
     * removed). Returns which, or null for an answer that is none of these.
     */
    private String clear(Namespace ns, Group g) throws IOException {
        int t = shortDeadline(r);
        String[] outcome = {null};
        FuzzBurst b = burst();
        b.add(id -> FuzzWire.clear(id, t, ns), f -> {
            if (FuzzWire.errorCode(f) == Wire.E_TIMED_OUT) {
                outcome[0] = FuzzWire.errorMessage(f).contains("partial") ? "partial" : "not started";
            } else if (FuzzWire.answerTo(Wire.CLEAR, f).hasRemaining()) {
                violations.add("a CLEAR answer with a payload", name + ": a CLEAR answer with a payload");
            } else {
                outcome[0] = "done";
            }
            violations.seen("CLEAR " + outcome[0]);
        });
        b.run(c);
        if (outcome[0] == null) {
            return null;
        }
        List<StoreKey> all = g.all();
        Group after = switch (outcome[0]) {
            case "done" -> new Group(g.label(), List.of(), List.of(), Set.of(), new HashSet<>(all), Set.of());
            case "not started" -> g;
            default -> new Group(g.label(), List.of(), List.of(), Set.of(), Set.of(), new HashSet<>(all));
        };
        check(List.of(after), "after a CLEAR (" + t + " ms) answered " + outcome[0]);
        return outcome[0];
    }
}
