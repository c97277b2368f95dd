package io.hicache.transfer.pd;

import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.spi.MemoryKind;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Device pools registered as device memory on both sides ({@link RankSpec#deviceKv()}) and linked by a transport that
 * moves device memory (cuda-ipc): the writes of {@link DirectPath}, device to device, with no staging. A decode takes
 * it for a room when every prefill rank of the room offers it; a prefill refuses a room it cannot serve so.
 *
 * @param pool the rank's pool registered as the device region {@link RankSpec#KV_REGION} (owned by the rank)
 */
record DevicePath(LocalRegion pool) implements DeliveryPath {
    @Override
    public Kind kind() {
        return Kind.DEVICE;
    }

    @Override
    public boolean reaches(List<RankSpec> prefills, List<RemoteSegment> segments) {
        return prefills.stream().allMatch(RankSpec::deviceKv)
                && segments.stream().allMatch(DevicePath::linked);
    }

    @Override
    public @Nullable String refusal(Recipient recipient) {
        if (linked(recipient.segment())) {
            return null;
        }
        return "the decode at " + recipient.spec().engineAddress() + " asked for device-to-device writes, but no "
                + "transport that moves device memory links this engine to it (linked: "
                + recipient.segment().transports() + ")";
    }

    @Override
    public void send(PrefillRank rank, PrefillRoom room, Recipient recipient, int[] src, int position) {
        rank.writePages(room, recipient, pool, src, position);
    }

    private static boolean linked(RemoteSegment segment) {
        return segment.transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE).isPresent();
    }
}
