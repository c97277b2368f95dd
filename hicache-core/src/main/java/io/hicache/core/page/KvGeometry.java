package io.hicache.core.page;

import io.hicache.core.util.Checks;

/**
 * The shape of one model's KV cache on one tensor-parallel rank: attention kind, layer count, KV heads,
 * head dimension and element type. Immutable; invalid combinations fail at construction with the values
 * in the message.
 *
 * @param attention MHA (K and V per head) or MLA (one latent vector per token)
 * @param layers    attention layers that keep KV, at least 1
 * @param kvHeads   KV heads held by this rank; exactly 1 for MLA
 * @param headDim   elements per head vector; for MLA, {@code kv_lora_rank + qk_rope_head_dim}
 * @param dtype     element type
 */
public record KvGeometry(AttentionKind attention, int layers, int kvHeads, int headDim, KvDtype dtype) {
    /** Upper bounds that no real model comes near; they keep size arithmetic far from overflow. */
    static final int MAX_LAYERS = 4096;

    static final int MAX_HEADS = 4096;
    static final int MAX_HEAD_DIM = 65536;

    public KvGeometry {
        Checks.checkNotNull(attention, "attention");
        Checks.checkNotNull(dtype, "dtype");
        Checks.checkInRange(layers, 1, MAX_LAYERS, "layers");
        Checks.checkInRange(kvHeads, 1, MAX_HEADS, "kvHeads");
        Checks.checkInRange(headDim, 1, MAX_HEAD_DIM, "headDim");
        Checks.requireArgument(
                attention != AttentionKind.MLA || kvHeads == 1,
                "MLA keeps one latent vector per token and layer, so kvHeads must be 1, was %d",
                kvHeads);
        long rowBits = (long) kvHeads * headDim * dtype.bits();
        Checks.requireArgument(
                rowBits % Byte.SIZE == 0,
                "a token's row (kvHeads %d x headDim %d x %d bits of %s) is %d bits, not a whole number of bytes",
                kvHeads,
                headDim,
                dtype.bits(),
                dtype,
                rowBits);
    }

    /** Multi-head (or grouped-query) attention geometry. */
    public static KvGeometry mha(int layers, int kvHeads, int headDim, KvDtype dtype) {
        return new KvGeometry(AttentionKind.MHA, layers, kvHeads, headDim, dtype);
    }

    /** Multi-head latent attention geometry: one vector of {@code kvLoraRank + qkRopeHeadDim} per token. */
    public static KvGeometry mla(int layers, int kvLoraRank, int qkRopeHeadDim, KvDtype dtype) {
        Checks.checkPositive(kvLoraRank, "kvLoraRank");
        Checks.checkNotNegative(qkRopeHeadDim, "qkRopeHeadDim");
        return new KvGeometry(AttentionKind.MLA, layers, 1, kvLoraRank + qkRopeHeadDim, dtype);
    }

    /** Bytes of one token's vector for one layer and one part (K or V): {@code kvHeads * headDim} elements. */
    public long rowBytes() {
        return (long) kvHeads * headDim * dtype.bits() / Byte.SIZE;
    }

    /** Bytes one token occupies over all layers and parts. */
    public long tokenBytes() {
        return rowBytes() * layers * attention.parts();
    }

    /**
     * The geometry one rank holds when the model's KV heads are split over {@code tpSize} ranks. MLA is
     * replicated on every rank. MHA heads are divided when they divide evenly; when there are fewer heads
     * than ranks, each head is replicated and every rank holds one.
     *
     * @throws IllegalArgumentException when the heads can be neither divided nor replicated evenly
     */
    public KvGeometry perRank(int tpSize) {
        Checks.checkPositive(tpSize, "tpSize");
        if (attention == AttentionKind.MLA || tpSize == 1) {
            return this;
        }
        if (kvHeads % tpSize == 0) {
            return new KvGeometry(attention, layers, kvHeads / tpSize, headDim, dtype);
        }
        Checks.requireArgument(
                tpSize % kvHeads == 0,
                "%d KV heads cannot be split over tensor-parallel size %d: one must divide the other",
                kvHeads,
                tpSize);
        return new KvGeometry(attention, layers, 1, headDim, dtype);
    }

    @Override
    public String toString() {
        return attention + "[layers=" + layers + ", kvHeads=" + kvHeads + ", headDim=" + headDim + ", " + dtype + "]";
    }
}
