package io.hicache.core.page;

/**
 * How a model stores attention state per token and layer.
 */
public enum AttentionKind {
    /** Multi-head (and grouped-query) attention: a K and a V vector per KV head. */
    MHA(2),
    /** Multi-head latent attention (DeepSeek): one compressed latent vector, no separate V. */
    MLA(1);

    private final int parts;

    AttentionKind(int parts) {
        this.parts = parts;
    }

    /** How many tensors a token keeps per layer: 2 (K and V) for MHA, 1 for MLA. */
    public int parts() {
        return parts;
    }
}
