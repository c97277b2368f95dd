package io.hicache.core.memory;

import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * Host memory holding {@code slots} pages in a host layout, and where each page's data lies in it. It
 * describes memory it does not own: the host page pool's mapped slab, or any segment a test provides.
 *
 * <pre>
 * layer_first        [part][layer][slot][token][heads*dim]  the device's own order; a page is 2L runs of
 *                                                           pageSize rows, far apart
 * page_first         [slot][part][token][layer][heads*dim]  a page is one block, token-major inside
 * page_first_direct  [slot][part][layer][token][heads*dim]  a page is one block, layer-major inside
 * </pre>
 *
 * <p>In the two page-first layouts a page's K and V are adjacent, so a page is one contiguous block in the
 * flat order of {@link PageFormat#rowOffset} and moves to a store with no staging copy, under one key. (SGLang
 * keeps K and V in two halves of the buffer, so each of its pages is two blocks.)
 *
 * <p>Immutable; thread-safe as far as the memory is (concurrent copies of different pages are fine).
 */
public final class HostSlab {
    private final MemorySegment memory;
    private final PageFormat format;
    private final int slots;
    private final long rowBytes;
    private final long chunkBytes;

    /**
     * Describes {@code memory} as {@code slots} pages of {@code format}.
     *
     * @throws IllegalArgumentException when the memory is too small or not native
     */
    public HostSlab(MemorySegment memory, PageFormat format, int slots) {
        this.memory = Checks.checkNotNull(memory, "memory");
        this.format = Checks.checkNotNull(format, "format");
        this.slots = Checks.checkPositive(slots, "slots");
        Checks.requireArgument(memory.isNative(), "a host slab must be native memory");
        Checks.requireArgument(
                memory.byteSize() >= bytesFor(format, slots),
                "a slab of %d pages of %d bytes needs %d bytes, the memory has %d",
                slots,
                format.pageBytes(),
                bytesFor(format, slots),
                memory.byteSize());
        this.rowBytes = format.rowBytes();
        this.chunkBytes = rowBytes * format.pageSizeTokens();
    }

    /** Bytes of a slab of {@code slots} pages. */
    public static long bytesFor(PageFormat format, int slots) {
        return Math.multiplyExact(format.pageBytes(), (long) slots);
    }

    public MemorySegment memory() {
        return memory;
    }

    public PageFormat format() {
        return format;
    }

    public HostLayout layout() {
        return format.layout();
    }

    public int slots() {
        return slots;
    }

    /** True when each (layer, part) of a page is one run of {@code pageSize} rows: all layouts but page_first. */
    public boolean chunked() {
        return format.layout() != HostLayout.PAGE_FIRST;
    }

    /** True when each page is one contiguous block: page_first and page_first_direct. */
    public boolean pagesContiguous() {
        return format.layout() != HostLayout.LAYER_FIRST;
    }

    /** Bytes of one (layer, part) run of a page: {@code pageSize} rows. */
    public long chunkBytes() {
        return chunkBytes;
    }

    /** Offset of the run holding layer {@code layer}, part {@code part} of page {@code slot} (chunked layouts). */
    public long chunkOffset(int slot, int layer, int part) {
        Checks.requireState(chunked(), "page_first pages have no per-layer runs; use rowOffset");
        Objects.checkIndex(slot, slots);
        return switch (format.layout()) {
            case LAYER_FIRST -> (((long) part * format.geometry().layers() + layer) * slots + slot) * chunkBytes;
            case PAGE_FIRST_DIRECT -> (long) slot * format.pageBytes() + format.rowOffset(part, layer, 0);
            case PAGE_FIRST -> throw new IllegalStateException("unreachable");
        };
    }

    /** Offset of the row of {@code token} in layer {@code layer}, part {@code part} of page {@code slot}. */
    public long rowOffset(int slot, int layer, int part, int token) {
        Objects.checkIndex(slot, slots);
        if (format.layout() == HostLayout.LAYER_FIRST) {
            Objects.checkIndex(token, format.pageSizeTokens());
            return chunkOffset(slot, layer, part) + token * rowBytes;
        }
        return (long) slot * format.pageBytes() + format.rowOffset(part, layer, token);
    }

    /**
     * Page {@code slot} as one block, in the flat order of its format (page-first layouts only): what goes
     * to a store without a staging copy.
     */
    public MemorySegment page(int slot) {
        Checks.requireState(pagesContiguous(), "layer_first pages are not contiguous; use readPage/writePage");
        Objects.checkIndex(slot, slots);
        return memory.asSlice((long) slot * format.pageBytes(), format.pageBytes());
    }

    /** Copies page {@code slot} into {@code flat}, in the flat order of the format (gathering for layer_first). */
    public void readPage(int slot, MemorySegment flat) {
        checkFlat(flat);
        if (pagesContiguous()) {
            MemorySegment.copy(page(slot), 0, flat, 0, format.pageBytes());
            return;
        }
        forEachChunk(
                slot, (slabOffset, flatOffset) -> MemorySegment.copy(memory, slabOffset, flat, flatOffset, chunkBytes));
    }

    /** Copies {@code flat}, in the flat order of the format, into page {@code slot} (scattering for layer_first). */
    public void writePage(int slot, MemorySegment flat) {
        checkFlat(flat);
        if (pagesContiguous()) {
            MemorySegment.copy(flat, 0, page(slot), 0, format.pageBytes());
            return;
        }
        forEachChunk(
                slot, (slabOffset, flatOffset) -> MemorySegment.copy(flat, flatOffset, memory, slabOffset, chunkBytes));
    }

    private interface ChunkAction {
        void run(long slabOffset, long flatOffset);
    }

    private void forEachChunk(int slot, ChunkAction action) {
        int parts = format.geometry().attention().parts();
        for (int part = 0; part < parts; part++) {
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                action.run(chunkOffset(slot, layer, part), format.rowOffset(part, layer, 0));
            }
        }
    }

    private void checkFlat(MemorySegment flat) {
        Checks.requireArgument(
                flat.byteSize() == format.pageBytes(),
                "a flat page is %d bytes, got %d",
                format.pageBytes(),
                flat.byteSize());
    }

    @Override
    public String toString() {
        return "HostSlab[" + slots + " pages, " + format + "]";
    }
}
