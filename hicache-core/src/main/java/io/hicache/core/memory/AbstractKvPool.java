package io.hicache.core.memory;

import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The skeleton of a {@link KvPool}, as {@link io.hicache.core.store.AbstractPageStore} is of a store: a runtime's pool
 * says how it starts a copy ({@link #startBackup}, {@link #startLoad}) and moves single pages; the checks every copy
 * and page call makes, the allocator, the layout walk of a flat page and the closed state are here, once.
 *
 * <p>Thread-safe as its subclass is.
 */
public abstract class AbstractKvPool implements KvPool {
    /** Geometry, page size and host layout of the pool's pages. */
    protected final PageFormat format;
    /** Pages in the pool. */
    protected final int pages;

    private final PageAllocator allocator;
    private final String description;
    private final AtomicBoolean closed = new AtomicBoolean();

    /** A pool of {@code pages} pages of {@code format}; {@code description} names it in errors ("the CUDA KV pool"). */
    protected AbstractKvPool(PageFormat format, int pages, String description) {
        this.format = Checks.checkNotNull(format, "format");
        this.pages = Checks.checkPositive(pages, "pages");
        this.description = description;
        this.allocator = new PageAllocator(description, pages);
    }

    @Override
    public final PageFormat format() {
        return format;
    }

    @Override
    public final int pages() {
        return pages;
    }

    @Override
    public final PageAllocator allocator() {
        return allocator;
    }

    @Override
    public final KvCopy backup(int[] devicePages, HostSlab host, int[] hostSlots) {
        checkCopy(host);
        CopyChecks.checkPairs(devicePages, pages, "devicePages", hostSlots, host.slots(), "hostSlots");
        return startBackup(
                devicePages.clone(),
                host,
                hostSlots.clone(),
                0,
                format.geometry().layers(),
                false);
    }

    @Override
    public final KvCopy backupLayers(
            int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount) {
        checkCopy(host);
        CopyChecks.checkLayers(format, firstLayer, layerCount);
        CopyChecks.checkPairs(devicePages, pages, "devicePages", hostSlots, host.slots(), "hostSlots");
        return startBackup(devicePages.clone(), host, hostSlots.clone(), firstLayer, layerCount, true);
    }

    @Override
    public final KvCopy loadLayers(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount) {
        checkCopy(host);
        CopyChecks.checkLayers(format, firstLayer, layerCount);
        CopyChecks.checkPairs(hostSlots, host.slots(), "hostSlots", devicePages, pages, "devicePages");
        return startLoad(host, hostSlots.clone(), devicePages.clone(), firstLayer, layerCount);
    }

    @Override
    public final KvCopy load(HostSlab host, int[] hostSlots, int[] devicePages) {
        return loadLayers(host, hostSlots, devicePages, 0, format.geometry().layers());
    }

    /**
     * Starts copying layers {@code [firstLayer, firstLayer + layerCount)} of the device pages to the host slots, on the
     * backup stream: each layer signalled as it lands ({@code perLayer}), or all together. The arrays are the pool's.
     */
    protected abstract KvCopy startBackup(
            int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount, boolean perLayer);

    /**
     * Starts copying layers {@code [firstLayer, firstLayer + layerCount)} of the host slots to the device pages, on the
     * load stream, each layer signalled as it lands. The arrays are the pool's.
     */
    protected abstract KvCopy startLoad(
            HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount);

    /** Checks a copy's host side: the pool is open and the slab holds pages of this format. */
    protected void checkCopy(HostSlab host) {
        checkOpen();
        CopyChecks.checkSameGeometry(format, host);
    }

    /** Checks a single page's call: the pool is open, the page in range, {@code flat} one whole flat page. */
    protected final void checkFlat(int devicePage, MemorySegment flat) {
        checkOpen();
        Checks.requireArgument(
                devicePage >= 0 && devicePage < pages, "device page %d is out of range [0, %d)", devicePage, pages);
        Checks.checkNotNull(flat, "flat");
        Checks.requireArgument(
                flat.byteSize() == format.pageBytes(),
                "a flat page is %d bytes, got %d",
                format.pageBytes(),
                flat.byteSize());
    }

    /** One run of a page: where it is in the pool, where in the flat page, and its bytes. */
    @FunctionalInterface
    public interface RunAction {
        void run(long deviceOffset, long flatOffset, long length);
    }

    /** Visits page {@code page}'s runs as (device offset, flat-page offset, length), in the format's flat order. */
    protected final void forEachRun(int page, RunAction action) {
        int parts = format.geometry().attention().parts();
        long row = format.rowBytes();
        long chunk = DeviceLayout.chunkBytes(format);
        for (int part = 0; part < parts; part++) {
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                long device = DeviceLayout.chunkOffset(format, pages, page, layer, part);
                switch (format.byteOrder()) {
                    case LAYER_MAJOR -> action.run(device, format.rowOffset(part, layer, 0), chunk);
                    case TOKEN_MAJOR -> {
                        for (int t = 0; t < format.pageSizeTokens(); t++) {
                            action.run(device + t * row, format.rowOffset(part, layer, t), row);
                        }
                    }
                }
            }
        }
    }

    /** Fails when the pool is closed. */
    protected final void checkOpen() {
        Checks.requireState(!closed.get(), "%s is closed", description);
    }

    /** Marks the pool closed; true the first time only, so that {@link #close()} releases once. */
    protected final boolean markClosed() {
        return closed.compareAndSet(false, true);
    }
}
