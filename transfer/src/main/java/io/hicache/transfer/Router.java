package io.hicache.transfer;

import io.hicache.core.Deadline;
import io.hicache.core.util.Checks;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.TransferOp;
import io.hicache.transfer.spi.TransportLink;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * Where an engine's requests go: each request of a submission is checked against the local regions and the peer's
 * descriptor, routed to the first linked transport that moves its pair of memory kinds, cut into slices of that
 * transport's size and handed to its link, all of a link's share of one submission at once. Requests that cannot
 * start fail at once with the reason; the batch's deadline (and a last resort far past it) is enforced on the engine's
 * timer.
 *
 * <p>Thread-safe (stateless but for what the engine gave it). Owned by its {@link TransferEngine}.
 */
final class Router {
    private final TransferConfig config;
    private final ScheduledExecutorService timer;
    private final Regions regions;

    Router(TransferConfig config, ScheduledExecutorService timer, Regions regions) {
        this.config = config;
        this.timer = timer;
        this.regions = regions;
    }

    /** See {@link TransferEngine#submit}. */
    TransferBatch submit(RemoteSegment segment, List<TransferRequest> requests, Deadline deadline) {
        TransferBatch batch = new TransferBatch(requests.size());
        List<TransferBatch.SliceImpl> slices = new ArrayList<>();
        for (TransferRequest req : requests) {
            TransferBatch.Request r = batch.new Request();
            batch.add(r);
            Route route = route(segment, req);
            String refusal = route.refusal();
            if (refusal != null) {
                r.refuse(refusal);
                continue;
            }
            // a route that is not refused has both
            RemoteSegment.Linked link = Checks.checkNotNull(route.link(), "an accepted route's link");
            RegionDescriptor region = Checks.checkNotNull(route.region(), "an accepted route's region");
            long slice = Math.max(1, link.transport().sliceBytes(config.sliceBytes()));
            long length = req.bytes();
            for (long off = 0; off < length; off += slice) {
                long n = Math.min(slice, length - off);
                r.slices.add(batch
                .new SliceImpl(
                        r,
                        link.link(),
                        req.op(),
                        req.local().asSlice(off, n),
                        region,
                        req.remoteOffset() + off,
                        config.sliceRetries()));
            }
            r.outstanding.set(r.slices.size());
            slices.addAll(r.slices);
        }
        if (!batch.isDone()) {
            long delay = Math.max(0, deadline.remainingNanos());
            ScheduledFuture<?> expiry = timer.schedule(batch::expire, delay, TimeUnit.NANOSECONDS);
            // the last resort, for a transport that failed to report a slice: far past every bound it has
            ScheduledFuture<?> lastResort = timer.schedule(
                    () -> batch.forceFinal("the transport never reported; gave up"),
                    delay + TimeUnit.MILLISECONDS.toNanos(3 * config.sliceTimeoutMillis() + 1_000),
                    TimeUnit.NANOSECONDS);
            // A finished batch takes its timers out of the queue: left there, each would hold the batch and all its
            // requests and slices until its deadline (30 s by default), at whatever rate batches come.
            batch.onFinal(() -> {
                expiry.cancel(false);
                lastResort.cancel(false);
            });
        }
        // each link takes its share of the submission at once (in order), so it may move many slices together
        Map<TransportLink, List<TransferBatch.SliceImpl>> byLink = new LinkedHashMap<>();
        for (TransferBatch.SliceImpl s : slices) {
            byLink.computeIfAbsent(s.link(), l -> new ArrayList<>()).add(s);
        }
        byLink.forEach(TransportLink::submitAll);
        return batch;
    }

    /** Where a request goes: the remote region and the link that moves its kinds of memory, or why it cannot start. */
    private record Route(
            @Nullable RegionDescriptor region,
            RemoteSegment.@Nullable Linked link,
            @Nullable String refusal) {
        static Route refused(String why) {
            return new Route(null, null, why);
        }
    }

    private Route route(RemoteSegment segment, TransferRequest req) {
        if (!segment.alive()) {
            return Route.refused("peer " + segment.name() + " is dead: " + segment.deathReason());
        }
        LocalRegion local = regions.around(req.local());
        if (local == null) {
            return Route.refused(
                    "local memory at 0x" + Long.toHexString(req.local().address()) + " (" + req.bytes()
                            + " bytes) is not inside a registered region");
        }
        Optional<RegionDescriptor> region = segment.remote().region(req.remoteRegion());
        if (region.isEmpty()) {
            return Route.refused("segment " + segment.name() + " publishes no region " + req.remoteRegion());
        }
        if (req.remoteOffset() > region.get().bytes() - req.bytes()) {
            return Route.refused("range [" + req.remoteOffset() + ", +" + req.bytes() + ") is outside region "
                    + req.remoteRegion() + " of " + region.get().bytes() + " bytes");
        }
        Optional<RemoteSegment.Linked> link =
                segment.linkFor(local.kind(), region.get().kind());
        if (link.isEmpty()) {
            return Route.refused("no transport linked to " + segment.name() + " moves " + kindName(local.kind())
                    + " memory " + (req.op() == TransferOp.READ ? "from " : "to ")
                    + kindName(region.get().kind())
                    + " memory (region " + req.remoteRegion() + "); linked: " + segment.transports());
        }
        return new Route(region.get(), link.get(), null);
    }

    private static String kindName(MemoryKind kind) {
        return kind.name().toLowerCase(Locale.ROOT);
    }
}
