package io.hicache.core.page;

import io.hicache.core.util.Checks;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The layers of a hybrid model and what each kind keeps per page: full-attention layers (a KV page, as every model
 * has), optionally sliding-window layers (KV of the last {@code windowTokens} tokens only), and optionally recurrent
 * layers (Mamba, linear attention: a state of fixed size, checkpointed after a page where the engine takes one).
 * A prefix of {@code p} pages can be restored when the full-attention pages {@code [0, p)}, the window's last
 * {@link #windowPages} pages before {@code p} and the state after page {@code p - 1} are all at hand (SGLang's
 * hybrid radix caches: {@code mamba_radix_cache}, the SWA component).
 *
 * @param full   the full-attention layers' geometry
 * @param window the sliding-window layers, if any
 * @param stateBytes the bytes of one recurrent-state checkpoint (all recurrent layers), if any
 */
public record HybridGeometry(KvGeometry full, Optional<SlidingWindow> window, OptionalLong stateBytes) {
    /**
     * Sliding-window layers.
     *
     * @param layers the window layers' geometry
     * @param tokens the window, in tokens (at least 1)
     */
    public record SlidingWindow(KvGeometry layers, int tokens) {
        public SlidingWindow {
            Checks.checkNotNull(layers, "layers");
            Checks.checkPositive(tokens, "tokens");
        }
    }

    public HybridGeometry {
        Checks.checkNotNull(full, "full");
        Checks.checkNotNull(window, "window");
        Checks.checkNotNull(stateBytes, "stateBytes");
        stateBytes.ifPresent(b -> Checks.checkPositive(b, "stateBytes"));
    }

    /** A model of full-attention layers only. */
    public static HybridGeometry fullAttention(KvGeometry full) {
        return new HybridGeometry(full, Optional.empty(), OptionalLong.empty());
    }

    /** This geometry with sliding-window layers. */
    public HybridGeometry withWindow(KvGeometry layers, int tokens) {
        return new HybridGeometry(full, Optional.of(new SlidingWindow(layers, tokens)), stateBytes);
    }

    /** This geometry with recurrent layers whose checkpoint is {@code bytes}. */
    public HybridGeometry withState(long bytes) {
        return new HybridGeometry(full, window, OptionalLong.of(bytes));
    }

    /**
     * How many pages of window KV a prefix needs at its end: the pages that hold its last {@code tokens} tokens, at
     * most {@code ceil(tokens / pageTokens)}, 0 without window layers. Earlier window pages can be dropped: no suffix
     * of the prefix attends to them.
     */
    public int windowPages(int pageTokens) {
        Checks.checkPositive(pageTokens, "pageTokens");
        return window.map(w -> (w.tokens() + pageTokens - 1) / pageTokens).orElse(0);
    }

    /** The bytes of one page of full-attention KV. */
    public long fullPageBytes(int pageTokens) {
        Checks.checkPositive(pageTokens, "pageTokens");
        return full.tokenBytes() * pageTokens;
    }

    /** The bytes of one page of window KV, 0 without window layers. */
    public long windowPageBytes(int pageTokens) {
        Checks.checkPositive(pageTokens, "pageTokens");
        return window.map(w -> w.layers().tokenBytes() * pageTokens).orElse(0L);
    }

    /**
     * The page format of the window layers' KV, for a device pool of window pages: the window geometry in pages of
     * {@code pageTokens}.
     *
     * @throws IllegalStateException without window layers
     */
    public PageFormat windowFormat(int pageTokens, HostLayout layout) {
        SlidingWindow w = window.orElseThrow(() -> new IllegalStateException("the model has no sliding-window layers"));
        return new PageFormat(w.layers(), pageTokens, layout);
    }

    /**
     * A page format whose page is one recurrent-state checkpoint, for a device pool of state slots (one slot a
     * page): one MLA-shaped layer of bytes, as many "tokens" of rows as the state needs. The row is the greatest power
     * of two up to 64 KiB that divides the state (states are arrays of floats: a multiple of 64 bytes), within
     * {@link PageFormat}'s limits.
     *
     * @throws IllegalStateException without recurrent layers
     * @throws IllegalArgumentException when the state is not a multiple of 64 bytes
     */
    public PageFormat stateFormat(HostLayout layout) {
        long bytes = stateBytes.orElseThrow(() -> new IllegalStateException("the model has no recurrent layers"));
        Checks.requireArgument(bytes % 64 == 0, "a recurrent state of %d bytes is not a multiple of 64 bytes", bytes);
        int row = (int) Math.min(1L << 16, Long.lowestOneBit(bytes));
        KvGeometry rows = new KvGeometry(AttentionKind.MLA, 1, 1, row, KvDtype.FP8_E4M3);
        return new PageFormat(rows, Math.toIntExact(bytes / row), layout);
    }

    /** Whether the model has layers beyond full attention. */
    public boolean hybrid() {
        return window.isPresent() || stateBytes.isPresent();
    }
}
