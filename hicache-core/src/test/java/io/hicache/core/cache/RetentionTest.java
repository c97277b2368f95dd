package io.hicache.core.cache;

import static io.hicache.core.cache.TinyCache.concat;
import static io.hicache.core.cache.TinyCache.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Retention priorities through the cache (issue 42): a class beats recency while it holds, decays when idle, is
 * refreshed by any hit, and a demoted prompt goes first; on the device and on the host. The eviction order itself is
 * checked step by step against a reference in {@code RetentionModelTest}.
 */
class RetentionTest {
    private static final Retention KEEP = Retention.of(50, Duration.ofSeconds(60));

    @Test
    void aPriorityClassBeatsRecencyWhileItHolds() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            int[] c = prompt(300, 2);
            t.serve(a, KEEP); // the oldest, but retained
            t.serve(b);
            t.serve(c);
            t.serve(prompt(400, 4)); // 4 pages, 2 free: 2 must go
            assertEquals(8, t.onDevice(a), "the retained prompt stays, though least recently used");
            assertEquals(0, t.onDevice(b), "the least recently used of the rest goes");
            assertEquals(8, t.onDevice(c));
            t.settle();
        }
    }

    @Test
    void aClassDecaysOnceItsRetentionHasPassedIdle() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            t.serve(a, KEEP);
            t.serve(b);
            t.serve(prompt(300, 2));
            t.clock.advance(Duration.ofSeconds(60)); // the deadline itself: the class no longer holds
            t.serve(prompt(400, 4));
            assertEquals(0, t.onDevice(a), "priority 0 again: plain LRU takes the oldest");
            assertEquals(8, t.onDevice(b));
            t.settle();
        }
    }

    @Test
    void anyHitRefreshesTheDeadline() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            t.serve(a, KEEP); // until 60 s
            t.clock.advance(Duration.ofSeconds(50));
            assertEquals(8, t.serve(a), "a hit without a class of its own"); // until 110 s, still class 50
            t.serve(b);
            t.serve(prompt(300, 2));
            t.clock.advance(Duration.ofSeconds(50)); // 100 s: past the first deadline, before the refreshed one
            t.serve(prompt(400, 4));
            assertEquals(8, t.onDevice(a), "the hit at 50 s kept the class until 110 s");
            assertEquals(0, t.onDevice(b));
            t.settle();
        }
    }

    @Test
    void aPageKeepsTheHighestClassAndTheLongestRetentionItWasGiven() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            t.serve(a, Retention.of(10, Duration.ofHours(1)));
            t.serve(a, Retention.of(30, Duration.ofSeconds(10))); // a: class 30, held an hour after each hit
            t.serve(a, Retention.of(5, Duration.ofSeconds(1))); // lower: changes nothing but the deadline
            t.serve(b, Retention.of(20, Duration.ofHours(1))); // more recent than a
            t.clock.advance(Duration.ofSeconds(30)); // past the 10 s that class 30 asked for
            t.serve(prompt(300, 6)); // 4 free, 6 wanted: the lower class of a and b goes
            assertEquals(8, t.onDevice(a), "class 30 holds as long as the longest retention a was given");
            assertEquals(0, t.onDevice(b), "class 20 goes first, though more recently used");
            t.settle();
        }
    }

    @Test
    void aDemotedPromptGoesFirstEvenWhenRetainedAndRecent() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            int[] c = prompt(300, 2);
            t.serve(a);
            t.serve(b);
            t.serve(c, KEEP);
            assertEquals(2, t.cache.demote("", c), "both pages of c");
            t.serve(prompt(400, 4));
            assertEquals(0, t.onDevice(c), "demoted: first to go, before the least recently used");
            assertEquals(8, t.onDevice(a));
            assertEquals(8, t.onDevice(b));
            t.serve(a); // a request hitting a demoted page gives it back its place (here: by recency)
            t.settle();
        }
    }

    @Test
    void demotingASupersededSessionKeepsTheSharedPrefix() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(12)) {
            int[] system = prompt(100, 2);
            int[] old = concat(system, prompt(500, 3)); // a session whose context was then rewritten
            int[] other = prompt(900, 2);
            t.serve(old, KEEP);
            t.serve(other);
            // the rewritten session shares the system prompt only: lower the rest of the old one
            assertEquals(3, t.cache.demote("", old, system.length));
            t.serve(prompt(2000, 8)); // 12 - 7 cached = 5 free; 3 more must go
            assertEquals(8, t.onDevice(old), "the shared prefix keeps its class");
            assertEquals(8, t.onDevice(other), "the least recently used of the rest stays: the demoted went first");
            t.settle();
        }
    }

    @Test
    void demoteLowersWhatContinuesThePromptAndNothingBesides() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(16)) {
            int[] question = prompt(100, 2);
            int[] answered = concat(question, prompt(700, 2)); // the same conversation, one turn further
            int[] branch = concat(prompt(100, 1), prompt(800, 2)); // shares only the first page
            t.serve(answered, KEEP);
            t.serve(branch, KEEP);
            assertEquals(4, t.cache.demote("", question), "the question's 2 pages and the 2 that continue it");
            assertEquals(0, t.cache.demote("", prompt(5000, 2)), "nothing cached: nothing lowered");
            assertEquals(0, t.cache.demote("some-adapter", question), "another extra key's runs are not these");
            t.serve(prompt(3000, 13)); // 16 - 6 cached = 10 free; 3 must go
            assertEquals(4, t.onDevice(answered), "only the first page, which the branch shares, stays");
            assertEquals(12, t.onDevice(branch), "the branch keeps its class");
            t.settle();
        }
    }

    @Test
    void hostEvictionTakesTheLowestClassFirstToo() throws Exception {
        // 8 device pages, 17 host slots, write-through; background eviction only when every slot is taken, which
        // never happens here: host eviction happens when a backup needs room, on the thread that asks
        try (TinyCache t = TinyCache.withHost(
                8, null, "hicache-ratio", "2.125", "hicache-host-high-water", "1.0", "hicache-host-low-water", "0.9")) {
            assertEquals(17, t.cache.room().hostPages());
            Retention higher = Retention.of(60, Duration.ofSeconds(60));
            int[] a = prompt(100, 4);
            int[] b = prompt(200, 4);
            t.serve(a, KEEP);
            t.settle();
            t.serve(b); // more recent than a, but of no class
            t.settle();
            t.serve(prompt(300, 4), higher); // b leaves the device: host-only
            t.settle();
            t.serve(prompt(400, 4), higher); // a, now the lowest class on the device, leaves it; 1 host slot free
            t.settle();
            assertEquals(0, t.onDevice(a));
            assertEquals(16, t.onHost(a));
            assertEquals(16, t.onHost(b));
            t.serve(prompt(500, 4), higher); // its backup needs 4 host slots: a host-only prompt goes
            t.settle();
            assertEquals(16, t.onHost(a), "retained on the host, though least recently used");
            assertEquals(0, t.onHost(b), "of no class: first to go, though more recently used");
            assertEquals(16, t.serve(a), "and served from there");
            t.settle();
        }
    }

    @Test
    void retentionAndDemoteCheckTheirArguments() throws Exception {
        IllegalArgumentException high =
                assertThrows(IllegalArgumentException.class, () -> Retention.of(100, Duration.ofSeconds(1)));
        assertTrue(high.getMessage().contains("priority must be within 0-99, was 100"), high.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Retention.of(-1, Duration.ofSeconds(1)));
        IllegalArgumentException negative =
                assertThrows(IllegalArgumentException.class, () -> Retention.of(1, Duration.ofSeconds(-1)));
        assertTrue(negative.getMessage().contains("must not be negative"), negative.getMessage());
        assertEquals(
                Long.MAX_VALUE / 4,
                Retention.of(1, Duration.ofSeconds(Long.MAX_VALUE)).millis());
        assertEquals(1, Retention.of(1, Duration.ofNanos(1)).millis(), "a positive retention never rounds to 0");
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] a = prompt(100, 2);
            IllegalArgumentException beyond =
                    assertThrows(IllegalArgumentException.class, () -> t.cache.demote("", a, 9));
            assertTrue(beyond.getMessage().contains("keepTokens must be within 0-8"), beyond.getMessage());
            assertThrows(IllegalArgumentException.class, () -> t.cache.demote("", a, -1));
        }
    }
}
