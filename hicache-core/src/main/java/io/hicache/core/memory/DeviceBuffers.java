package io.hicache.core.memory;

import io.hicache.core.page.AttentionKind;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a KV pool's K and V live on its device, per layer, in the form an engine hands to its attention kernels:
 * device addresses (for CUDA, {@code CUdeviceptr} values; for the emulated device, addresses of its host memory),
 * strides, page size and dtype. The pool is laid out as {@link DeviceLayout} says: per layer and part one buffer of
 * {@code pages * pageSizeTokens} token rows of {@code rowBytes}, so token slot {@code s = page * pageSizeTokens + t}
 * of layer {@code l} has its K row at {@code layers.get(l).keyAddress() + s * rowBytes} and its V row at
 * {@code valueAddress() + s * rowBytes}, which is how SGLang's and vLLM's KV buffers are indexed ({@code
 * k_buffer[layer][slot]}).
 *
 * <p>Immutable. The addresses are valid while the pool is open; the memory belongs to the pool, or, for a pool
 * adopted over memory the engine allocated ({@link DeviceRuntime#adoptPool}), to the engine.
 *
 * @param runtime         the device runtime's name ({@code cuda}, {@code emulated})
 * @param pages           pages in the pool
 * @param pageSizeTokens  token rows per page
 * @param dtype           the element type of K and V
 * @param attention       MHA (K and V buffers) or MLA (one latent buffer per layer, as K; no V)
 * @param rowBytes        bytes of one token row of one layer and part (all heads of this rank)
 * @param pageStrideBytes bytes between a page's first row and the next page's in one buffer
 * @param layers          one entry per layer, in order
 */
public record DeviceBuffers(
        String runtime,
        int pages,
        int pageSizeTokens,
        KvDtype dtype,
        AttentionKind attention,
        long rowBytes,
        long pageStrideBytes,
        List<Layer> layers) {

    /**
     * One layer's buffers.
     *
     * @param keyAddress   the device address of the layer's K buffer (MLA: its latent buffer)
     * @param valueAddress the device address of its V buffer; 0 for MLA
     */
    public record Layer(long keyAddress, long valueAddress) {}

    public DeviceBuffers {
        Checks.checkNotNull(runtime, "runtime");
        Checks.checkNotNull(dtype, "dtype");
        Checks.checkNotNull(attention, "attention");
        layers = List.copyOf(layers);
    }

    /** The buffers of a pool of {@code pages} pages of {@code format} whose memory starts at {@code baseAddress}. */
    public static DeviceBuffers of(String runtime, PageFormat format, int pages, long baseAddress) {
        AttentionKind attention = format.geometry().attention();
        int parts = attention.parts();
        List<Layer> layers = new ArrayList<>(format.geometry().layers());
        for (int layer = 0; layer < format.geometry().layers(); layer++) {
            long k = baseAddress + DeviceLayout.chunkOffset(format, pages, 0, layer, 0);
            long v = parts > 1 ? baseAddress + DeviceLayout.chunkOffset(format, pages, 0, layer, 1) : 0;
            layers.add(new Layer(k, v));
        }
        return new DeviceBuffers(
                runtime,
                pages,
                format.pageSizeTokens(),
                format.geometry().dtype(),
                attention,
                format.rowBytes(),
                DeviceLayout.chunkBytes(format),
                layers);
    }

    /** Token slots per buffer: {@code pages * pageSizeTokens}. */
    public long tokenSlots() {
        return (long) pages * pageSizeTokens;
    }

    /** The device address of token {@code token} of page {@code page} in layer {@code layer}'s K (part 0) or V (1). */
    public long rowAddress(int layer, int part, int page, int token) {
        Checks.requireArgument(
                part == 0 || (part == 1 && attention == AttentionKind.MHA), "no part %d for %s", part, attention);
        Layer l = layers.get(layer);
        return (part == 0 ? l.keyAddress() : l.valueAddress())
                + (long) page * pageStrideBytes
                + (long) token * rowBytes;
    }
}
