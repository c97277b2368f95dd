package io.hicache.core.memory;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * The completion side of a {@link KvCopy}: a runtime reports each layer as its bytes land, in any order, and
 * the layer futures complete strictly in layer order. Part of the device runtime SPI (implementations build their
 * {@code KvCopy} on it); engines see only {@link KvCopy}. Thread-safe.
 */
public final class LayerSignals implements KvCopy {
    private final CompletableFuture<Void>[] layers;
    private final boolean[] landed;
    private int nextToComplete;

    /** Signals for a copy of {@code layerCount} layers. */
    @SuppressWarnings({"unchecked", "rawtypes"}) // a generic array cannot be created any other way
    public LayerSignals(int layerCount) {
        Checks.checkPositive(layerCount, "layerCount");
        layers = new CompletableFuture[layerCount];
        for (int i = 0; i < layerCount; i++) {
            layers[i] = new CompletableFuture<>();
        }
        landed = new boolean[layerCount];
    }

    /** Reports that layer {@code layer}'s bytes have landed. */
    public void landed(int layer) {
        Objects.checkIndex(layer, layers.length);
        int from;
        int to;
        synchronized (this) {
            landed[layer] = true;
            from = nextToComplete;
            while (nextToComplete < layers.length && landed[nextToComplete]) {
                nextToComplete++;
            }
            to = nextToComplete;
        }
        // Complete outside the lock: dependent actions may run in this thread.
        for (int i = from; i < to; i++) {
            layers[i].complete(null);
        }
    }

    /** Reports that every layer has landed (a copy of all layers at once). */
    public void allLanded() {
        for (int i = 0; i < layers.length; i++) {
            landed(i);
        }
    }

    /** Fails every layer not yet complete with a {@link ErrorCode#COPY_FAILED} error. */
    public void fail(String what, Throwable cause) {
        HiCacheException error = new HiCacheException(ErrorCode.COPY_FAILED, what + ": " + cause, cause);
        for (CompletableFuture<Void> layer : layers) {
            layer.completeExceptionally(error);
        }
    }

    @Override
    public int layers() {
        return layers.length;
    }

    @Override
    public CompletableFuture<Void> layerDone(int layer) {
        return layers[Objects.checkIndex(layer, layers.length)];
    }

    @Override
    public CompletableFuture<Void> done() {
        return layers[layers.length - 1];
    }
}
