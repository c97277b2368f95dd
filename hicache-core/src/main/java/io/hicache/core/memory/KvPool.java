package io.hicache.core.memory;

import io.hicache.core.page.PageFormat;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * A KV pool on a device: {@link #pages()} pages of {@link #format()} in device memory, laid out as
 * {@link DeviceLayout} says, with a page allocator and batched copies to and from a {@link HostSlab}.
 *
 * <p>Copies take page indices on both sides, in pairs: the i-th source page goes to the i-th destination
 * page. Indices may be scattered and in any order; a destination may not appear twice in one copy. Copies
 * run asynchronously, in submission order per direction (as on a CUDA stream: one for loads, one for
 * backups); loads and backups may overlap each other. The caller owns the pages it names: it keeps them
 * allocated, and does not read a destination, until the copy is done.
 *
 * <p>Thread-safe. Closing the pool waits for its copies, then frees its device memory (unless the pool adopted
 * memory the engine allocated: {@link DeviceRuntime#adoptPool}); the runtime that created it closes it at the latest
 * when the runtime closes.
 */
public interface KvPool extends AutoCloseable {
    /** Geometry and page size; its layout fixes the flat order of {@link #readPage} and {@link #writePage}. */
    PageFormat format();

    /** Pages in the pool. */
    int pages();

    /** The allocator of this pool's pages. */
    PageAllocator allocator();

    /**
     * Copies device pages to host pages, all layers at once (a backup, device to host). Every layer's
     * signal completes together.
     *
     * @throws IllegalArgumentException for mismatched lists, indices out of range, a repeated destination, or
     *     a slab of another geometry or page size
     */
    KvCopy backup(int[] devicePages, HostSlab host, int[] hostSlots);

    /**
     * Copies host pages to device pages one layer at a time (a load), signalling each layer as it lands.
     *
     * @throws IllegalArgumentException as for {@link #backup}
     */
    KvCopy load(HostSlab host, int[] hostSlots, int[] devicePages);

    /**
     * Copies layers {@code [firstLayer, firstLayer + layerCount)} of device pages to host pages, signalling each layer
     * as it lands ({@link KvCopy#layerDone}{@code (j)} is layer {@code firstLayer + j}): a staged handoff's gather, so
     * that layer i can leave the host while later layers are still copied. Runs on the backup stream, after the
     * backups submitted before it.
     *
     * @throws IllegalArgumentException as for {@link #backup}, or for a layer range outside the format's layers
     */
    KvCopy backupLayers(int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount);

    /**
     * Copies layers {@code [firstLayer, firstLayer + layerCount)} of host pages to device pages, signalling each layer
     * as it lands: a staged handoff's scatter, one layer as soon as it arrived. Runs on the load stream, after the
     * loads submitted before it.
     *
     * @throws IllegalArgumentException as for {@link #backupLayers}
     */
    KvCopy loadLayers(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount);

    /**
     * Writes one page from host memory in the flat order of {@link #format()}, synchronously. Not ordered with
     * copies in flight: for tests, verification and hand-over of single pages.
     */
    void writePage(int devicePage, MemorySegment flat);

    /** Reads one page into host memory in the flat order of {@link #format()}, synchronously. */
    void readPage(int devicePage, MemorySegment flat);

    /**
     * The pool's memory when this process can address it directly (the emulated device keeps it in host memory), so
     * a transfer engine can register it and peers can write pages into it; empty for a real device, whose memory a
     * transport must reach through its own registration (GPUDirect RDMA). Laid out as {@link DeviceLayout} says.
     * Valid until the pool closes.
     */
    default Optional<MemorySegment> hostVisibleMemory() {
        return Optional.empty();
    }

    /**
     * Where K and V live on the device, per layer, with strides, page size and dtype: what an engine hands to its
     * attention kernels. Valid until the pool closes.
     */
    DeviceBuffers buffers();

    /** Bytes of device memory the pool occupies. */
    long bytes();

    /** Waits for copies in flight, then frees the device memory. Idempotent. */
    @Override
    void close();
}
