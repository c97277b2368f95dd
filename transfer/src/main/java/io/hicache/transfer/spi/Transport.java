package io.hicache.transfer.spi;

import io.hicache.transfer.SegmentDescriptor;
import io.hicache.transfer.TransferException;

/**
 * A way of moving slices to and from remote segments: TCP, shared memory, and (by the same shape) RDMA, whose
 * registration keys would travel in {@link io.hicache.transfer.RegionDescriptor#keys()}.
 *
 * <p>Thread-safe. Created by its {@link TransportProvider} for one engine, closed by that engine.
 */
public interface Transport extends AutoCloseable {
    /** The name peers advertise and configurations list. */
    String name();

    /** Whether this transport can reach every region of {@code remote} from {@code local}. */
    boolean canReach(SegmentDescriptor local, SegmentDescriptor remote);

    /**
     * Opens a link to {@code peer}.
     *
     * @throws TransferException when the peer cannot be reached this way
     */
    TransportLink link(PeerContext peer);

    @Override
    void close();
}
