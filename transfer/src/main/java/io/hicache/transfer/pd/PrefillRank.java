package io.hicache.transfer.pd;

import io.hicache.core.Deadline;
import io.hicache.core.memory.KvPool;
import io.hicache.core.util.Checks;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.pd.PrefillRoom.Mark;
import io.hicache.transfer.staged.StagingArea;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * One prefill rank: registers with its instance's bootstrap server, takes each request's destination from the
 * decode ranks (INFO messages), and sends the request's KV as it is computed through {@link KvSender}s: chunk by
 * chunk, only the pages the decode does not hold, by the {@link DeliveryPath} each decode rank chose, the aux data
 * beside the last chunk, then a SUCCESS status once every write is done. An abort is acknowledged once no write of
 * the room is in flight.
 *
 * <p>Thread-safe. All protocol state changes run on one named thread ({@code pd-prefill-<rank>}), which also runs
 * the bootstrap-timeout sweep. The starter closes it (the engine and regions stay the starter's).
 */
public final class PrefillRank implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(PrefillRank.class.getName());
    /** {@code -Dhicache.pd.trace=true}: each room that succeeds logs where its last chunk's time went (a diagnosis). */
    private static final boolean TRACE = Boolean.getBoolean("hicache.pd.trace");

    private final TransferEngine engine;
    private final RankSpec spec;
    /** The paths this rank offers, over its own memory. */
    private final Map<DeliveryPath.Kind, DeliveryPath> paths = new EnumMap<>(DeliveryPath.Kind.class);
    /** A staged rank's pool registered as device memory by this rank, or null: closed with the rank. */
    private final @Nullable LocalRegion deviceKv;

    private final AuxSlots aux;
    private final PdConfig config;
    private final PdThread worker;
    private final Map<Long, PrefillRoom> rooms = new ConcurrentHashMap<>();
    private final DecodeLinks decodes;

    private PrefillRank(
            TransferEngine engine,
            RankSpec spec,
            List<DeliveryPath> offered,
            @Nullable LocalRegion deviceKv,
            LocalRegion aux,
            PdConfig config) {
        this.engine = engine;
        this.spec = spec;
        offered.forEach(p -> paths.put(p.kind(), p));
        this.deviceKv = deviceKv;
        this.aux = new AuxSlots(aux, spec);
        this.config = config;
        this.worker = new PdThread(
                "pd-prefill-" + spec.tpRank() + "-" + engine.config().name());
        this.decodes = new DecodeLinks(
                engine,
                Duration.ofMillis(config.lookupTimeoutMillis()),
                (address, segment) -> worker.post(() -> rooms.values().stream()
                        .filter(r -> r.sendsTo(segment))
                        .forEach(r -> fail(r, "decode " + address + " died: " + segment.deathReason()))));
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
    public static PrefillRank start(
            TransferEngine engine, RankSpec spec, LocalRegion kv, LocalRegion aux, String bootstrapUrl, PdConfig config)
            throws IOException, InterruptedException {
        RankSpec.checkRegion(kv, RankSpec.KV_REGION, spec.kvBytes());
        RankSpec.checkRegion(aux, RankSpec.AUX_REGION, spec.auxBytes());
        if (spec.staged()) {
            throw new IllegalArgumentException("a staged spec goes with startStaged");
        }
        return register(
                new PrefillRank(engine, spec, List.of(new DirectPath(kv)), null, aux, config), bootstrapUrl, config);
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
    public static PrefillRank startStaged(
            TransferEngine engine,
            RankSpec spec,
            KvPool pool,
            StagingArea staging,
            LocalRegion aux,
            String bootstrapUrl,
            PdConfig config)
            throws IOException, InterruptedException {
        StagedPool staged = StagedPool.of(pool, staging, spec);
        RankSpec.checkRegion(aux, RankSpec.AUX_REGION, spec.auxBytes());
        LocalRegion deviceKv = staged.exportDevice(engine, spec);
        List<DeliveryPath> offered = staged.paths(engine, deviceKv);
        return register(
                new PrefillRank(engine, spec.withDeviceKv(deviceKv != null), offered, deviceKv, aux, config),
                bootstrapUrl,
                config);
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

    /** This rank's spec. */
    public RankSpec spec() {
        return spec;
    }

    /** The sender of {@code room}, created (bootstrapping) if the rank has not seen the room yet. */
    public KvSender sender(long room) {
        PrefillRoom r = rooms.computeIfAbsent(room, PrefillRoom::new);
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
    public List<Long> unclaimedRooms() {
        return rooms.values().stream()
                .filter(r -> !r.claimed && r.state != KvPoll.FAILED && !r.recipients.isEmpty())
                .sorted(Comparator.comparingLong(r -> r.createdNanos))
                .map(r -> r.id)
                .toList();
    }

    /** Rooms the rank still tracks (not yet released by their senders). */
    public int activeRooms() {
        return rooms.size();
    }

    // ---- called by KvSender, from any thread

    void send(PrefillRoom room, int[] srcPages, boolean last, byte @Nullable [] auxData) {
        long sent = System.nanoTime();
        worker.post(() -> {
            room.mark(Mark.SENT, sent);
            room.mark(Mark.TAKEN, System.nanoTime());
            try {
                sendChunk(room, srcPages, last, auxData);
            } catch (RuntimeException e) {
                fail(room, "sending a chunk failed: " + e);
            }
        });
    }

    void release(PrefillRoom room) {
        worker.post(() -> {
            room.released = true;
            forgetIfIdle(room);
        });
    }

    // ---- called by the delivery paths, on the worker thread (post: from any thread)

    Deadline chunkDeadline() {
        return Deadline.after(Duration.ofMillis(config.chunkDeadlineMillis()));
    }

    void post(Runnable task) {
        worker.post(task);
    }

    /** Writes pages {@code src} of {@code pool} into {@code to}'s positions {@code [position, ..)}, one batch. */
    void writePages(PrefillRoom room, Recipient to, LocalRegion pool, int[] src, int position) {
        List<TransferRequest> writes = KvPlan.writes(
                spec, pool.memory(), to.spec(), src, to.destination().pages(position, src.length));
        room.mark(Mark.PLANNED, System.nanoTime());
        submit(room, to, writes);
        room.mark(Mark.KV_SUBMITTED, System.nanoTime());
    }

    /**
     * One write of the room (a batch, a staged piece, or a piece that never started) is over; {@code failure} says
     * why it failed, or is null.
     */
    void writeOver(PrefillRoom room, @Nullable String failure) {
        room.inFlight--;
        if (failure != null) {
            fail(room, failure);
        }
        maybeAck(room);
        maybeFinish(room);
        forgetIfIdle(room);
        spinForDeviceWrites(room);
    }

    /** {@code count} writes of the room were dropped before they started (it failed). */
    void dropped(PrefillRoom room, int count) {
        room.inFlight -= count;
        forgetIfIdle(room);
    }

    // ---- protocol, on the worker thread

    private void handleSafely(byte[] payload) {
        try {
            switch (PdMessage.decode(payload)) {
                case PdMessage.Info info -> info(rooms.computeIfAbsent(info.room(), PrefillRoom::new), info);
                case PdMessage.Abort abort -> abort(abort);
                case PdMessage m -> LOG.log(Level.WARNING, () -> "prefill got " + m + "; ignored");
            }
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "prefill rank " + spec.tpRank() + " could not handle a message", e);
        }
    }

    private void info(PrefillRoom room, PdMessage.Info m) {
        RankSpec decode = m.decode();
        RemoteSegment segment;
        try {
            segment = decodes.get(decode.engineAddress());
        } catch (TransferException e) {
            fail(room, "cannot reach decode at " + decode.engineAddress() + ": " + e.getMessage());
            return;
        }
        Recipient recipient = new Recipient(m, segment, paths.get(m.path()));
        room.recipients.add(recipient); // before any refusal: the decode hears of it
        String refusal = recipient.refusal(spec);
        if (refusal != null) {
            fail(room, refusal);
            return;
        }
        room.required = KvPlan.decodeRanksPerPrefillRank(decode.tpSize(), spec.tpSize());
        if (room.recipients.size() >= room.required) {
            room.advance(KvPoll.WAITING_FOR_INPUT);
        }
    }

    private void abort(PdMessage.Abort m) {
        PrefillRoom room = rooms.get(m.room());
        if (room == null) {
            ack(m.room(), m.from()); // a room this rank never had, or already forgot: nothing is in flight
            return;
        }
        fail(room, "aborted by decode");
        room.ackTo.add(m.from());
        maybeAck(room);
    }

    private void sendChunk(PrefillRoom room, int[] srcPages, boolean last, byte @Nullable [] auxData) {
        if (room.state == KvPoll.FAILED) {
            return;
        }
        int from = room.cursor;
        room.cursor += srcPages.length;
        boolean first = room.state == KvPoll.WAITING_FOR_INPUT;
        if (first) {
            room.advance(KvPoll.TRANSFERRING);
        }
        for (Recipient r : room.recipients) {
            if (r.dummy()) {
                continue;
            }
            if (room.cursor > r.destination().positions()) {
                fail(
                        room,
                        "prefill sent " + room.cursor + " pages, decode allocated "
                                + r.destination().positions());
                return;
            }
            int skip = Math.max(0, Math.min(srcPages.length, r.destination().prefixPages() - from));
            if (skip < srcPages.length) {
                // a recipient without a path failed the room, which then sends nothing
                Checks.checkNotNull(r.path(), "the path of a live room's recipient")
                        .send(this, room, r, Arrays.copyOfRange(srcPages, skip, srcPages.length), from + skip);
            }
        }
        if (last) {
            room.lastAux = auxData == null ? new byte[0] : auxData;
            sendAux(room);
        }
        room.mark(Mark.AUX_SUBMITTED, System.nanoTime());
        if (first && room.state == KvPoll.TRANSFERRING) {
            status(room, KvPoll.TRANSFERRING, ""); // after the writes are on their way: it only informs
        }
        if (last) {
            maybeFinish(room);
            spinForDeviceWrites(room);
        }
    }

    /**
     * A room whose last chunk went out device to device ends within about a millisecond: rather than sleep, the thread
     * spins until the room's writes are reported, or other work is due, so that SUCCESS is not held up by the thread's
     * wake-up; again after each of its writes that ends before the last, within one deadline per room
     * ({@code workerSpinMicros} after the last chunk). Posted, so that work already queued goes first.
     */
    private void spinForDeviceWrites(PrefillRoom room) {
        long spinNanos = TimeUnit.MICROSECONDS.toNanos(config.workerSpinMicros());
        if (spinNanos == 0
                || room.inFlight == 0
                || !room.auxSent
                || room.state != KvPoll.TRANSFERRING
                || room.recipients.stream()
                        .map(Recipient::path)
                        .noneMatch(p -> p != null && p.kind() == DeliveryPath.Kind.DEVICE)) {
            return;
        }
        if (room.spinUntilNanos == 0) {
            room.spinUntilNanos = System.nanoTime() + spinNanos;
        }
        worker.post(() -> {
            while (room.inFlight > 0 && !worker.hasDueTask() && System.nanoTime() - room.spinUntilNanos < 0) {
                Thread.onSpinWait();
            }
        });
    }

    private void submit(PrefillRoom room, Recipient to, List<TransferRequest> writes) {
        room.inFlight++;
        TransferBatch batch = engine.submit(to.segment(), writes, chunkDeadline());
        batch.whenDone().whenComplete((b, e) -> {
            long done = System.nanoTime();
            worker.post(() -> {
                room.mark(Mark.WRITES_DONE, Math.max(room.at(Mark.WRITES_DONE), done));
                room.mark(Mark.SEEN, System.nanoTime());
                writeOver(
                        room,
                        b.allDone()
                                ? null
                                : "transfer to decode " + to.spec().engineAddress() + " failed: " + b.firstFailure());
            });
        });
    }

    private void forgetIfIdle(PrefillRoom room) {
        if (room.released && room.inFlight == 0) {
            freeAux(room);
            rooms.remove(room.id, room);
        }
    }

    /**
     * The aux data, into each decode's aux slot, beside the last chunk's pages rather than after them: a decode reads
     * its slot only once the room's SUCCESS came, which waits for every write of the room.
     */
    private void sendAux(PrefillRoom room) {
        if (room.state != KvPoll.TRANSFERRING || room.auxSent) {
            return;
        }
        room.auxSent = true;
        AuxSlots.Slot slot = aux.stage(Checks.checkNotNull(room.lastAux, "the aux data of the last chunk"));
        if (slot == null) {
            fail(room, "no free aux staging slot (" + spec.auxSlots() + " in use)");
            return;
        }
        room.auxSlot = slot.index();
        for (Recipient r : room.recipients) {
            if (!r.dummy()) {
                submit(
                        room,
                        r,
                        List.of(TransferRequest.write(
                                slot.memory(),
                                RankSpec.AUX_REGION,
                                (long) r.destination().auxSlot() * r.spec().auxSlotBytes())));
            }
        }
    }

    /** Once the last chunk's pages and the aux data are all written: SUCCESS. */
    private void maybeFinish(PrefillRoom room) {
        if (!room.auxSent || room.inFlight > 0 || room.state != KvPoll.TRANSFERRING) {
            return;
        }
        freeAux(room);
        room.advance(KvPoll.SUCCESS);
        status(room, KvPoll.SUCCESS, "");
        if (TRACE) {
            trace(room);
        }
    }

    private static void trace(PrefillRoom room) {
        long end = System.nanoTime();
        boolean device = room.at(Mark.KV_SUBMITTED) >= room.at(Mark.TAKEN); // else the chunk went another way
        LOG.log(
                Level.INFO,
                "pd trace room {0}: to the worker {1} us, KV plan {2} us, KV submit {3} us, aux {4} us, writes {5} us,"
                        + " back to the worker {6} us, SUCCESS {7} us; {8} us in all",
                room.id,
                us(room, Mark.SENT, Mark.TAKEN),
                device ? us(room, Mark.TAKEN, Mark.PLANNED) : "-",
                device ? us(room, Mark.PLANNED, Mark.KV_SUBMITTED) : "-",
                us(room, device ? Mark.KV_SUBMITTED : Mark.TAKEN, Mark.AUX_SUBMITTED),
                us(room, Mark.AUX_SUBMITTED, Mark.WRITES_DONE),
                us(room, Mark.WRITES_DONE, Mark.SEEN),
                (end - room.at(Mark.SEEN)) / 1000,
                (end - room.at(Mark.SENT)) / 1000);
    }

    private static long us(PrefillRoom room, Mark from, Mark to) {
        return (room.at(to) - room.at(from)) / 1000;
    }

    private void freeAux(PrefillRoom room) {
        if (room.auxSlot >= 0) {
            aux.free(room.auxSlot);
            room.auxSlot = -1;
        }
    }

    private void fail(PrefillRoom room, String reason) {
        if (!room.failWith(reason)) {
            return;
        }
        status(room, KvPoll.FAILED, reason);
        for (DeliveryPath path : room.paths()) {
            path.stop(this, room);
        }
        if (room.inFlight == 0) {
            freeAux(room);
        }
    }

    /** Acknowledges an abort once no write of the room is in flight: the decode may then reuse its pages. */
    private void maybeAck(PrefillRoom room) {
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
            decodes.get(address).send(new PdMessage.AbortAck(room, spec.tpRank()).encode());
        } catch (TransferException e) {
            LOG.log(Level.DEBUG, () -> "abort ack to " + address + " not sent: " + e.getMessage());
        }
    }

    private void status(PrefillRoom room, KvPoll state, String reason) {
        room.tell(new PdMessage.Status(room.id, spec.tpRank(), state, reason));
    }

    private void sweepSafely() {
        try {
            long now = System.nanoTime();
            long timeout = TimeUnit.MILLISECONDS.toNanos(config.bootstrapTimeoutMillis());
            for (PrefillRoom r : rooms.values()) {
                if (r.state == KvPoll.BOOTSTRAPPING && now - r.createdNanos > timeout) {
                    fail(r, "no destination from decode within " + config.bootstrapTimeoutMillis() + " ms");
                }
                if (!r.claimed && now - r.createdNanos > timeout) {
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
        decodes.close();
        if (deviceKv != null) {
            deviceKv.close();
        }
    }
}
