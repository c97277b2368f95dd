package io.hicache.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.PageHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The tree's eviction with retention priorities, against a reference too small to be wrong: a map from each cached
 * page (named by the page values of its path) to its class, retention, deadline, last use, hits, demoted flag and pins.
 * Eviction in the reference takes, among the nodes whose last page has no cached child, the least by (effective
 * priority, demoted first, the policy's key), and removes it whole. The reference knows where the tree's nodes
 * begin (a run is split where a walk ends inside it) only so that it can evict whole nodes as the tree does; that
 * the two agree on where nodes begin is itself checked after every step, with every attribute of every page.
 *
 * <p>A seeded random script of a few thousand steps per case: inserts, hits (matches) with random classes and
 * retentions, pins, time moving on, demotes, and evictions under pressure, on the device tier (LRU, and LFU with hits
 * counted) and on the host tier (pages landed as host-only runs, then hit).
 */
class RetentionModelTest {
    private static final int PAGE = 2;
    private static final int STEPS = 3000;
    /** Pages the script keeps cached at most: an insert past it evicts down to it. */
    private static final int CAPACITY = 40;
    /** Paths in dictionary order, so that a failure lists nodes in a readable order. */
    private static final Comparator<List<Integer>> LEXICOGRAPHIC = (a, b) -> {
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            int c = Integer.compare(a.get(i), b.get(i));
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.size(), b.size());
    };

    @ParameterizedTest(name = "{0} tier, {1}, seed {2}")
    @CsvSource({
        "device, lru, 1",
        "device, lru, 2",
        "device, lfu, 3",
        "device, lfu, 4",
        "host, lru, 5",
        "host, lfu, 6",
    })
    void evictionFollowsTheReferenceStepByStep(String tier, String policy, long seed) {
        new Script(tier.equals("host"), EvictionPolicy.named(policy), new Random(seed)).run();
    }

    /** One page of the reference: what the tree should say of the page at the end of its path. */
    private static final class Page {
        int priority;
        long retention;
        long retainUntil;
        long lastUse;
        int hits;
        boolean demoted;
        /** A tree node starts at this page. */
        boolean nodeStart;

        int locks;

        int effective(long now) {
            return now < retainUntil ? priority : 0;
        }
    }

    private static final class Script {
        private final boolean host;
        private final EvictionPolicy policy;
        private final boolean lfu;
        private final Random random;
        private final RadixTree tree;
        private final PageHasher hasher = new PageHasher(PAGE);
        /** The reference: every cached page by its path of page values. */
        private final Map<List<Integer>, Page> pages = new HashMap<>();

        private final List<Open> open = new ArrayList<>();
        private long tick;
        private long now;
        private int nextSlot;
        private int step;

        private record Open(TreeNode node, List<Integer> path, int pages) {}

        Script(boolean host, EvictionPolicy policy, Random random) {
            this.host = host;
            this.policy = policy;
            this.lfu = policy == EvictionPolicy.LFU;
            this.random = random;
            this.tree = new RadixTree(PAGE, policy);
        }

        void run() {
            for (step = 0; step < STEPS; step++) {
                int op = random.nextInt(100);
                if (op < 30) {
                    insert(prompt());
                } else if (op < 50) {
                    hit(prompt(), false);
                } else if (op < 55 && !host) {
                    hit(prompt(), true);
                } else if (op < 60 && !open.isEmpty()) {
                    close(open.remove(random.nextInt(open.size())));
                } else if (op < 75) {
                    now += random.nextInt(31);
                    tree.advanceTime(now);
                } else if (op < 82) {
                    List<Integer> path = prompt();
                    demote(path, random.nextInt(path.size() + 1));
                } else {
                    evict(1 + random.nextInt(6));
                }
                compare();
            }
        }

        /* ---- the script's choices */

        /** 1-6 pages of values 0-2: few enough that prompts share prefixes often. */
        private List<Integer> prompt() {
            int n = 1 + random.nextInt(6);
            List<Integer> path = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                path.add(random.nextInt(3));
            }
            return path;
        }

        private int priority() {
            return new int[] {0, 0, 10, 50, 99}[random.nextInt(5)];
        }

        private long retention() {
            return new long[] {0, 5, 20, 100}[random.nextInt(4)];
        }

        private static int[] tokens(List<Integer> path) {
            int[] t = new int[path.size() * PAGE];
            for (int i = 0; i < path.size(); i++) {
                t[i * PAGE] = path.get(i);
                t[i * PAGE + 1] = 100 + path.get(i);
            }
            return t;
        }

        /* ---- operations, on the tree and on the reference */

        private void insert(List<Integer> path) {
            int p = priority();
            long r = retention();
            int threshold = lfu ? 1 : 0;
            int[] tokens = tokens(path);
            if (host) {
                int[] slots = new int[path.size()];
                Arrays.setAll(slots, i -> nextSlot++);
                tree.insertHost(tree.root(), tokens, 0, path.size(), slots, hasher.hashPages(tokens));
                p = 0; // landed pages are no request's hit
                r = 0;
                threshold = 0;
            } else {
                int[] device = new int[path.size()];
                Arrays.setAll(device, i -> nextSlot++);
                tree.insert("", tokens, device, threshold, p, r);
            }
            int matched = matched(path);
            touch(path, matched, p, r, threshold > 0);
            for (int i = matched; i < path.size(); i++) {
                Page page = new Page();
                page.nodeStart = i == matched;
                page.lastUse = tick;
                page.hits = threshold > 0 ? 1 : 0;
                retain(page, p, r);
                pages.put(path.subList(0, i + 1), page);
            }
            if (pages.size() > CAPACITY) {
                evict(pages.size() - CAPACITY);
            }
        }

        private void hit(List<Integer> path, boolean pin) {
            int p = priority();
            long r = retention();
            MatchResult m = tree.match("", tokens(path), p, r);
            int matched = matched(path);
            assertEquals(matched, m.matchedPages(), at("matched pages"));
            touch(path, matched, p, r, false);
            if (pin) {
                tree.lock(m.lastNode());
                for (int i = 0; i < matched; i++) {
                    pages.get(path.subList(0, i + 1)).locks++;
                }
                open.add(new Open(m.lastNode(), path, matched));
            }
        }

        private void close(Open o) {
            tree.unlock(o.node());
            for (int i = 0; i < o.pages(); i++) {
                pages.get(o.path().subList(0, i + 1)).locks--;
            }
        }

        private void demote(List<Integer> path, int keep) {
            int demoted = tree.demotePriority("", tokens(path), keep);
            int matched = matched(path);
            if (matched < path.size()) {
                splitAfter(path.subList(0, matched)); // tokens part from a node inside it
            }
            if (keep >= 1 && keep <= matched) {
                splitAfter(path.subList(0, keep));
            }
            int expected = 0;
            for (int i = keep; i < matched; i++) {
                expected += lower(pages.get(path.subList(0, i + 1)));
            }
            if (matched == path.size()) {
                for (Map.Entry<List<Integer>, Page> e : pages.entrySet()) {
                    List<Integer> k = e.getKey();
                    if (k.size() > path.size() && k.subList(0, path.size()).equals(path)) {
                        expected += lower(e.getValue());
                    }
                }
            }
            assertEquals(expected, demoted, at("pages demoted"));
        }

        private static int lower(Page p) {
            p.priority = 0;
            p.retention = 0;
            p.retainUntil = 0;
            p.demoted = true;
            return 1;
        }

        private void evict(int wanted) {
            int freed = host
                    ? tree.evictHost(wanted).length
                    : tree.evictDevice(wanted, false).freedPages().length;
            int expected = 0;
            while (expected < wanted) {
                List<List<Integer>> victim = victim();
                if (victim == null) {
                    break;
                }
                victim.forEach(pages::remove);
                expected += victim.size();
            }
            assertEquals(expected, freed, at("pages evicted"));
        }

        /* ---- the reference's rules */

        /** Pages of {@code path} cached, from the first. */
        private int matched(List<Integer> path) {
            int n = 0;
            while (n < path.size() && pages.containsKey(path.subList(0, n + 1))) {
                n++;
            }
            return n;
        }

        /** A walk over the first {@code matched} pages of {@code path}: a hit of (p, r) on each, and a split after. */
        private void touch(List<Integer> path, int matched, int p, long r, boolean countHit) {
            tick++;
            for (int i = 0; i < matched; i++) {
                Page page = pages.get(path.subList(0, i + 1));
                page.lastUse = tick;
                retain(page, p, r);
                if (countHit) {
                    page.hits++;
                }
            }
            if (matched > 0) {
                splitAfter(path.subList(0, matched));
            }
        }

        /** The rule: a decayed class is forgotten, the highest class and longest retention stay, a hit refreshes. */
        private void retain(Page page, int priority, long retention) {
            if (page.retainUntil <= now) {
                page.priority = 0;
                page.retention = 0;
            }
            if (priority > 0 && retention > 0) {
                page.priority = Math.max(page.priority, priority);
                page.retention = Math.max(page.retention, retention);
            }
            page.retainUntil = page.priority == 0 ? 0 : now + page.retention;
            page.demoted = false;
        }

        /** A walk ended at {@code prefix}: the page after it in the same node, if any, begins a node of its own. */
        private void splitAfter(List<Integer> prefix) {
            for (Map.Entry<List<Integer>, Page> e : pages.entrySet()) {
                List<Integer> k = e.getKey();
                if (k.size() == prefix.size() + 1 && k.subList(0, prefix.size()).equals(prefix)) {
                    e.getValue().nodeStart = true;
                }
            }
        }

        /** The pages of the leaf node to evict next, or null when none can go. */
        private List<List<Integer>> victim() {
            List<List<Integer>> best = null;
            long[] bestKey = null;
            for (List<List<Integer>> node : nodes().values()) {
                List<Integer> last = node.getLast();
                Page p = pages.get(last);
                if (hasChild(last) || p.locks > 0) {
                    continue;
                }
                long[] key = {p.effective(now), p.demoted ? 0 : 1, policyKey(p)};
                int c = bestKey == null ? -1 : Arrays.compare(key, bestKey);
                assertTrue(c != 0, at("two leaves tie for eviction: the order would be arbitrary"));
                if (c < 0) {
                    best = node;
                    bestKey = key;
                }
            }
            return best;
        }

        private long policyKey(Page p) {
            return lfu ? ((long) Math.min(p.hits, (1 << 23) - 1) << 40) | (p.lastUse & ((1L << 40) - 1)) : p.lastUse;
        }

        private boolean hasChild(List<Integer> path) {
            for (int v = 0; v < 3; v++) {
                List<Integer> child = new ArrayList<>(path);
                child.add(v);
                if (pages.containsKey(child)) {
                    return true;
                }
            }
            return false;
        }

        /** The reference's nodes: each node-start page and the pages that follow it up to the next start. */
        private Map<List<Integer>, List<List<Integer>>> nodes() {
            Map<List<Integer>, List<List<Integer>>> nodes = new TreeMap<>(LEXICOGRAPHIC);
            for (Map.Entry<List<Integer>, Page> e : pages.entrySet()) {
                if (!e.getValue().nodeStart) {
                    continue;
                }
                List<List<Integer>> run = new ArrayList<>();
                List<Integer> at = e.getKey();
                run.add(at);
                while (true) {
                    List<Integer> next = null;
                    for (int v = 0; v < 3; v++) {
                        List<Integer> child = new ArrayList<>(at);
                        child.add(v);
                        Page c = pages.get(child);
                        if (c != null && !c.nodeStart) {
                            assertTrue(next == null, at("a node with two pages after one page"));
                            next = child;
                        }
                    }
                    if (next == null) {
                        break;
                    }
                    run.add(next);
                    at = next;
                }
                nodes.put(e.getKey(), run);
            }
            return nodes;
        }

        /* ---- the comparison */

        /** The tree and the reference hold the same pages in the same nodes, each with the same attributes. */
        private void compare() {
            tree.checkInvariants(false);
            Map<List<Integer>, String> real = new TreeMap<>(LEXICOGRAPHIC);
            walk(tree.root(), List.of(), real);
            Map<List<Integer>, String> expected = new TreeMap<>(LEXICOGRAPHIC);
            for (Map.Entry<List<Integer>, List<List<Integer>>> n : nodes().entrySet()) {
                Page p = pages.get(n.getKey());
                for (List<Integer> page : n.getValue()) {
                    Page q = pages.get(page);
                    assertEquals(
                            describe(p, n.getValue().size()),
                            describe(q, n.getValue().size()),
                            at("a node's pages"));
                }
                expected.put(n.getKey(), describe(p, n.getValue().size()));
            }
            assertEquals(expected, real, at("the tree"));
        }

        private void walk(TreeNode n, List<Integer> path, Map<List<Integer>, String> out) {
            for (TreeNode c : n.children()) {
                List<Integer> at = new ArrayList<>(path);
                for (int i = 0; i < c.pages(); i++) {
                    at.add(c.token(i * PAGE));
                }
                // leaf-first: a node is on a tier only where its parent is
                assertTrue(n.isRoot() || (host ? n.hostSlots() != null : n.onDevice()), at("a node below a hole"));
                out.put(
                        at.subList(0, path.size() + 1),
                        String.format(
                                "%d pages, class %d until %d, used %d, hits %d%s, locks %d",
                                c.pages(),
                                c.priority(),
                                c.retainUntil(),
                                c.lastAccess(),
                                lfu ? c.hitCount() : 0,
                                c.demoted() ? ", demoted" : "",
                                c.lockRef()));
                walk(c, at, out);
            }
        }

        private String describe(Page p, int size) {
            return String.format(
                    "%d pages, class %d until %d, used %d, hits %d%s, locks %d",
                    size,
                    p.priority,
                    p.retainUntil,
                    p.lastUse,
                    lfu ? p.hits : 0,
                    p.demoted ? ", demoted" : "",
                    p.locks);
        }

        private String at(String what) {
            return what + " differ at step " + step + " (" + (host ? "host" : "device") + ", " + policy.name()
                    + ", time " + now + ")";
        }
    }
}
