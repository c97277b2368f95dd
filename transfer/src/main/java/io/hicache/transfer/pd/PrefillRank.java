package io.hicache.transfer.pd;

import io.hicache.core.Deadline;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.spi.MemoryKind;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One prefill rank: registers with its instance's bootstrap server, takes each request's destination from the
 * decode ranks (INFO messages), and sends the request's KV as it is computed through {@link KvSender}s: chunk by
 * chunk, only the pages the decode does not hold, aux data last, then a SUCCESS status.
 *
 * <p>Thread-safe. All protocol state changes run on one named thread ({@code pd-prefill-<rank>}), which also runs
 * the bootstrap-timeout sweep. The starter closes it (the engine and regions stay the starter's).
 */
public final class PrefillRank implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(PrefillRank.class.getName());

    private final TransferEngine engine;
    private final RankSpec spec;
    /** The KV pool's own region, or null for a staged rank. */
    private final LocalRegion kv;
    /** A staged rank's pool and staging area, or null. */
    private final StagedPool staged;
    /** A staged rank's pool registered as device memory, or null: the source of device-to-device writes. */
    private final LocalRegion deviceKv;
    private final LocalRegion aux;
    private final PdConfig config;
    private final PdThread worker;
    private final Map<Long, Room> rooms = new ConcurrentHashMap<>();
    private final Map<String, RemoteSegment> decodes = new HashMap<>();
    private final ArrayDeque<Integer> freeAuxSlots = new ArrayDeque<>();
    /** Staged pieces waiting for staging slots, oldest first. Worker thread only. */
    private final ArrayDeque<StagePiece> waitingForStaging = new ArrayDeque<>();

    private PrefillRank(TransferEngine engine, RankSpec spec, LocalRegion kv, StagedPool staged, LocalRegion deviceKv,
            LocalRegion aux, PdConfig config) {
        this.engine = engine;
        this.spec = spec;
        this.kv = kv;
        this.staged = staged;
        this.deviceKv = deviceKv;
        this.aux = aux;
        this.config = config;
        for (int i = 0; i < spec.auxSlots(); i++) {
            freeAuxSlots.add(i);
        }
        this.worker = new PdThread("pd-prefill-" + spec.tpRank() + "-" + engine.config().name());
        worker.every(Math.max(10, Math.min(1_000, config.bootstrapTimeoutMillis() / 4)), this::sweepSafely);
        engine.onMessage((from, payload) -> worker.post(() -> handleSafely(payload)));
    }

    /**
     * Starts the rank and registers it with the bootstrap server at {@code bootstrapUrl}. {@code kv} is the rank's
     * KV pool memory registered as {@link RankSpec#KV_REGION}; {@code aux} its aux staging, registered as
     * {@link RankSpec#AUX_REGION}.
     *
     * @throws IOException when the bootstrap server does not take the registration after 5 tries
     */
    public static PrefillRank start(TransferEngine engine, RankSpec spec, LocalRegion kv, LocalRegion aux,
            String bootstrapUrl, PdConfig config) throws IOException, InterruptedException {
        check(kv, RankSpec.KV_REGION, spec.kvBytes());
        check(aux, RankSpec.AUX_REGION, spec.auxBytes());
        if (spec.staged()) {
            throw new IllegalArgumentException("a staged spec goes with startStaged");
        }
        return register(new PrefillRank(engine, spec, kv, null, null, aux, config), bootstrapUrl, config);
    }

    /**
     * Starts a rank whose pool no transport reaches (a CUDA pool) and registers it: each chunk's pages are gathered
     * layer by layer into {@code staging} (the engine's region {@link RankSpec#STAGING_REGION}, as many slots as
     * {@code spec.stagingSlots()}) and written into the decode's staging area, pipelined
     * ({@link io.hicache.transfer.staged.StagedSend}); the decode scatters each layer as it arrives. A failed room's
     * staged sends stop sending layers not yet on the wire.
     *
     * <p>When one of the engine's transports moves device memory ({@code cuda-ipc}), the rank also registers the pool
     * as the device region {@link RankSpec#KV_REGION} (its {@link #spec()} says so to the bootstrap server), and writes
     * the pages of a decode that asks for it ({@code path=device}: both pools registered, a device transport linking
     * the two engines) straight from its pool into the decode's, device to device. The rank closes that region. The
     * pool, staging area and engine stay the caller's: close the rank first, then the pool (its close waits for its
     * copies), then the staging area.
     *
     * @throws IllegalArgumentException when the pool or staging area is not what {@code spec} says
     */
    public static PrefillRank startStaged(TransferEngine engine, RankSpec spec, io.hicache.core.memory.KvPool pool,
            io.hicache.transfer.staged.StagingArea staging, LocalRegion aux, String bootstrapUrl, PdConfig config)
            throws IOException, InterruptedException {
        StagedPool staged = StagedPool.of(pool, staging, spec);
        check(aux, RankSpec.AUX_REGION, spec.auxBytes());
        LocalRegion deviceKv = staged.exportDevice(engine, spec);
        return register(new PrefillRank(engine, spec.withDeviceKv(deviceKv != null), null, staged, deviceKv, aux, config),
                bootstrapUrl, config);
    }

    private static PrefillRank register(PrefillRank rank, String bootstrapUrl, PdConfig config)
            throws IOException, InterruptedException {
        try {
            new BootstrapClient(Duration.ofMillis(config.lookupTimeoutMillis())).register(bootstrapUrl, rank.spec);
        } catch (IOException | InterruptedException | RuntimeException e) {
            rank.close();
            throw e;
        }
        return rank;
    }

    static void check(LocalRegion region, String name, long bytes) {
        if (!region.name().equals(name) || region.memory().byteSize() < bytes) {
            throw new IllegalArgumentException("expected region '" + name + "' of at least " + bytes + " bytes, got "
                    + region);
        }
    }

    /** This rank's spec. */
    public RankSpec spec() {
        return spec;
    }

    /** The sender of {@code room}, created (bootstrapping) if the rank has not seen the room yet. */
    public KvSender sender(long room) {
        Room r = rooms.computeIfAbsent(room, id -> new Room(id, System.nanoTime()));
        r.claimed = true;
        return new KvSender(this, r);
    }

    /** Whether the rank still tracks {@code room}: released rooms are dropped once no write of theirs is in flight. */
    public boolean tracks(long room) {
        return rooms.containsKey(room);
    }

    /**
     * Rooms a decode named (its destination arrived) that the engine has not asked a sender for, oldest first: for an
     * engine that learns of its requests through the decode (the synthetic engine of {@code hicache pd prefill}).
     */
    public java.util.List<Long> unclaimedRooms() {
        return rooms.values().stream().filter(r -> !r.claimed && r.state != KvPoll.FAILED && !r.destinations.isEmpty())
                .sorted(java.util.Comparator.comparingLong(r -> r.createdNanos)).map(r -> r.id).toList();
    }

    /** Rooms the rank still tracks (not yet released by their senders). */
    public int activeRooms() {
        return rooms.size();
    }

    // ---- called by KvSender, from any thread

    void send(Room room, int[] srcPages, boolean last, byte[] auxData) {
        worker.post(() -> {
            try {
                sendChunk(room, srcPages, last, auxData);
            } catch (RuntimeException e) {
                fail(room, "sending a chunk failed: " + e);
            }
        });
    }

    void release(Room room) {
        worker.post(() -> {
            room.released = true;
            forgetIfIdle(room);
        });
    }

    // ---- protocol, on the worker thread

    private void handleSafely(byte[] payload) {
        try {
            handle(PdMessage.decode(payload));
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "prefill rank " + spec.tpRank() + " could not handle a message", e);
        }
    }

    private void handle(PdMessage m) {
        if (m.type().equals("ABORT") && !rooms.containsKey(m.room())) {
            ack(m.room(), m.get("from")); // a room this rank never had, or already forgot: nothing is in flight
            return;
        }
        Room room = rooms.computeIfAbsent(m.room(), r -> new Room(r, System.nanoTime()));
        switch (m.type()) {
            case "INFO" -> info(room, m);
            case "ABORT" -> {
                fail(room, "aborted by decode");
                room.ackTo.add(m.get("from"));
                maybeAck(room);
            }
            default -> LOG.log(Level.WARNING, () -> "prefill got a " + m.type() + " message; ignored");
        }
    }

    private void info(Room room, PdMessage m) {
        RankSpec decode = RankSpec.decode(m.get("spec"));
        RemoteSegment segment;
        try {
            segment = segment(decode.engineAddress());
        } catch (TransferException e) {
            fail(room, "cannot reach decode at " + decode.engineAddress() + ": " + e.getMessage());
            return;
        }
        String staging = m.fields().get("staging");
        String path = m.fields().getOrDefault("path", spec.staged() ? PdMessage.PATH_STAGED : PdMessage.PATH_DIRECT);
        boolean device = path.equals(PdMessage.PATH_DEVICE);
        Destination d = new Destination(decode, segment, PdMessage.ints(m.get("pages")),
                Integer.parseInt(m.get("aux")), Integer.parseInt(m.get("prefix")),
                Boolean.parseBoolean(m.get("dummy")), staging == null ? new int[0] : PdMessage.ints(staging), device);
        room.destinations.add(d);
        String refusal = decode.incompatibility(spec, device);
        if (refusal != null) {
            fail(room, "refused at handshake: " + refusal);
            return;
        }
        if (device && (deviceKv == null || segment.transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE).isEmpty())) {
            fail(room, "the decode at " + decode.engineAddress() + " asked for device-to-device writes, but "
                    + (deviceKv == null ? "this rank's pool is not registered as device memory"
                            : "no transport that moves device memory links this engine to it (linked: "
                                    + segment.transports() + ")"));
            return;
        }
        if (spec.staged() && !device && !d.dummy && d.staging.length != d.pages.length - d.prefix) {
            fail(room, "the decode named " + d.staging.length + " staging slots for " + (d.pages.length - d.prefix)
                    + " pages");
            return;
        }
        room.required = KvPlan.decodeRanksPerPrefillRank(decode.tpSize(), spec.tpSize());
        if (room.destinations.size() >= room.required) {
            room.advance(KvPoll.WAITING_FOR_INPUT);
        }
    }

    private RemoteSegment segment(String address) {
        RemoteSegment s = decodes.get(address);
        if (s == null || !s.alive()) {
            if (s != null) {
                s.close();
            }
            s = engine.openSegment(address, Duration.ofMillis(config.lookupTimeoutMillis()));
            RemoteSegment opened = s;
            s.onDeath(() -> worker.post(() -> {
                for (Room r : rooms.values()) {
                    if (r.destinations.stream().anyMatch(d -> d.segment == opened)) {
                        fail(r, "decode " + address + " died: " + opened.deathReason());
                    }
                }
            }));
            decodes.put(address, s);
        }
        return s;
    }

    private void sendChunk(Room room, int[] srcPages, boolean last, byte[] auxData) {
        if (room.state == KvPoll.FAILED) {
            return;
        }
        int from = room.cursor;
        room.cursor += srcPages.length;
        if (room.state == KvPoll.WAITING_FOR_INPUT) {
            room.advance(KvPoll.TRANSFERRING);
            status(room, "TRANSFERRING", "");
        }
        for (Destination d : room.destinations) {
            if (d.dummy) {
                continue;
            }
            if (room.cursor > d.pages.length) {
                fail(room, "prefill sent " + room.cursor + " pages, decode allocated " + d.pages.length);
                return;
            }
            int skip = Math.max(0, Math.min(srcPages.length, d.prefix - from));
            int n = srcPages.length - skip;
            if (n == 0) {
                continue;
            }
            int[] src = new int[n];
            int[] dst = new int[n];
            for (int i = 0; i < n; i++) {
                src[i] = srcPages[skip + i];
                dst[i] = d.pages[from + skip + i];
            }
            if (d.device) {
                submit(room, d, KvPlan.writes(spec, deviceKv.memory(), d.spec, src, dst));
            } else if (staged != null) {
                stage(room, d, src, from + skip);
            } else {
                submit(room, d, KvPlan.writes(spec, kv.memory(), d.spec, src, dst));
            }
        }
        if (last) {
            room.lastAux = auxData == null ? new byte[0] : auxData;
            maybeFinish(room);
        }
    }

    private void submit(Room room, Destination d, List<TransferRequest> writes) {
        room.inFlight++;
        TransferBatch batch = engine.submit(d.segment, writes, Deadline.after(Duration.ofMillis(
                config.chunkDeadlineMillis())));
        batch.whenDone().whenComplete((b, e) -> worker.post(() -> writeOver(room, b.allDone() ? null
                : "transfer to decode " + d.spec.engineAddress() + " failed: " + b.firstFailure())));
    }

    /**
     * Sends pages {@code src}, positions {@code [position, position + src.length)} of the request, through both staging
     * areas; the decode hears of each layer (LAYER) as it lands in its staging slots and scatters it. A chunk larger
     * than the staging area goes in pieces; pieces wait, in the order they came, while the staging area is full.
     */
    private void stage(Room room, Destination d, int[] src, int position) {
        int most = staged.staging().slab().slots();
        for (int at = 0; at < src.length; at += most) {
            int n = Math.min(most, src.length - at);
            room.inFlight++; // a waiting piece keeps the room from finishing, as a write in flight does
            waitingForStaging.add(new StagePiece(room, d, java.util.Arrays.copyOfRange(src, at, at + n), position + at));
        }
        startWaitingPieces();
    }

    /** One piece of a chunk waiting for staging slots. */
    private record StagePiece(Room room, Destination d, int[] src, int position) {
    }

    private void startWaitingPieces() {
        while (!waitingForStaging.isEmpty()) {
            StagePiece piece = waitingForStaging.peek();
            if (piece.room.state == KvPoll.FAILED) {
                waitingForStaging.poll();
                writeOver(piece.room, null);
                continue;
            }
            int[] local = staged.takeSlots(piece.src.length);
            if (local == null) {
                return; // a staged send in flight gives slots back, and starts the rest then
            }
            waitingForStaging.poll();
            startPiece(piece, local);
        }
    }

    private void startPiece(StagePiece piece, int[] local) {
        Room room = piece.room;
        Destination d = piece.d;
        int at = piece.position - d.prefix;
        int[] peer = java.util.Arrays.copyOfRange(d.staging, at, at + piece.src.length);
        String roomId = Long.toString(room.id);
        String rankId = Integer.toString(spec.tpRank());
        String from = Integer.toString(piece.position);
        String count = Integer.toString(piece.src.length);
        io.hicache.transfer.staged.StagedSend send;
        try {
            send = io.hicache.transfer.staged.StagedSend.start(staged.pool(), piece.src, staged.staging(), local,
                    engine, d.segment, RankSpec.STAGING_REGION, d.spec.stagingSlots(), peer, Deadline.after(
                            Duration.ofMillis(config.chunkDeadlineMillis())), layer -> d.segment.send(PdMessage.of(
                                    "LAYER", "room", roomId, "rank", rankId, "from", from, "count", count, "layer",
                                    Integer.toString(layer)).encode()));
        } catch (RuntimeException e) {
            staged.staging().slots().free(local);
            writeOver(room, "staging a chunk failed: " + e);
            return;
        }
        room.stagedSends.add(send);
        send.done().whenComplete((ok, e) -> worker.post(() -> {
            room.stagedSends.remove(send);
            staged.staging().slots().free(local);
            writeOver(room, e == null ? null : "staged transfer to decode " + d.spec.engineAddress() + " failed: "
                    + e.getMessage());
            startWaitingPieces();
        }));
    }

    /**
     * One write of the room (a batch, a staged piece, or a piece that never started) is over; {@code failure} says
     * why it failed, or is null.
     */
    private void writeOver(Room room, String failure) {
        room.inFlight--;
        if (failure != null) {
            fail(room, failure);
        }
        maybeAck(room);
        maybeFinish(room);
        forgetIfIdle(room);
    }

    private void forgetIfIdle(Room room) {
        if (room.released && room.inFlight == 0) {
            freeAux(room);
            rooms.remove(room.id, room);
        }
    }

    private void maybeFinish(Room room) {
        if (room.lastAux == null || room.inFlight > 0 || room.state != KvPoll.TRANSFERRING) {
            return;
        }
        if (!room.auxSent) {
            room.auxSent = true;
            Integer slot = freeAuxSlots.poll();
            if (slot == null) {
                fail(room, "no free aux staging slot (" + spec.auxSlots() + " in use)");
                return;
            }
            long at = (long) slot * spec.auxSlotBytes();
            int len = Math.min(room.lastAux.length, spec.auxSlotBytes());
            aux.memory().asSlice(at, spec.auxSlotBytes()).fill((byte) 0);
            java.lang.foreign.MemorySegment.copy(java.lang.foreign.MemorySegment.ofArray(room.lastAux), 0,
                    aux.memory(), at, len);
            boolean any = false;
            for (Destination d : room.destinations) {
                if (!d.dummy) {
                    any = true;
                    submit(room, d, List.of(TransferRequest.write(aux.memory().asSlice(at, spec.auxSlotBytes()),
                            RankSpec.AUX_REGION, (long) d.auxSlot * d.spec.auxSlotBytes())));
                }
            }
            room.auxSlot = slot;
            if (any) {
                return; // finishes when the aux writes are done
            }
        }
        freeAux(room);
        room.advance(KvPoll.SUCCESS);
        status(room, "SUCCESS", "");
    }

    private void freeAux(Room room) {
        if (room.auxSlot >= 0) {
            freeAuxSlots.add(room.auxSlot);
            room.auxSlot = -1;
        }
    }

    private void fail(Room room, String reason) {
        if (room.state == KvPoll.FAILED) {
            return;
        }
        room.reason = reason;
        room.state = KvPoll.FAILED;
        status(room, "FAILED", reason);
        // Staged: pieces not started never will be, layers not yet on the wire stay off it (an abort's ack comes sooner)
        for (io.hicache.transfer.staged.StagedSend send : room.stagedSends) {
            send.cancel(reason);
        }
        int dropped = 0;
        for (java.util.Iterator<StagePiece> it = waitingForStaging.iterator(); it.hasNext(); ) {
            if (it.next().room == room) {
                it.remove();
                dropped++;
            }
        }
        if (dropped > 0) {
            room.inFlight -= dropped;
            forgetIfIdle(room);
        }
        if (room.inFlight == 0) {
            freeAux(room);
        }
    }

    /** Acknowledges an abort once no write of the room is in flight: the decode may then reuse its pages. */
    private void maybeAck(Room room) {
        if (room.inFlight > 0 || room.ackTo.isEmpty()) {
            return;
        }
        freeAux(room);
        for (String address : room.ackTo) {
            ack(room.id, address);
        }
        room.ackTo.clear();
    }

    private void ack(long room, String address) {
        try {
            segment(address).send(PdMessage.of("ABORT_ACK", "room", Long.toString(room), "rank",
                    Integer.toString(spec.tpRank())).encode());
        } catch (TransferException e) {
            LOG.log(Level.DEBUG, () -> "abort ack to " + address + " not sent: " + e.getMessage());
        }
    }

    private void status(Room room, String state, String reason) {
        for (Destination d : room.destinations) {
            if (d.segment.alive()) {
                d.segment.send(PdMessage.of("STATUS", "room", Long.toString(room.id), "rank",
                        Integer.toString(spec.tpRank()), "state", state, "reason", reason).encode());
            }
        }
    }

    private void sweepSafely() {
        try {
            long now = System.nanoTime();
            for (Room r : rooms.values()) {
                if (r.state == KvPoll.BOOTSTRAPPING && now - r.createdNanos > TimeUnit.MILLISECONDS.toNanos(
                        config.bootstrapTimeoutMillis())) {
                    fail(r, "no destination from decode within " + config.bootstrapTimeoutMillis() + " ms");
                }
                if (!r.claimed && now - r.createdNanos > TimeUnit.MILLISECONDS.toNanos(config.bootstrapTimeoutMillis())) {
                    // a decode named the room (or aborted it) but this rank's engine never asked to send it: nothing
                    // was written, so forget it quietly; the decode's waiting timeout answers for it
                    r.released = true;
                    forgetIfIdle(r);
                }
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "prefill sweep failed; it runs again", e);
        }
    }

    /** Stops the rank's thread, closes its links to decodes and unregisters the pool's device region, if any. */
    @Override
    public void close() {
        worker.close();
        for (RemoteSegment s : decodes.values()) {
            s.close();
        }
        if (deviceKv != null) {
            deviceKv.close();
        }
    }

    /**
     * Where one decode rank wants a room's KV: its pages, and for a staged decode the staging slots of positions
     * {@code [prefix, pages.length)}, or ({@code device}) its pool's device region. Worker thread only.
     */
    private record Destination(RankSpec spec, RemoteSegment segment, int[] pages, int auxSlot, int prefix,
            boolean dummy, int[] staging, boolean device) {
    }

    /** One request. Mutable fields belong to the worker thread; {@link #state} and {@link #reason} are read anywhere. */
    static final class Room {
        final long id;
        final long createdNanos;
        final List<Destination> destinations = new ArrayList<>();
        final List<String> ackTo = new ArrayList<>();
        volatile KvPoll state = KvPoll.BOOTSTRAPPING;
        volatile String reason;
        int required = Integer.MAX_VALUE;
        int cursor;
        int inFlight;
        byte[] lastAux;
        boolean auxSent;
        boolean released;
        /** Whether the engine asked for the room's sender; a room only a decode named is dropped after a while. */
        volatile boolean claimed;
        int auxSlot = -1;
        /** Staged sends of the room still running. Worker thread only. */
        final List<io.hicache.transfer.staged.StagedSend> stagedSends = new ArrayList<>();

        Room(long id, long createdNanos) {
            this.id = id;
            this.createdNanos = createdNanos;
        }

        void advance(KvPoll to) {
            if (state != KvPoll.FAILED && to.compareTo(state) > 0) {
                state = to;
            }
        }
    }
}
