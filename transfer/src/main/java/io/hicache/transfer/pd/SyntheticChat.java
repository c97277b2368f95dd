package io.hicache.transfer.pd;

import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * A made-up chat workload and "model" that prefill and decode processes agree on without talking: conversation
 * {@code c}'s turn {@code t} is room {@code c * 1000 + t}, its prompt a 64-token system prompt and, per turn up to
 * {@code t}, a 32-token user message, with a 16-token answer after every earlier one; a page's KV bytes follow from the
 * tokens up to its end. {@code hicache pd prefill} derives the prompt from the room the decode names, computes the
 * pages, and the decode checks every byte it received. Stateless.
 */
public final class SyntheticChat {
    /** Turns a conversation may have: rooms are {@code conversation * TURNS + turn}. */
    public static final int TURNS = 1000;

    static final int SYSTEM_TOKENS = 64;
    static final int USER_TOKENS = 32;
    static final int ANSWER_TOKENS = 16;

    private SyntheticChat() {}

    /** The room of {@code conversation}'s turn {@code turn}. */
    public static long room(int conversation, int turn) {
        return (long) conversation * TURNS + turn;
    }

    /** The prompt of the turn room {@code room} stands for. */
    public static int[] prompt(long room) {
        int conversation = (int) (room / TURNS);
        int turn = (int) (room % TURNS);
        int[] tokens = tokens(0, 0, 1, SYSTEM_TOKENS);
        for (int t = 0; t <= turn; t++) {
            if (t > 0) {
                tokens = concat(tokens, answer(conversation, t - 1));
            }
            tokens = concat(tokens, tokens(conversation, t, 2, USER_TOKENS));
        }
        return tokens;
    }

    /** The answer the decode generates at {@code conversation}'s turn {@code turn}. */
    public static int[] answer(int conversation, int turn) {
        return tokens(conversation, turn, 3, ANSWER_TOKENS);
    }

    /** Computes the KV of {@code tokens}' page positions {@code from ..} into {@code pages} of {@code cache}'s pool. */
    public static void compute(HiCache cache, int[] tokens, int from, int[] pages) {
        MemorySegment flat = Arena.ofAuto().allocate(cache.format().pageBytes(), 64);
        for (int i = 0; i < pages.length; i++) {
            fill(flat, tokens, from + i, cache.config().pageSizeTokens());
            cache.device().writePage(pages[i], flat);
        }
    }

    /**
     * The synthetic engine's decode of a received prompt: generates {@code answer} into the request's prompt pages
     * (the prompt's partial last page takes answer tokens too, so its KV is computed again, as decoding does) and pages
     * it allocates from the request, then ends the request through {@code decode} ({@link CachedDecode#finish}).
     * Returns the sequence, prompt and answer.
     */
    public static int[] decode(
            CachedDecode decode, HiCache cache, CachedDecode.Received got, int[] prompt, int[] answer) {
        int pageSize = cache.config().pageSizeTokens();
        int[] sequence = concat(prompt, answer);
        int positions = (sequence.length + pageSize - 1) / pageSize;
        // a receive that succeeded has both
        int[] received = Checks.checkNotNull(got.pages(), "a received prompt's pages");
        CacheRequest request = Checks.checkNotNull(got.request(), "a received prompt's request");
        int[] pages = Arrays.copyOf(received, positions);
        int[] more = request.allocate(positions - received.length);
        System.arraycopy(more, 0, pages, received.length, more.length);
        int from = prompt.length / pageSize;
        compute(cache, sequence, from, Arrays.copyOfRange(pages, from, positions));
        decode.finish(request, sequence, pages);
        return sequence;
    }

    /** The page positions of {@code tokens} whose bytes in {@code pages} are not what {@link #compute} writes. */
    public static int wrongPages(HiCache cache, int[] tokens, int[] pages) {
        MemorySegment got = Arena.ofAuto().allocate(cache.format().pageBytes(), 64);
        MemorySegment want = Arena.ofAuto().allocate(cache.format().pageBytes(), 64);
        int wrong = 0;
        for (int i = 0; i < pages.length; i++) {
            cache.device().readPage(pages[i], got);
            fill(want, tokens, i, cache.config().pageSizeTokens());
            wrong += want.mismatch(got) < 0 ? 0 : 1;
        }
        return wrong;
    }

    private static void fill(MemorySegment flat, int[] tokens, int position, int pageSize) {
        int end = Math.min(tokens.length, (position + 1) * pageSize);
        SplittableRandom bytes = new SplittableRandom(Arrays.hashCode(Arrays.copyOf(tokens, end)) * 31L + end);
        for (long b = 0; b + 8 <= flat.byteSize(); b += 8) {
            flat.set(ValueLayout.JAVA_LONG_UNALIGNED, b, bytes.nextLong());
        }
    }

    private static int[] tokens(int conversation, int turn, int kind, int n) {
        SplittableRandom random = new SplittableRandom(((long) conversation * TURNS + turn) * 4 + kind);
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(32_000);
        }
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
