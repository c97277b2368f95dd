package io.hicache.transfer.pd;

import io.hicache.core.page.AttentionKind;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.spi.MemoryKind;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One decode rank: for each request it looks up the prefill instance at the request's bootstrap server, checks that
 * page size and KV dtype match, sends the destination (pages it pre-allocated, an aux slot, the prefix it already
 * holds) to the prefill ranks that hold its heads, and follows their status messages through {@link KvReceiver}s.
 * It heartbeats every prefill bootstrap server it knows; a prefill that misses too many, or whose engine is found
 * dead, fails every room bound to it.
 *
 * <p>Thread-safe. Protocol state changes run on one named thread ({@code pd-decode-<rank>}), which also runs the
 * timeouts and heartbeats (the HTTP checks themselves run on their own thread, each bounded by the lookup timeout).
 * The starter closes it.
 */
public final class DecodeRank implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(DecodeRank.class.getName());

    private final TransferEngine engine;
    private final RankSpec spec;
    /** A staged rank's pool and staging area, or null when prefill ranks write into the pool's own region. */
    private final StagedPool staged;
    /** A staged rank's pool registered as device memory (prefill ranks linked by a device transport write there). */
    private final LocalRegion deviceKv;
    private final PdConfig config;
    private final PdThread worker;
    private final PdThread checks;
    private final BootstrapClient bootstrap;
    private final Map<Long, Room> rooms = new ConcurrentHashMap<>();
    private final Map<String, Prefill> prefills = new HashMap<>();
    /** Staged rooms whose abort was not acknowledged in time: their staging slots wait for a late ack. Worker only. */
    private final Map<Long, Room> quarantinedStaging = new HashMap<>();

    private DecodeRank(TransferEngine engine, RankSpec spec, StagedPool staged, LocalRegion deviceKv, PdConfig config) {
        this.engine = engine;
        this.spec = spec;
        this.staged = staged;
        this.deviceKv = deviceKv;
        this.config = config;
        this.bootstrap = new BootstrapClient(Duration.ofMillis(config.lookupTimeoutMillis()));
        this.worker = new PdThread("pd-decode-" + spec.tpRank() + "-" + engine.config().name());
        this.checks = new PdThread("pd-decode-heartbeat-" + spec.tpRank() + "-" + engine.config().name());
        worker.every(Math.max(10, Math.min(1_000, Math.min(config.waitingTimeoutMillis(),
                config.abortAckTimeoutMillis()) / 4)), this::sweepSafely);
        checks.every(config.heartbeatMillis(), this::heartbeat);
        engine.onMessage((from, payload) -> worker.post(() -> handleSafely(payload)));
    }

    /**
     * Starts the rank. {@code kv} is its KV pool memory registered as {@link RankSpec#KV_REGION}, {@code aux} its aux
     * slots registered as {@link RankSpec#AUX_REGION}; prefill ranks write into both.
     */
    public static DecodeRank start(TransferEngine engine, RankSpec spec, LocalRegion kv, LocalRegion aux,
            PdConfig config) {
        PrefillRank.check(kv, RankSpec.KV_REGION, spec.kvBytes());
        PrefillRank.check(aux, RankSpec.AUX_REGION, spec.auxBytes());
        if (spec.staged()) {
            throw new IllegalArgumentException("a staged spec goes with startStaged");
        }
        return new DecodeRank(engine, spec, null, null, config);
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
    public static DecodeRank startStaged(TransferEngine engine, RankSpec spec, io.hicache.core.memory.KvPool pool,
            io.hicache.transfer.staged.StagingArea staging, LocalRegion aux, PdConfig config) {
        StagedPool staged = StagedPool.of(pool, staging, spec);
        PrefillRank.check(aux, RankSpec.AUX_REGION, spec.auxBytes());
        LocalRegion deviceKv = staged.exportDevice(engine, spec);
        return new DecodeRank(engine, spec.withDeviceKv(deviceKv != null), staged, deviceKv, config);
    }

    /**
     * Waits until the prefill instance behind {@code bootstrapUrl} answers with every rank registered, or
     * {@code timeout}: for a decode started together with its prefill (a receiver made before would fail its room at
     * once). True if it did.
     */
    public static boolean awaitPrefill(String bootstrapUrl, Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        BootstrapClient client = new BootstrapClient(Duration.ofSeconds(2));
        while (System.nanoTime() < end) {
            try {
                if (!client.ranks(bootstrapUrl).isEmpty()) {
                    return true;
                }
            } catch (java.io.IOException | RuntimeException e) {
                // not up yet, or not every rank registered (503)
            }
            Thread.sleep(50);
        }
        return false;
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
        Room r = new Room(room, bootstrapUrl);
        if (rooms.putIfAbsent(room, r) != null) {
            throw new IllegalStateException("room " + room + " is already being received");
        }
        worker.post(() -> resolve(r));
        return new KvReceiver(this, r);
    }

    // ---- called by KvReceiver

    void init(Room room, int[] pages, int auxSlot, int prefixPages) {
        worker.post(() -> {
            room.init = new int[][] {pages, {auxSlot, prefixPages}};
            maybeSendInfo(room);
        });
    }

    CompletableFuture<Boolean> abort(Room room) {
        worker.post(() -> {
            boolean succeeded = room.state == KvPoll.SUCCESS;
            fail(room, "aborted");
            if (room.infoSent && !succeeded) {
                room.abortStartedNanos = System.nanoTime();
                for (int r : room.targets) {
                    room.prefill.segments.get(r).send(PdMessage.of("ABORT", "room", Long.toString(room.id), "from",
                            engine.address()).encode());
                }
                maybeRelease(room);
            } else {
                room.released.complete(true); // nothing was asked of prefill, so nothing can be written
            }
        });
        return room.released;
    }

    void forget(Room room) {
        worker.post(() -> {
            if (!room.infoSent) {
                freeStaging(room);
            }
            if (room.released.isDone() || !room.infoSent || room.state == KvPoll.SUCCESS) {
                rooms.remove(room.id, room);
            } else {
                room.forgetWhenReleased = true;
            }
        });
    }

    // ---- protocol, on the worker thread

    private void resolve(Room room) {
        try {
            Prefill p = prefill(room.bootstrapUrl);
            room.prefill = p;
            room.targets = KvPlan.prefillRanksFor(spec, p.specs.size());
            boolean device = deviceKv != null;
            for (int r : room.targets) {
                RemoteSegment s = p.segment(r);
                device &= p.specs.get(r).deviceKv() && s.transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE).isPresent();
            }
            String refusal = spec.incompatibility(p.specs.get(0), device);
            if (refusal != null) {
                fail(room, "refused at handshake: " + refusal);
                return;
            }
            room.device = device;
            room.resolved = true;
            maybeSendInfo(room);
        } catch (IOException | TransferException | IllegalArgumentException e) {
            fail(room, "bootstrap via " + room.bootstrapUrl + " failed: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            fail(room, "interrupted during bootstrap");
        }
    }

    private Prefill prefill(String url) throws IOException, InterruptedException {
        Prefill p = prefills.get(url);
        if (p != null && !p.dead) {
            return p;
        }
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.bootstrapTimeoutMillis());
        List<RankSpec> specs = bootstrap.ranks(url);
        while (specs.isEmpty()) {
            if (System.nanoTime() - until > 0) {
                throw new IOException("not all prefill ranks registered within " + config.bootstrapTimeoutMillis()
                        + " ms");
            }
            Thread.sleep(50);
            specs = bootstrap.ranks(url);
        }
        p = new Prefill(url, specs);
        prefills.put(url, p);
        return p;
    }

    private void maybeSendInfo(Room room) {
        if (!room.resolved || room.init == null || room.infoSent || room.state == KvPoll.FAILED) {
            return;
        }
        if (staged != null && !room.device) {
            int wanted = room.init[0].length - room.init[1][1];
            if (wanted > staged.staging().slab().slots()) {
                fail(room, "the room needs " + wanted + " staging slots, the staging area has "
                        + staged.staging().slab().slots());
                return;
            }
            boolean olderWaits = rooms.values().stream().anyMatch(r -> r != room && r.waitingForStaging
                    && !r.state.isFinal() && r.createdNanos < room.createdNanos);
            room.stagingSlots = olderWaits ? null : staged.takeSlots(wanted); // first come, first served
            if (room.stagingSlots == null) {
                room.waitingForStaging = true; // rooms that give slots back try again; the bootstrap timeout bounds it
                return;
            }
            room.waitingForStaging = false;
        }
        String stagingSlots = room.stagingSlots == null ? "" : PdMessage.ints(room.stagingSlots);
        boolean mla = spec.model().attention() == AttentionKind.MLA;
        for (int i = 0; i < room.targets.length; i++) {
            boolean dummy = mla && i > 0; // MLA latents are whole on every rank: one prefill rank sends
            RemoteSegment s = room.prefill.segments.get(room.targets[i]);
            s.send(PdMessage.of("INFO", "room", Long.toString(room.id), "spec", spec.encode(), "pages",
                    PdMessage.ints(room.init[0]), "aux", Integer.toString(room.init[1][0]), "prefix",
                    Integer.toString(room.init[1][1]), "dummy", Boolean.toString(dummy), "path", room.path(staged != null),
                    "staging", stagingSlots).encode());
        }
        room.infoSent = true;
        room.infoSentNanos = System.nanoTime();
        room.advance(KvPoll.WAITING_FOR_INPUT);
    }

    private void handleSafely(byte[] payload) {
        try {
            PdMessage m = PdMessage.decode(payload);
            Room room = rooms.get(m.room());
            Room quarantined = quarantinedStaging.get(m.room());
            if (quarantined != null && m.type().equals("ABORT_ACK")) {
                quarantined.acked.add(Integer.parseInt(m.get("rank")));
                maybeFreeQuarantined(quarantined);
            }
            if (room == null) {
                return;
            }
            int rank = Integer.parseInt(m.get("rank"));
            switch (m.type()) {
                case "STATUS" -> {
                    switch (m.get("state")) {
                        case "TRANSFERRING" -> room.advance(KvPoll.TRANSFERRING);
                        case "SUCCESS" -> {
                            room.succeeded.add(rank);
                            maybeSucceed(room);
                        }
                        default -> fail(room, "prefill rank " + rank + ": " + m.get("reason"));
                    }
                }
                case "ABORT_ACK" -> {
                    room.acked.add(rank);
                    maybeRelease(room);
                }
                case "LAYER" -> scatter(room, m);
                default -> LOG.log(Level.WARNING, () -> "decode got a " + m.type() + " message; ignored");
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "decode rank " + spec.tpRank() + " could not handle a message", e);
        }
    }

    /** SUCCESS once every prefill rank said so and (staged) every layer that arrived is on the device. */
    private void maybeSucceed(Room room) {
        if (room.succeeded.size() == room.targets.length && room.scatters == 0 && room.state != KvPoll.FAILED) {
            freeStaging(room); // before SUCCESS: whoever sees SUCCESS sees the slots back
            room.advance(KvPoll.SUCCESS);
        }
    }

    /** A prefill rank wrote one layer of pages {@code [from, from + count)} into this rank's staging slots. */
    private void scatter(Room room, PdMessage m) {
        if (staged == null || room.stagingSlots == null || room.state == KvPoll.FAILED) {
            return; // a failed room's pages may be reused once released: nothing more is written into them
        }
        int from = Integer.parseInt(m.get("from"));
        int count = Integer.parseInt(m.get("count"));
        int layer = Integer.parseInt(m.get("layer"));
        int prefix = room.init[1][1];
        int[] pages = room.init[0];
        if (from < prefix || count < 1 || from > pages.length - count || layer < 0
                || layer >= spec.model().layers()) {
            fail(room, "a prefill rank reported layer " + layer + " of pages [" + from + ", " + (from + count)
                    + "), outside the " + (pages.length - prefix) + " pages it was asked for");
            return;
        }
        int[] slots = java.util.Arrays.copyOfRange(room.stagingSlots, from - prefix, from - prefix + count);
        int[] targets = java.util.Arrays.copyOfRange(pages, from, from + count);
        room.scatters++;
        try {
            staged.pool().loadLayers(staged.staging().slab(), slots, targets, layer, 1).done().whenComplete(
                    (ok, e) -> worker.post(() -> scattered(room, layer, e)));
        } catch (RuntimeException e) {
            scattered(room, layer, e);
        }
    }

    private void scattered(Room room, int layer, Throwable failure) {
        room.scatters--;
        if (failure != null) {
            fail(room, "scattering layer " + layer + " failed: " + failure.getMessage());
        }
        maybeSucceed(room);
        maybeRelease(room);
    }

    /**
     * Gives a room's staging slots back (it succeeded, or nothing can be written into them any more), and sends the
     * destination of rooms that waited for slots, oldest first.
     */
    private void freeStaging(Room room) {
        if (room.stagingSlots == null) {
            return;
        }
        staged.staging().slots().free(room.stagingSlots);
        room.stagingSlots = null;
        List<Room> waiting = rooms.values().stream().filter(r -> r.waitingForStaging && !r.state.isFinal())
                .sorted(java.util.Comparator.comparingLong(r -> r.createdNanos)).toList();
        for (Room r : waiting) {
            maybeSendInfo(r);
            if (r.waitingForStaging) {
                return;
            }
        }
    }

    /**
     * Releases an aborted room's pages once every prefill rank acknowledged (no write in flight), or once a dead
     * prefill's connections to this engine are all closed (no write can land any more).
     */
    private void maybeRelease(Room room) {
        if (room.released.isDone() || room.abortStartedNanos == 0 || room.scatters > 0) {
            return;
        }
        if (nothingCanLand(room)) {
            freeStaging(room);
            room.released.complete(true);
            if (room.forgetWhenReleased) {
                rooms.remove(room.id, room);
            }
        } else if (System.nanoTime() - room.abortStartedNanos > TimeUnit.MILLISECONDS.toNanos(
                config.abortAckTimeoutMillis())) {
            LOG.log(Level.WARNING, () -> "room " + room.id + ": no abort acknowledgement within "
                    + config.abortAckTimeoutMillis() + " ms; its pages stay quarantined");
            room.released.complete(false);
            if (room.stagingSlots != null) {
                quarantinedStaging.put(room.id, room); // freed on a late acknowledgement or the prefill's death
            }
            if (room.forgetWhenReleased) {
                rooms.remove(room.id, room);
            }
        }
    }

    /** Every prefill rank of the room acknowledged its abort, or is dead with no connection into this engine left. */
    private boolean nothingCanLand(Room room) {
        for (int r : room.targets) {
            if (room.acked.contains(r)) {
                continue;
            }
            RemoteSegment s = room.prefill.segments.get(r);
            if (s.alive() || engine.inboundConnections(s.name()) > 0) {
                return false;
            }
        }
        return true;
    }

    /** Gives back the staging slots of a room quarantined after its abort timed out, once nothing can land there. */
    private void maybeFreeQuarantined(Room room) {
        if (nothingCanLand(room)) {
            quarantinedStaging.remove(room.id, room);
            freeStaging(room);
        }
    }

    private void fail(Room room, String reason) {
        if (room.state == KvPoll.FAILED || room.state == KvPoll.SUCCESS) {
            return;
        }
        room.reason = reason;
        room.state = KvPoll.FAILED;
    }

    private void sweepSafely() {
        try {
            long now = System.nanoTime();
            for (Room r : rooms.values()) {
                if (r.infoSent && !r.state.isFinal() && now - r.infoSentNanos > TimeUnit.MILLISECONDS.toNanos(
                        config.waitingTimeoutMillis())) {
                    fail(r, "prefill did not finish within " + config.waitingTimeoutMillis() + " ms");
                }
                if (!r.infoSent && !r.state.isFinal() && now - r.createdNanos > TimeUnit.MILLISECONDS.toNanos(
                        config.bootstrapTimeoutMillis())) {
                    fail(r, r.waitingForStaging ? "no " + (r.init[0].length - r.init[1][1]) + " staging slots came free"
                            + " within " + config.bootstrapTimeoutMillis() + " ms" : "not initialised within "
                            + config.bootstrapTimeoutMillis() + " ms");
                }
                if (r.prefill != null && !r.state.isFinal() && r.prefill.dead) {
                    fail(r, r.prefill.deathReason);
                }
                if (r.targets != null && !r.state.isFinal()) {
                    for (int t : r.targets) {
                        RemoteSegment s = r.prefill.segments.get(t);
                        if (s != null && !s.alive()) {
                            fail(r, "prefill rank " + t + " died: " + s.deathReason());
                        }
                    }
                }
                maybeRelease(r);
            }
            for (Room q : List.copyOf(quarantinedStaging.values())) {
                maybeFreeQuarantined(q);
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "decode sweep failed; it runs again", e);
        }
    }

    private void heartbeat() {
        List<Prefill> known;
        try {
            known = worker.executor().submit(() -> List.copyOf(prefills.values())).get(config.lookupTimeoutMillis(),
                    TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            return;
        }
        for (Prefill p : known) {
            if (p.dead) {
                continue;
            }
            boolean ok;
            try {
                ok = bootstrap.healthy(p.url);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            worker.post(() -> {
                p.failures = ok ? 0 : p.failures + 1;
                if (p.failures >= config.heartbeatMaxFailures()) {
                    p.dead = true;
                    p.deathReason = "prefill at " + p.url + " missed " + p.failures + " heartbeats";
                }
            });
        }
    }

    /** Stops the rank's threads, closes its links to prefills and unregisters the pool's device region, if any. */
    @Override
    public void close() {
        checks.close();
        worker.close();
        for (Prefill p : prefills.values()) {
            p.segments.values().forEach(RemoteSegment::close);
        }
        if (deviceKv != null) {
            deviceKv.close();
        }
    }

    /** A prefill instance found through its bootstrap server. Worker thread only. */
    private final class Prefill {
        final String url;
        final List<RankSpec> specs;
        final Map<Integer, RemoteSegment> segments = new HashMap<>();
        int failures;
        volatile boolean dead;
        volatile String deathReason;

        Prefill(String url, List<RankSpec> specs) {
            this.url = url;
            this.specs = specs;
        }

        RemoteSegment segment(int rank) {
            RemoteSegment s = segments.get(rank);
            if (s == null) {
                s = engine.openSegment(specs.get(rank).engineAddress(), Duration.ofMillis(config.lookupTimeoutMillis()));
                segments.put(rank, s);
            }
            return s;
        }
    }

    /** One request. Mutable fields belong to the worker thread; {@link #state} and {@link #reason} are read anywhere. */
    static final class Room {
        final long id;
        final String bootstrapUrl;
        final long createdNanos = System.nanoTime();
        final Set<Integer> succeeded = new HashSet<>();
        final Set<Integer> acked = new HashSet<>();
        final CompletableFuture<Boolean> released = new CompletableFuture<>();
        volatile KvPoll state = KvPoll.BOOTSTRAPPING;
        volatile String reason;
        Prefill prefill;
        int[] targets;
        int[][] init;
        boolean resolved;
        boolean infoSent;
        long infoSentNanos;
        long abortStartedNanos;
        boolean forgetWhenReleased;
        /** A staged room's staging slots, for positions [prefix, pages): held until it succeeded or was released. */
        int[] stagingSlots;
        /** A staged room's scatters in flight. */
        int scatters;
        /** A staged room whose destination waits for staging slots. */
        boolean waitingForStaging;
        /** Prefill ranks write this room's pages into the pool's device region, device to device (no staging). */
        boolean device;

        Room(long id, String bootstrapUrl) {
            this.id = id;
            this.bootstrapUrl = bootstrapUrl;
        }

        void advance(KvPoll to) {
            if (state != KvPoll.FAILED && to.compareTo(state) > 0) {
                state = to;
            }
        }

        /** How the prefill writes this room's pages, as INFO names it. */
        String path(boolean stagedRank) {
            return device ? PdMessage.PATH_DEVICE : stagedRank ? PdMessage.PATH_STAGED : PdMessage.PATH_DIRECT;
        }
    }
}
