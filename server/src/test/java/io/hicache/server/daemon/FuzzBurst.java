package io.hicache.server.daemon;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import java.io.IOException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.LongFunction;

/**
 * Requests pipelined on one connection, sent in the order added, each with the check of its answer; and the
 * violations the checks found. An answer its check cannot read (an ERROR where a response was due, a response that
 * does not parse) is a violation too. Not thread-safe (one per connection and burst), apart from {@link Violations}.
 */
final class FuzzBurst {
    private final Map<Long, byte[]> requests = new LinkedHashMap<>();
    private final Map<Long, Consumer<RawClient.Frame>> checks = new HashMap<>();
    private final AtomicLong ids;
    private final Violations violations;
    private final String name;

    FuzzBurst(AtomicLong ids, Violations violations, String name) {
        this.ids = ids;
        this.violations = violations;
        this.name = name;
    }

    /** Adds the request {@code frame} builds for a fresh id; {@code check} gets its answer. */
    void add(LongFunction<byte[]> frame, Consumer<RawClient.Frame> check) {
        long id = ids.incrementAndGet();
        requests.put(id, frame.apply(id));
        checks.put(id, check);
    }

    boolean isEmpty() {
        return requests.isEmpty();
    }

    /** Sends every request at once, then checks each answer (in the order they came). */
    void run(RawClient c) throws IOException {
        Map<Long, RawClient.Frame> answers = FuzzWire.pipeline(c, requests);
        answers.forEach((id, f) -> {
            try {
                checks.get(id).accept(f);
            } catch (AssertionError e) {
                String m = String.valueOf(e.getMessage());
                violations.add(
                        m.substring(0, Math.min(m.length(), m.indexOf(" (") > 0 ? m.indexOf(" (") : 80)),
                        name + ": " + m);
            }
        });
    }

    /** A deadline of 1 to 5 ms. */
    static int shortDeadline(SplittableRandom r) {
        return 1 + r.nextInt(5);
    }

    /** {@code n} keys of {@code ns} never used before. */
    static List<StoreKey> keys(Namespace ns, int n, SplittableRandom r) {
        List<StoreKey> keys = new ArrayList<>(n);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < n; i++) {
            r.nextBytes(hash);
            keys.add(ns.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    /** Up to {@code n} of {@code from}, each at most once, in random order. */
    static List<StoreKey> pick(List<StoreKey> from, int n, SplittableRandom r) {
        List<StoreKey> copy = new ArrayList<>(from);
        List<StoreKey> out = new ArrayList<>(n);
        for (int i = 0; i < n && !copy.isEmpty(); i++) {
            out.add(copy.remove(r.nextInt(copy.size())));
        }
        return out;
    }

    /** The statuses a page may have: {@code always}, and TIMED_OUT too where the deadline was short. */
    static Set<PageStatus> allowed(boolean shortDeadline, PageStatus... always) {
        EnumSet<PageStatus> s = EnumSet.noneOf(PageStatus.class);
        s.addAll(List.of(always));
        if (shortDeadline) {
            s.add(PageStatus.TIMED_OUT);
        }
        return s;
    }

    /**
     * What the fuzz saw that the protocol does not allow, by kind: how many, and the first few of each with their
     * context; and a tally of the statuses seen, to show what the fuzz exercised. Thread-safe.
     */
    static final class Violations {
        private static final int KEPT = 3;
        private final String what;
        private final AtomicLong count = new AtomicLong();
        private final Map<String, LongAdder> kinds = new ConcurrentSkipListMap<>();
        private final Map<String, ConcurrentLinkedQueue<String>> first = new ConcurrentSkipListMap<>();
        private final Map<String, LongAdder> tally = new ConcurrentSkipListMap<>();

        Violations(String what) {
            this.what = what;
        }

        /** Adds a violation of {@code kind} (a short description without numbers), told in full by {@code detail}. */
        void add(String kind, String detail) {
            count.incrementAndGet();
            kinds.computeIfAbsent(kind, k -> new LongAdder()).increment();
            ConcurrentLinkedQueue<String> examples = first.computeIfAbsent(kind, k -> new ConcurrentLinkedQueue<>());
            if (examples.size() < KEPT) {
                examples.add(detail);
            }
        }

        /** Counts {@code status} under {@code label}, and adds a violation unless it is one of {@code allowed}. */
        void expect(String label, Set<PageStatus> allowed, PageStatus status, String context) {
            seen(label + " " + status);
            if (!allowed.contains(status)) {
                add(label + " answered " + status + " (allowed " + allowed + ")", context + ": " + status);
            }
        }

        /** Counts an outcome. */
        void seen(String outcome) {
            tally.computeIfAbsent(outcome, k -> new LongAdder()).increment();
        }

        /** The outcomes counted, "label status: n" each. */
        String tally() {
            StringBuilder b = new StringBuilder();
            tally.forEach((k, n) ->
                    b.append(b.isEmpty() ? "" : ", ").append(k).append(": ").append(n.sum()));
            return b.toString();
        }

        /** Adds a violation if an OK page's bytes are not its key's. */
        void expectBytes(StoreKey key, FuzzWire.Page page, String context) {
            if (page.status() == PageStatus.OK) {
                String wrong = page.length() != page.body().length
                        ? "its length is not its body's"
                        : FuzzWire.wrongBytes(key, page);
                if (wrong != null) {
                    add("an OK page whose " + wrong, context + ": an OK page whose " + wrong);
                }
            }
        }

        long count() {
            return count.get();
        }

        /** Null if none, else a report of them: each kind, how many, and its first few. */
        String report() {
            if (count.get() == 0) {
                return null;
            }
            StringBuilder b = new StringBuilder()
                    .append(count.get())
                    .append(' ')
                    .append(what)
                    .append(':');
            kinds.forEach((kind, n) -> {
                b.append("\n  ").append(n.sum()).append(" x ").append(kind).append(", e.g.");
                first.get(kind).forEach(e -> b.append("\n    ").append(e));
            });
            return b.toString();
        }
    }
}
