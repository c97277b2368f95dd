package io.hicache.transfer;

import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegisteredRegion;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import io.hicache.transfer.spi.TransportProvider;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A test transport that says it moves device memory, for checking how the engine routes requests by memory kind
 * without a GPU: its "device" regions are host memory registered with {@code registerDevice}, both engines live in
 * this JVM, and a slice is a plain copy between the two addresses. It records what the engine asked of it. Its
 * provider is listed in the test resources; only engines whose transports name {@code pretend-device} create one.
 */
public final class PretendDeviceTransport implements TransportProvider {
    public static final String NAME = "pretend-device";
    /** Every slice any instance moved, in order. */
    public static final List<Long> SLICE_BYTES = new CopyOnWriteArrayList<>();
    /** How many slices each {@code submitAll} call handed a link, in order. */
    public static final List<Integer> SUBMISSIONS = new CopyOnWriteArrayList<>();
    /** Regions registered and deregistered with any instance, by name. */
    public static final List<String> REGISTERED = new CopyOnWriteArrayList<>();

    public static final List<String> DEREGISTERED = new CopyOnWriteArrayList<>();

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportContext context) {
        return new Device();
    }

    private static final class Device implements Transport {
        @Override
        public String name() {
            return NAME;
        }

        @Override
        public boolean moves(MemoryKind local, MemoryKind remote) {
            return local == MemoryKind.DEVICE && remote == MemoryKind.DEVICE;
        }

        @Override
        public long sliceBytes(long configuredSliceBytes) {
            return Long.MAX_VALUE;
        }

        @Override
        public Map<String, String> register(RegisteredRegion region) {
            REGISTERED.add(region.name());
            return Map.of("address", Long.toString(region.memory().address()));
        }

        @Override
        public void deregister(RegisteredRegion region) {
            DEREGISTERED.add(region.name());
        }

        @Override
        public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
            return local.pid() == remote.pid();
        }

        @Override
        public TransportLink link(PeerContext peer) {
            return new TransportLink() {
                @Override
                public void submitAll(List<? extends Slice> slices) {
                    SUBMISSIONS.add(slices.size());
                    slices.forEach(this::submit);
                }

                @Override
                @SuppressWarnings("restricted") // the peer's "device" region is host memory of this JVM
                public void submit(Slice slice) {
                    long base = Long.parseLong(slice.region().keysOf(NAME).get("address"));
                    MemorySegment remote = MemorySegment.ofAddress(base + slice.remoteOffset())
                            .reinterpret(slice.local().byteSize());
                    if (slice.op() == TransferOp.READ) {
                        MemorySegment.copy(remote, 0, slice.local(), 0, remote.byteSize());
                    } else {
                        MemorySegment.copy(slice.local(), 0, remote, 0, remote.byteSize());
                    }
                    SLICE_BYTES.add(slice.local().byteSize());
                    slice.done(null);
                }

                @Override
                public void abandon(Slice slice) {}

                @Override
                public void close() {}
            };
        }

        @Override
        public void close() {}
    }
}
