package io.hicache.transfer.pd;

import io.hicache.core.memory.KvPool;
import io.hicache.core.page.AttentionKind;
import io.hicache.core.util.Checks;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.staged.StagingArea;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * One decode rank: for each request it looks up the prefill instance at the request's bootstrap server, checks that
 * page size and KV dtype match, chooses how the pages come ({@link DeliveryPath}: the first this rank offers that
 * reaches every prefill rank of the room), sends the destination (pages it pre-allocated, an aux slot, the prefix it
 * already holds) to the prefill ranks that hold its heads, and follows their status messages through
 * {@link KvReceiver}s. It heartbeats every prefill bootstrap server it knows; a prefill that misses too many, or whose
 * engine is found dead, fails every room bound to it.
 *
 * <p>Thread-safe. Protocol state changes run on one named thread ({@code pd-decode-<rank>}), which also runs the
 * timeouts; the heartbeats run on their own thread, each bounded by the lookup timeout. The starter closes it.
 */
public final class DecodeRank implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(DecodeRank.class.getName());

    private final TransferEngine engine;
    private final RankSpec spec;
    /** The paths this rank offers, in order of preference: a room takes the first that reaches its prefill ranks. */
    private final List<DeliveryPath> paths;
    /** A staged rank's pool registered as device memory by this rank, or null: closed with the rank. */
    private final @Nullable LocalRegion deviceKv;

    private final PdConfig config;
    private final PdThread worker;
    private final PrefillInstances prefills;
    private final Map<Long, DecodeRoom> rooms = new ConcurrentHashMap<>();
    /** Rooms whose abort was not acknowledged in time while their path held memory: it waits for a late ack. */
    private final Map<Long, DecodeRoom> quarantined = new HashMap<>();

    private DecodeRank(
            TransferEngine engine,
            RankSpec spec,
            List<DeliveryPath> paths,
            @Nullable LocalRegion deviceKv,
            PdConfig config) {
        this.engine = engine;
        this.spec = spec;
        this.paths = paths;
        this.deviceKv = deviceKv;
        this.config = config;
        this.worker = new PdThread(
                "pd-decode-" + spec.tpRank() + "-" + engine.config().name());
        this.prefills = new PrefillInstances(
                engine,
                config,
                worker,
                "pd-decode-heartbeat-" + spec.tpRank() + "-" + engine.config().name());
        worker.every(
                Math.max(
                        10,
                        Math.min(1_000, Math.min(config.waitingTimeoutMillis(), config.abortAckTimeoutMillis()) / 4)),
                this::sweepSafely);
        engine.onMessage((from, payload) -> worker.post(() -> handleSafely(payload)));
    }

    /**
     * Starts the rank. {@code kv} is its KV pool memory registered as {@link RankSpec#KV_REGION}, {@code aux} its aux
     * slots registered as {@link RankSpec#AUX_REGION}; prefill ranks write into both.
     */
    public static DecodeRank start(
            TransferEngine engine, RankSpec spec, LocalRegion kv, LocalRegion aux, PdConfig config) {
        RankSpec.checkRegion(kv, RankSpec.KV_REGION, spec.kvBytes());
        RankSpec.checkRegion(aux, RankSpec.AUX_REGION, spec.auxBytes());
        if (spec.staged()) {
            throw new IllegalArgumentException("a staged spec goes with startStaged");
        }
        return new DecodeRank(engine, spec, List.of(new DirectPath(kv)), null, config);
    }

    /**
     * Starts a rank whose pool no transport reaches (a CUDA pool): prefill ranks write each layer of a room's pages
     * into slots of {@code staging} (the engine's region {@link RankSpec#STAGING_REGION}, as many slots as
     * {@code spec.stagingSlots()}), which the rank takes when it sends the destination and gives back when the room
     * succeeded or its abort was acknowledged; each layer is scattered into the room's pages as it arrives, and the
     * room reaches SUCCESS once every scatter is done. A room whose abort no prefill rank acknowledged in time keeps its
     * slots, quarantined like its pages, until a late acknowledgement or the prefill's death.
     *
     * <p>When one of the engine's transports moves device memory ({@code cuda-ipc}), the rank also registers the pool
     * as the device region {@link RankSpec#KV_REGION} ({@link RankSpec#deviceKv()} in its {@link #spec()}): a room
     * whose prefill ranks registered theirs too, and which that transport links to this engine, takes no staging slots,
     * and the prefill writes its pages device to device; the others stage. The rank closes that region. The pool,
     * staging area and engine stay the caller's: close the rank, then the pool (its close waits for its copies), then
     * the staging area.
     *
     * @throws IllegalArgumentException when the pool or staging area is not what {@code spec} says
     */
    public static DecodeRank startStaged(
            TransferEngine engine, RankSpec spec, KvPool pool, StagingArea staging, LocalRegion aux, PdConfig config) {
        StagedPool staged = StagedPool.of(pool, staging, spec);
        RankSpec.checkRegion(aux, RankSpec.AUX_REGION, spec.auxBytes());
        LocalRegion deviceKv = staged.exportDevice(engine, spec);
        return new DecodeRank(
                engine, spec.withDeviceKv(deviceKv != null), staged.paths(engine, deviceKv), deviceKv, config);
    }

    /**
     * Waits until the prefill instance behind {@code bootstrapUrl} answers with every rank registered, or
     * {@code timeout}: for a decode started together with its prefill (a receiver made before would fail its room at
     * once). True if it did.
     */
    public static boolean awaitPrefill(String bootstrapUrl, Duration timeout) throws InterruptedException {
        return new BootstrapClient(Duration.ofSeconds(2)).awaitRanks(bootstrapUrl, timeout);
    }

    /** This rank's spec. */
    public RankSpec spec() {
        return spec;
    }

    /** Rooms the rank still tracks. */
    public int activeRooms() {
        return rooms.size();
    }

    /**
     * Starts receiving {@code room} from the prefill instance whose bootstrap server is {@code bootstrapUrl}: looks
     * it up and opens its ranks (bootstrapping); {@link KvReceiver#init} then sends the destination.
     */
    public KvReceiver receiver(long room, String bootstrapUrl) {
        DecodeRoom r = new DecodeRoom(room, bootstrapUrl);
        if (rooms.putIfAbsent(room, r) != null) {
            throw new IllegalStateException("room " + room + " is already being received");
        }
        worker.post(() -> resolve(r));
        return new KvReceiver(this, r);
    }

    // ---- called by KvReceiver, from any thread

    void init(DecodeRoom room, PdMessage.Destination destination) {
        worker.post(() -> {
            room.destination = destination;
            maybeSendInfo(room);
        });
    }

    CompletableFuture<Boolean> abort(DecodeRoom room) {
        worker.post(() -> {
            boolean succeeded = room.state == KvPoll.SUCCESS;
            fail(room, "aborted");
            if (room.infoSent && !succeeded) {
                room.abortStartedNanos = System.nanoTime();
                byte[] abort = new PdMessage.Abort(room.id, engine.address()).encode();
                for (int r : room.resolvedTargets()) {
                    room.segment(r).send(abort);
                }
                maybeRelease(room);
            } else {
                room.released.complete(true); // nothing was asked of prefill, so nothing can be written
            }
        });
        return room.released;
    }

    void forget(DecodeRoom room) {
        worker.post(() -> {
            if (!room.infoSent) {
                giveBack(room);
            }
            if (room.released.isDone() || !room.infoSent || room.state == KvPoll.SUCCESS) {
                rooms.remove(room.id, room);
            } else {
                room.forgetWhenReleased = true;
            }
        });
    }

    // ---- called by the delivery paths, on the worker thread (post: from any thread)

    Collection<DecodeRoom> rooms() {
        return rooms.values();
    }

    void post(Runnable task) {
        worker.post(task);
    }

    /** Sends the room's destination to its prefill ranks once it is resolved, initialised and its path reserved. */
    void maybeSendInfo(DecodeRoom room) {
        if (room.path == null || room.destination == null || room.infoSent || room.state == KvPoll.FAILED) {
            return;
        }
        if (!room.path.reserve(this, room)) {
            return;
        }
        boolean mla = spec.model().attention() == AttentionKind.MLA;
        int[] targets = room.resolvedTargets();
        for (int i = 0; i < targets.length; i++) {
            boolean dummy = mla && i > 0; // MLA latents are whole on every rank: one prefill rank sends
            room.segment(targets[i])
                    .send(new PdMessage.Info(
                                    room.id, spec, room.destination, dummy, room.path.kind(), room.path.reserved(room))
                            .encode());
        }
        room.infoSent = true;
        room.infoSentNanos = System.nanoTime();
        room.advance(KvPoll.WAITING_FOR_INPUT);
    }

    /** SUCCESS once every prefill rank said so and the path settled (every staged layer that arrived is in place). */
    void maybeSucceed(DecodeRoom room) {
        // prefill ranks report SUCCESS, and staged layers land, only after INFO
        if (room.succeeded.size() == room.resolvedTargets().length
                && room.chosenPath().settled(room)
                && room.state != KvPoll.FAILED) {
            giveBack(room); // before SUCCESS: whoever sees SUCCESS sees the path's memory back
            room.advance(KvPoll.SUCCESS);
        }
    }

    /**
     * Releases an aborted room's pages once every prefill rank acknowledged (no write in flight), or once a dead
     * prefill's connections to this engine are all closed (no write can land any more), and the path settled.
     */
    void maybeRelease(DecodeRoom room) {
        // an abort starts only after INFO
        if (room.released.isDone()
                || room.abortStartedNanos == 0
                || !room.chosenPath().settled(room)) {
            return;
        }
        if (nothingCanLand(room)) {
            giveBack(room);
            room.released.complete(true);
            if (room.forgetWhenReleased) {
                rooms.remove(room.id, room);
            }
        } else if (System.nanoTime() - room.abortStartedNanos
                > TimeUnit.MILLISECONDS.toNanos(config.abortAckTimeoutMillis())) {
            LOG.log(
                    Level.WARNING,
                    () -> "room " + room.id + ": no abort acknowledgement within " + config.abortAckTimeoutMillis()
                            + " ms; its pages stay quarantined");
            room.released.complete(false);
            if (room.chosenPath().holds(room)) {
                quarantined.put(room.id, room); // given back on a late acknowledgement or the prefill's death
            }
            if (room.forgetWhenReleased) {
                rooms.remove(room.id, room);
            }
        }
    }

    void fail(DecodeRoom room, String reason) {
        if (room.state != KvPoll.SUCCESS) {
            room.failWith(reason);
        }
    }

    // ---- protocol, on the worker thread

    private void resolve(DecodeRoom room) {
        try {
            PrefillInstances.Instance p = prefills.lookup(room.bootstrapUrl);
            room.prefill = p;
            room.targets = KvPlan.prefillRanksFor(spec, p.specs().size());
            List<RankSpec> targetSpecs = new ArrayList<>();
            List<RemoteSegment> segments = new ArrayList<>();
            for (int r : room.targets) {
                segments.add(p.segment(r));
                targetSpecs.add(p.specs().get(r));
            }
            // the last path a rank offers (direct, or staged) reaches any prefill rank the handshake accepts
            DeliveryPath path = paths.stream()
                    .filter(d -> d.reaches(targetSpecs, segments))
                    .findFirst()
                    .orElse(paths.getLast());
            String refusal =
                    spec.incompatibility(p.specs().getFirst(), path.kind().splitsHeads());
            if (refusal != null) {
                fail(room, "refused at handshake: " + refusal);
                return;
            }
            room.path = path;
            maybeSendInfo(room);
        } catch (IOException | TransferException | IllegalArgumentException e) {
            fail(room, "bootstrap via " + room.bootstrapUrl + " failed: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            fail(room, "interrupted during bootstrap");
        }
    }

    private void handleSafely(byte[] payload) {
        try {
            PdMessage m = PdMessage.decode(payload);
            DecodeRoom room = rooms.get(m.room());
            DecodeRoom late = quarantined.get(m.room());
            if (late != null && m instanceof PdMessage.AbortAck ack) {
                late.acked.add(ack.rank());
                maybeFreeQuarantined(late);
            }
            if (room == null) {
                return;
            }
            switch (m) {
                case PdMessage.Status s -> {
                    switch (s.state()) {
                        case TRANSFERRING -> room.advance(KvPoll.TRANSFERRING);
                        case SUCCESS -> {
                            room.succeeded.add(s.rank());
                            maybeSucceed(room);
                        }
                        default -> fail(room, "prefill rank " + s.rank() + ": " + s.reason());
                    }
                }
                case PdMessage.AbortAck ack -> {
                    room.acked.add(ack.rank());
                    maybeRelease(room);
                }
                case PdMessage.Layer layer -> {
                    if (room.path != null) { // a layer lands only after INFO, which names the path
                        room.path.layerLanded(this, room, layer);
                    }
                }
                default -> LOG.log(Level.WARNING, () -> "decode got " + m + "; ignored");
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "decode rank " + spec.tpRank() + " could not handle a message", e);
        }
    }

    /** Every prefill rank of the room acknowledged its abort, or is dead with no connection into this engine left. */
    private boolean nothingCanLand(DecodeRoom room) {
        for (int r : room.resolvedTargets()) { // asked of aborted rooms, whose INFO went out
            if (room.acked.contains(r)) {
                continue;
            }
            RemoteSegment s = room.segment(r);
            if (s.alive() || engine.inboundConnections(s.name()) > 0) {
                return false;
            }
        }
        return true;
    }

    /** Gives back what the path held for a room quarantined after its abort timed out, once nothing can land there. */
    private void maybeFreeQuarantined(DecodeRoom room) {
        if (nothingCanLand(room)) {
            quarantined.remove(room.id, room);
            giveBack(room);
        }
    }

    /** Gives back what the room's path reserved for it, if a path was chosen. */
    private void giveBack(DecodeRoom room) {
        if (room.path != null) {
            room.path.giveBack(this, room);
        }
    }

    private void sweepSafely() {
        try {
            long now = System.nanoTime();
            for (DecodeRoom r : rooms.values()) {
                if (r.infoSent
                        && !r.state.isFinal()
                        && now - r.infoSentNanos > TimeUnit.MILLISECONDS.toNanos(config.waitingTimeoutMillis())) {
                    fail(r, "prefill did not finish within " + config.waitingTimeoutMillis() + " ms");
                }
                if (!r.infoSent
                        && !r.state.isFinal()
                        && now - r.createdNanos > TimeUnit.MILLISECONDS.toNanos(config.bootstrapTimeoutMillis())) {
                    String awaited = r.path == null ? null : r.path.awaited(r);
                    fail(
                            r,
                            (awaited != null ? awaited : "not initialised") + " within "
                                    + config.bootstrapTimeoutMillis() + " ms");
                }
                PrefillInstances.Instance prefill = r.prefill;
                if (prefill != null && !r.state.isFinal() && prefill.dead) {
                    // set with dead, by the same task on this thread
                    fail(r, Checks.checkNotNull(prefill.deathReason, "a dead prefill's reason"));
                }
                if (prefill != null && r.targets != null && !r.state.isFinal()) { // the prefill is set first
                    for (int t : r.targets) {
                        RemoteSegment s = prefill.opened(t);
                        if (s != null && !s.alive()) {
                            fail(r, "prefill rank " + t + " died: " + s.deathReason());
                        }
                    }
                }
                maybeRelease(r);
            }
            for (DecodeRoom q : List.copyOf(quarantined.values())) {
                maybeFreeQuarantined(q);
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "decode sweep failed; it runs again", e);
        }
    }

    /** Stops the rank's threads, closes its links to prefills and unregisters the pool's device region, if any. */
    @Override
    public void close() {
        worker.close();
        prefills.close();
        if (deviceKv != null) {
            deviceKv.close();
        }
    }
}
