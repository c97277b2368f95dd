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
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One connection of the fuzz's race phase. Each burst pipelines six requests: PUT, DELETE, GET, LEADING_HITS and CLEAR
 * of the raced pages (shared with the other racers), with deadlines of 1 to 5 ms or 30 s; and now and then PUT, maybe
 * GET, then DELETE of a fresh page of a namespace only this racer uses, which must take effect in that order
 * (docs/protocol.md section 1): the GET sees the page an OK PUT stored, the DELETE finds it (OK, not MISS), and once
 * both are answered (the DELETE OK or MISS) the page is gone. {@link #settled} checks the raced pages once every racer
 * has stopped. Not thread-safe: one thread per racer.
 */
final class FuzzRacer {
    private static final int PAGE = FuzzWire.PAGE;

    private final RawClient c;
    private final SplittableRandom r;
    private final List<StoreKey> raced;
    private final FuzzBurst.Violations violations;
    private final FuzzBurst.Violations ordering;
    private final String name;
    private final Namespace own = Pages.namespace("fuzz-race-own");
    private final AtomicLong ids = new AtomicLong();
    /** Pages of its own namespace put then deleted, both answered: they must be gone. */
    private final List<StoreKey> mustBeGone = new ArrayList<>();

    FuzzRacer(
            RawClient c,
            SplittableRandom r,
            List<StoreKey> raced,
            FuzzBurst.Violations violations,
            FuzzBurst.Violations ordering,
            String name) {
        this.c = c;
        this.r = r;
        this.raced = raced;
        this.violations = violations;
        this.ordering = ordering;
        this.name = name;
    }

    void burst(long round) throws IOException {
        String at = name + ", burst " + round;
        FuzzBurst b = new FuzzBurst(ids, violations, at);
        checkGone(b, at);
        for (int i = 0; i < 6; i++) {
            int t = r.nextBoolean() ? shortDeadline(r) : 0;
            boolean isShort = t > 0;
            String deadline = isShort ? "short" : "30 s";
            List<StoreKey> some = pick(raced, 1 + r.nextInt(raced.size()), r);
            String what = at + ", deadline " + (isShort ? t + " ms" : "30 s") + ", ";
            switch (r.nextInt(12)) {
                case 0, 1, 2, 3 ->
                    b.add(id -> FuzzWire.put(id, t, some, PAGE), f -> {
                        for (PageStatus s : FuzzWire.statuses(Wire.PUT, f, some.size())) {
                            violations.expect(
                                    "PUT " + deadline,
                                    allowed(isShort, PageStatus.OK, PageStatus.EXISTS, PageStatus.REJECTED),
                                    s,
                                    what + "PUT of raced pages");
                        }
                    });
                case 4, 5, 6 ->
                    b.add(id -> FuzzWire.delete(id, t, some), f -> {
                        for (PageStatus s : FuzzWire.statuses(Wire.DELETE, f, some.size())) {
                            violations.expect(
                                    "DELETE " + deadline,
                                    allowed(isShort, PageStatus.OK, PageStatus.MISS),
                                    s,
                                    what + "DELETE of raced pages");
                        }
                    });
                case 7, 8 ->
                    b.add(id -> FuzzWire.get(id, t, some, PAGE), f -> {
                        List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, some.size());
                        for (int j = 0; j < pages.size(); j++) {
                            violations.expect(
                                    "GET " + deadline,
                                    allowed(isShort, PageStatus.OK, PageStatus.MISS),
                                    pages.get(j).status(),
                                    what + "GET of raced pages");
                            violations.expectBytes(some.get(j), pages.get(j), what + "GET of raced pages");
                        }
                    });
                case 9 ->
                    b.add(id -> FuzzWire.leadingHits(id, t, raced), f -> {
                        if (isShort && FuzzWire.errorCode(f) == Wire.E_TIMED_OUT) {
                            violations.seen("LEADING_HITS short ERROR TIMED_OUT");
                            return;
                        }
                        int hits = FuzzWire.hits(f);
                        violations.seen("LEADING_HITS " + deadline + " answered");
                        if (hits < 0 || hits > raced.size()) {
                            violations.add(
                                    "LEADING_HITS over the count asked",
                                    what + "LEADING_HITS of " + raced.size() + " pages answered " + hits);
                        }
                    });
                case 10 ->
                    b.add(id -> FuzzWire.clear(id, t, raced.getFirst().namespace()), f -> {
                        if (isShort && FuzzWire.errorCode(f) == Wire.E_TIMED_OUT) {
                            violations.seen("CLEAR short ERROR TIMED_OUT");
                            return;
                        }
                        ByteBuffer p = FuzzWire.answerTo(Wire.CLEAR, f);
                        violations.seen("CLEAR " + deadline + " done");
                        if (p.hasRemaining()) {
                            violations.add(
                                    "a CLEAR answer with a payload",
                                    what + "a CLEAR answer of " + p.remaining() + " bytes");
                        }
                    });
                default -> ownPipeline(b, at + ", "); // its own deadlines
            }
        }
        b.run(c);
    }

    /** PUT, maybe GET, then DELETE of a fresh page of its own namespace, pipelined; checks their order. */
    private void ownPipeline(FuzzBurst b, String what) {
        StoreKey k = keys(own, 1, r).getFirst();
        List<StoreKey> one = List.of(k);
        int tPut = r.nextBoolean() ? shortDeadline(r) : 0;
        int tDelete = r.nextBoolean() ? shortDeadline(r) : 0;
        boolean get = r.nextBoolean();
        String where = what + "own page PUT (timeout_ms " + tPut + "), " + (get ? "GET (30 s), " : "")
                + "DELETE (timeout_ms " + tDelete + ") pipelined";
        PageStatus[] seen = new PageStatus[3];
        b.add(id -> FuzzWire.put(id, tPut, one, PAGE), f -> {
            seen[0] = FuzzWire.statuses(Wire.PUT, f, 1)[0];
            violations.expect(
                    "own PUT", allowed(tPut > 0, PageStatus.OK, PageStatus.REJECTED), seen[0], where + ": the PUT");
            settle(k, seen, get, where);
        });
        if (get) {
            b.add(id -> FuzzWire.get(id, 0, one, PAGE), f -> {
                FuzzWire.Page page = FuzzWire.pagesOfGet(f, 1).getFirst();
                seen[1] = page.status();
                violations.expectBytes(k, page, where + ": the GET");
                settle(k, seen, get, where);
            });
        }
        b.add(id -> FuzzWire.delete(id, tDelete, one), f -> {
            seen[2] = FuzzWire.statuses(Wire.DELETE, f, 1)[0];
            violations.expect(
                    "own DELETE",
                    allowed(tDelete > 0, PageStatus.OK, PageStatus.MISS),
                    seen[2],
                    where + ": the DELETE");
            settle(k, seen, get, where);
        });
    }

    /** Once every answer of an own pipeline is in: did they take effect in the order sent? */
    private void settle(StoreKey k, PageStatus[] seen, boolean get, String where) {
        if (seen[0] == null || seen[2] == null || (get && seen[1] == null)) {
            return;
        }
        String statuses = ": PUT " + seen[0] + (get ? ", GET " + seen[1] : "") + ", DELETE " + seen[2];
        boolean stored = seen[0] == PageStatus.OK;
        ordering.seen("own pipelines");
        if (get && stored && seen[1] != PageStatus.OK) {
            ordering.add("a GET pipelined behind an OK PUT did not see the page", where + statuses);
        } else if (get && !stored && seen[1] != PageStatus.MISS) {
            ordering.add("a GET pipelined behind a PUT that did not store the page was not MISS", where + statuses);
        }
        if (stored && seen[2] == PageStatus.MISS) {
            ordering.add("a DELETE pipelined behind an OK PUT answered MISS: it ran first", where + statuses);
        } else if (!stored && seen[2] == PageStatus.OK) {
            ordering.add("a DELETE pipelined behind a PUT that did not store the page answered OK", where + statuses);
        }
        if (seen[2] == PageStatus.OK || seen[2] == PageStatus.MISS) {
            mustBeGone.add(k);
        }
    }

    /** Asks (in this burst, so after every answer of the last) whether the pages put then deleted are gone. */
    private void checkGone(FuzzBurst b, String at) {
        if (mustBeGone.isEmpty()) {
            return;
        }
        List<StoreKey> ask = List.copyOf(mustBeGone);
        mustBeGone.clear();
        b.add(id -> FuzzWire.get(id, 0, ask, PAGE), f -> {
            List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, ask.size());
            for (int i = 0; i < ask.size(); i++) {
                ordering.seen("own pages checked gone");
                if (pages.get(i).status() != PageStatus.MISS) {
                    ordering.add(
                            "a page put then deleted (pipelined) is there after both answers: the DELETE took "
                                    + "effect first",
                            at + ": a page of its own, put then deleted (pipelined, both answered), "
                                    + "is "
                                    + pages.get(i).status() + " afterwards");
                }
            }
        });
    }

    /** The last check of its own pages, after the last burst. */
    void finish(long rounds) throws IOException {
        String at = name + ", after burst " + rounds;
        FuzzBurst b = new FuzzBurst(ids, violations, at);
        checkGone(b, at);
        if (!b.isEmpty()) {
            b.run(c);
        }
    }

    /** After the race: each raced page is intact or gone; deleted (OK or MISS), it is gone and stays gone. */
    static void settled(RawClient c, List<StoreKey> raced, FuzzBurst.Violations violations) throws Exception {
        AtomicLong ids = new AtomicLong();
        FuzzBurst look = new FuzzBurst(ids, violations, "after the race");
        look.add(id -> FuzzWire.get(id, 0, raced, PAGE), f -> {
            List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, raced.size());
            for (int i = 0; i < raced.size(); i++) {
                String where = "after the race, GET (30 s) of raced page " + i;
                violations.expect(
                        "settled GET",
                        Set.of(PageStatus.OK, PageStatus.MISS),
                        pages.get(i).status(),
                        where);
                violations.expectBytes(raced.get(i), pages.get(i), where);
            }
        });
        look.run(c);
        FuzzBurst delete = new FuzzBurst(ids, violations, "after the race");
        delete.add(id -> FuzzWire.delete(id, 0, raced), f -> {
            PageStatus[] s = FuzzWire.statuses(Wire.DELETE, f, raced.size());
            for (int i = 0; i < s.length; i++) {
                violations.expect(
                        "final DELETE",
                        Set.of(PageStatus.OK, PageStatus.MISS),
                        s[i],
                        "the final DELETE (30 s), raced page " + i);
            }
        });
        delete.run(c);
        for (String when : List.of("right after the final DELETE", "500 ms after the final DELETE")) {
            if (when.startsWith("500")) {
                Thread.sleep(500);
            }
            FuzzBurst gone = new FuzzBurst(ids, violations, when);
            gone.add(id -> FuzzWire.get(id, 0, raced, PAGE), f -> {
                List<FuzzWire.Page> pages = FuzzWire.pagesOfGet(f, raced.size());
                for (int i = 0; i < raced.size(); i++) {
                    violations.expect(
                            "deleted GET",
                            Set.of(PageStatus.MISS),
                            pages.get(i).status(),
                            when + ", GET of raced page " + i);
                }
            });
            gone.add(id -> FuzzWire.leadingHits(id, 0, raced), f -> {
                int hits = FuzzWire.hits(f);
                if (hits != 0) {
                    violations.add(
                            "LEADING_HITS of deleted pages not 0",
                            when + ": LEADING_HITS of the raced pages " + "answered " + hits);
                }
            });
            gone.run(c);
        }
    }
}
