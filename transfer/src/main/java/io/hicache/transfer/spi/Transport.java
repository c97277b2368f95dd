package io.hicache.transfer.spi;

import java.util.Map;

/**
 * A way of moving slices to and from remote segments: TCP, shared memory, and (by the same shape) RDMA. The engine
 * knows transports only through this interface; each one comes from a {@link TransportProvider} found with
 * {@link java.util.ServiceLoader}.
 *
 * <p>Lifecycle, as the engine drives it: created once per engine; {@link #register} for every region before peers can
 * see it and {@link #deregister} after it stopped serving it; {@link #link} once per opened peer; {@link #close} when
 * the engine closes. A transport that cannot do something throws {@link io.hicache.core.HiCacheException} with
 * {@link io.hicache.core.ErrorCode#TRANSFER_UNAVAILABLE}; the engine reports it to its caller.
 *
 * <p>Thread-safe. Created by its {@link TransportProvider} for one engine, closed by that engine.
 */
public interface Transport extends AutoCloseable {
    /** The name peers advertise and configurations list. */
    String name();

    /**
     * What peers need to reach this transport, published in the segment descriptor's
     * {@link SegmentDescriptor#endpoints()} under {@link #name()}: TCP's listener {@code host:port}, an RDMA
     * transport's connection-manager address. Empty when the descriptor alone is enough (shared memory).
     */
    default String endpoint() {
        return "";
    }

    /**
     * Prepares a newly registered region for peers' requests (an RDMA transport registers its memory with the NIC)
     * and returns the keys peers need for it, published in {@link RegionDescriptor#keys()} under
     * {@code <name>.<key>} and read back with {@link RegionDescriptor#keysOf}. Called before any peer can see the
     * region.
     */
    default Map<String, String> register(RegisteredRegion region) {
        return Map.of();
    }

    /**
     * Releases what {@link #register} set up for a region that is being unregistered. The region already refuses new
     * requests ({@link RegisteredRegion#acquire()} fails) and none holds it any more, or {@link #closeInbound} was
     * called; its memory is freed after this returns.
     */
    default void deregister(RegisteredRegion region) {}

    /**
     * Ends peers' requests in flight into this engine, even by closing the inbound connections that carry them; waits
     * at most {@code waitMillis}. Called when requests still hold a region the engine is unregistering after it waited
     * for them, and when the engine closes (before it unregisters its regions). A transport whose peers never move
     * bytes through this process (shared memory) has nothing to do.
     */
    default void closeInbound(long waitMillis) {}

    /**
     * Whether this transport moves bytes between local memory of kind {@code local} and a remote region of kind
     * {@code remote}. The engine picks, for each request, the first linked transport in its preference that moves its
     * pair of kinds, and registers device regions only with transports that move device memory; the host transports
     * (TCP, shared memory) never see one. Default: host to host only.
     */
    default boolean moves(MemoryKind local, MemoryKind remote) {
        return local == MemoryKind.HOST && remote == MemoryKind.HOST;
    }

    /**
     * The slice size this transport wants, given the configured one: requests larger than it are cut into slices of
     * it. A transport whose hardware moves any length in one operation, with no window to respect (a device copy),
     * returns {@link Long#MAX_VALUE} so that one request is one operation. Default: the configured size.
     */
    default long sliceBytes(long configuredSliceBytes) {
        return configuredSliceBytes;
    }

    /**
     * Whether this transport can reach every region of {@code remote} from {@code local} that it
     * {@link #moves moves}.
     */
    boolean canReach(SegmentDescriptor local, SegmentDescriptor remote);

    /**
     * Opens a link to {@code peer}.
     *
     * @throws io.hicache.core.HiCacheException when the peer cannot be reached this way
     */
    TransportLink link(PeerContext peer);

    @Override
    void close();
}
