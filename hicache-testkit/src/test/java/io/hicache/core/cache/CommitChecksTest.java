package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * What {@link CacheRequest#commit} refuses, from the cases an outside check found it accepting (each once served a
 * later, innocent request another prompt's KV or lost a page), and what it must go on accepting (chunks, generated
 * tokens). A refused commit changes nothing: the request still owns its pages and the tree is as it was.
 */
class CommitChecksTest {
    private static final int PAGE = 16;
    private static final Map<String, String> SETTINGS =
            Map.of("page-size", Integer.toString(PAGE), "hicache-write-policy", "write_through");

    @Test
    void aCommitUnderTokensOtherThanThePromptIsRefusedAndChangesNothing() throws Exception {
        try (TestEngine engine = new TestEngine(SETTINGS, 64, null)) {
            int[] prompt = TestEngine.prompt(1000, 4 * PAGE);
            int[] other = TestEngine.prompt(5000, 4 * PAGE);
            try (CacheRequest r = engine.cache.request("r", prompt)) {
                int[] pages = r.allocate(4);
                var refused = assertThrows(IllegalArgumentException.class, () -> r.commit(other, pages, true));
                assertTrue(refused.getMessage().contains("token 0 of the commit"), refused.getMessage());
                assertEquals(Set.of(pages[0], pages[1], pages[2], pages[3]), r.ownedPages());
                r.commit(prompt, pages, true); // the right tokens are still taken
            }
            try (CacheRequest innocent = engine.cache.request("innocent", other)) {
                assertEquals(0, innocent.deviceTokens() + innocent.hostTokens(), "another prompt's KV is claimed");
            }
            engine.quiesce();
            engine.cache.core().checkConsistency(true);
        }
    }

    @Test
    void theCachedPrefixsPagesUnderOtherTokensAreRefused() throws Exception {
        try (TestEngine engine = new TestEngine(SETTINGS, 64, null)) {
            int[] prompt = TestEngine.prompt(1000, 4 * PAGE);
            engine.serve("first", prompt);
            int[] forked = prompt.clone();
            forked[3] = 77; // the first page differs, the rest is the same
            try (CacheRequest r = engine.cache.request("second", prompt)) {
                int[] prefix = r.prefixPages();
                assertEquals(4, prefix.length);
                assertThrows(IllegalArgumentException.class, () -> r.commit(forked, prefix, true));
                engine.cache.core().checkConsistency(false); // every device page still has one owner
            }
            try (CacheRequest fork = engine.cache.request("fork", forked)) {
                assertEquals(0, fork.deviceTokens(), "the fork is claimed cached with the original's pages");
            }
            engine.serve("again", prompt); // the original is still served with its own bytes (serve checks them)
            engine.quiesce();
            engine.cache.core().checkConsistency(true);
        }
    }

    @Test
    void aPageListedTwiceIsRefusedAndNoPageIsLost() throws Exception {
        try (TestEngine engine = new TestEngine(SETTINGS, 16, null)) {
            int[] prompt = TestEngine.prompt(1000, 4 * PAGE);
            try (CacheRequest r = engine.cache.request("r", prompt)) {
                int[] pages = r.allocate(4);
                int[] same = {pages[0], pages[0], pages[0], pages[0]};
                var refused = assertThrows(IllegalArgumentException.class, () -> r.commit(prompt, same, true));
                assertTrue(refused.getMessage().contains("listed more than once"), refused.getMessage());
                int[] twice = {pages[0], pages[1], pages[2], pages[1]};
                assertThrows(IllegalArgumentException.class, () -> r.commit(prompt, twice, false));
                assertEquals(4, r.ownedPages().size());
            }
            // Every page of the pool can be had again: none was lost, none is listed twice in a free.
            try (CacheRequest whole = engine.cache.request("whole", TestEngine.prompt(9000, PAGE))) {
                int[] all = whole.allocate(16);
                assertEquals(16, Arrays.stream(all).distinct().count());
            }
            engine.cache.core().checkConsistency(true);
        }
    }

    @Test
    void chunksAndGeneratedTokensAreAcceptedButAChunkBindsTheRestOfThePrompt() throws Exception {
        try (TestEngine engine = new TestEngine(SETTINGS, 64, null)) {
            int[] prompt = TestEngine.prompt(1000, 4 * PAGE);
            try (CacheRequest r = engine.cache.request("chunked", prompt)) {
                int[] first = r.allocate(2);
                r.commit(Arrays.copyOf(prompt, 2 * PAGE), first, false);
                int[] wrongTail = prompt.clone();
                wrongTail[3 * PAGE] = 42; // agrees with the chunk, not with the prompt
                int[] rest = r.allocate(2);
                int[] all = {first[0], first[1], rest[0], rest[1]};
                assertThrows(IllegalArgumentException.class, () -> r.commit(wrongTail, all, true));
                assertArrayEquals(first, r.prefixPages());
                int[] generated = TestEngine.concat(prompt, TestEngine.prompt(3, PAGE + 5)); // and a partial page
                int[] last = r.allocate(1);
                r.commit(generated, new int[] {first[0], first[1], rest[0], rest[1], last[0]}, true);
                assertFalse(r.ownedPages().contains(last[0]));
            }
            engine.quiesce();
            engine.cache.core().checkConsistency(true);
        }
    }

    @Test
    void roomSaysWhatEachTierHoldsAndHasFree() throws Exception {
        try (TestEngine engine =
                new TestEngine(Map.of("page-size", Integer.toString(PAGE), "hicache-ratio", "2"), 16, null)) {
            assertEquals(new HiCache.Room(16, 16, 0, 32, 32), engine.cache.room());
            try (CacheRequest r = engine.cache.request("r", TestEngine.prompt(1000, 4 * PAGE))) {
                r.commit(TestEngine.prompt(1000, 4 * PAGE), r.allocate(4), false);
                r.allocate(2);
                HiCache.Room room = engine.cache.room();
                assertEquals(10, room.deviceFreePages());
                assertEquals(0, room.deviceEvictablePages(), "the request pins its prefix");
            }
            HiCache.Room after = engine.cache.room();
            assertEquals(12, after.deviceFreePages());
            assertEquals(4, after.deviceEvictablePages());
        }
    }

    @Test
    void anAllocationThatCouldNeverFitSaysSo() throws Exception {
        try (TestEngine engine = new TestEngine(SETTINGS, 8, null)) {
            try (CacheRequest r = engine.cache.request("big", TestEngine.prompt(1000, 20 * PAGE))) {
                var never = assertThrows(HiCacheException.class, () -> r.allocate(20));
                assertEquals(ErrorCode.PAGES_EXHAUSTED, never.code());
                assertTrue(
                        never.getMessage().contains("can never fit")
                                && !never.getMessage().contains("retry once"),
                        never.getMessage());
                r.allocate(6);
                var held = assertThrows(HiCacheException.class, () -> r.allocate(3));
                assertTrue(held.getMessage().contains("6 of them held by this request"), held.getMessage());
            }
            try (CacheRequest a = engine.cache.request("a", TestEngine.prompt(1000, PAGE));
                    CacheRequest b = engine.cache.request("b", TestEngine.prompt(2000, PAGE))) {
                a.allocate(6);
                var temporary = assertThrows(HiCacheException.class, () -> b.allocate(3)); // another request's pages
                assertTrue(temporary.getMessage().contains("Temporary"), temporary.getMessage());
            }
        }
    }
}
