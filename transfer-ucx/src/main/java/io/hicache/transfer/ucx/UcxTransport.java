package io.hicache.transfer.ucx;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegisteredRegion;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import java.io.IOException;
import java.io.InputStream;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.openucx.jucx.UcxException;
import org.openucx.jucx.ucp.UcpContext;
import org.openucx.jucx.ucp.UcpMemMapParams;
import org.openucx.jucx.ucp.UcpMemory;
import org.openucx.jucx.ucp.UcpParams;
import org.openucx.jucx.ucs.UcsConstants;

/**
 * The UCX transport: one-sided RDMA-style reads and writes through UCX's UCP API (JUCX), which carries them over
 * whatever UCX finds: RDMA ({@code rc}, {@code dc}, {@code ud} on verbs/mlx5) between hosts with a NIC, shared memory
 * ({@code posix}, {@code sysv}, {@code cma}) on one host, TCP where nothing better exists ({@link UcxSettings#tls}).
 *
 * <p>Each region is mapped with UCP ({@code ucp_mem_map}); its packed remote key, base address and fence are
 * published in the region's descriptor keys ({@code ucx.rkey}, {@code ucx.addr}, {@code ucx.slot},
 * {@code ucx.token}). The endpoint string carries the UCP worker addresses peers connect to and where the fence
 * table lies.
 *
 * <p><b>Fences.</b> A one-sided request never reaches the owner's CPU, so the owner cannot refuse a stale key the way
 * the TCP transport's server does. Each region owns a slot in a small registered fence table holding a random token
 * while it is registered; a peer reads the slot before it moves bytes (per run of slices, again when the reading is
 * older than a quarter of {@link UcxSettings#unmapGraceMillis} or the endpoint failed), and a zero or different token
 * fails the requests ("unregistered"). Unregistering zeroes the token, waits the grace, lets this process's workers
 * apply what peers already sent into them, then unmaps: a time bound, not a guarantee (see docs/transfer.md). With RDMA
 * the NIC refuses an unmapped key by itself; UCX's shared-memory and TCP emulations do not, which is what the fence is
 * for.
 *
 * <p>Thread-safe. The UCP context is shared by the transport's workers, each progressed by its own named thread
 * ({@link UcxLoop}); the engine closes the transport, which stops them and unmaps everything still mapped.
 */
final class UcxTransport implements Transport {
    static final String NAME = "ucx";
    static final int FENCE_SLOTS = 4096;
    private static final System.Logger LOG = System.getLogger(UcxTransport.class.getName());
    private static final HexFormat HEX = HexFormat.of();
    /** Failures UCX reported in this process, over all UCX transports: for tests and diagnostics. */
    private static final AtomicLong PEER_FAILURES = new AtomicLong();

    private final TransportContext context;
    private final UcxSettings settings;
    private final UcpContext ucp;
    private final Arena fenceArena = Arena.ofShared();
    private final MemorySegment fences;
    private final UcpMemory fenceMemory;
    private final BitSet usedSlots = new BitSet(FENCE_SLOTS);
    private final Map<Integer, Registration> registrations = new ConcurrentHashMap<>();
    private final List<UcxLoop> loops = new ArrayList<>();
    private final String endpoint;
    private final ScheduledFuture<?> sweep;

    /** A mapped region: its UCP memory, fence slot and token. */
    private record Registration(UcpMemory memory, int slot, long token) {}

    UcxTransport(TransportContext context) {
        this.context = context;
        this.settings = UcxSettings.from(context.optionsOf(NAME));
        if (settings.shmErrorHandling()) {
            // before the first context reads UCX's environment: lets same-host peers use shared memory under
            // peer-failure handling (UCX 1.13 leaves these off; a user's own setting is kept)
            UcxNative.setenvIfAbsent("UCX_POSIX_ERROR_HANDLING", "y");
            UcxNative.setenvIfAbsent("UCX_SYSV_ERROR_HANDLING", "y");
        }
        try {
            this.ucp = new UcpContext(new UcpParams()
                    .requestRmaFeature()
                    .requestWakeupFeature()
                    .setMtWorkersShared(true)
                    .setConfig("TLS", settings.tls())
                    .setConfig("NET_DEVICES", settings.netDevices()));
        } catch (UcxException | UnsatisfiedLinkError | ExceptionInInitializerError | NoClassDefFoundError e) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "ucx transport cannot start (tls=" + settings.tls() + ", net-devices=" + settings.netDevices()
                            + "): " + e);
        }
        UcpMemory fm = null;
        try {
            this.fences = fenceArena.allocate((long) FENCE_SLOTS * Long.BYTES, 4096);
            fm = ucp.memoryMap(
                    new UcpMemMapParams().setAddress(fences.address()).setLength(fences.byteSize()));
            this.fenceMemory = fm;
            for (int i = 0; i < settings.workers(); i++) {
                loops.add(new UcxLoop(
                        ucp, context.engineName(), i, TimeUnit.MICROSECONDS.toNanos(settings.spinMicros())));
            }
            StringBuilder ep = new StringBuilder("1;")
                    .append(Long.toHexString(fences.address()))
                    .append(';')
                    .append(hex(fm.getRemoteKeyBuffer()))
                    .append(';');
            for (int i = 0; i < loops.size(); i++) {
                ep.append(i == 0 ? "" : ",").append(loops.get(i).address());
            }
            this.endpoint = ep.toString();
        } catch (RuntimeException e) {
            loops.forEach(UcxLoop::stop);
            if (fm != null) {
                fm.deregister();
            }
            ucp.close();
            fenceArena.close();
            throw e instanceof HiCacheException
                    ? e
                    : new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "ucx transport cannot start: " + e);
        }
        long every = Math.max(5, Math.min(100, context.sliceTimeoutMillis() / 4));
        this.sweep = context.timer()
                .scheduleWithFixedDelay(
                        () -> loops.forEach(l -> l.execute(l::sweep)), every, every, TimeUnit.MILLISECONDS);
        // (a stopped loop refuses the sweep: execute returns false, which is all there is to do)
        LOG.log(
                Level.INFO,
                () -> "ucx transport of " + context.engineName() + ": UCX " + UcxNative.version() + " through JUCX "
                        + jucxVersion() + ", tls=" + settings.tls() + ", net-devices=" + settings.netDevices() + ", "
                        + loops.size() + " workers");
    }

    static String hex(ByteBuffer b) {
        ByteBuffer d = b.duplicate();
        byte[] bytes = new byte[d.remaining()];
        d.get(bytes);
        return HEX.formatHex(bytes);
    }

    static ByteBuffer unhex(String s) {
        byte[] bytes = HEX.parseHex(s);
        ByteBuffer b = ByteBuffer.allocateDirect(bytes.length);
        b.put(bytes).flip();
        return b;
    }

    /** The JUCX version on the class path, from its Maven descriptor. */
    static String jucxVersion() {
        try (InputStream in = UcpContext.class.getResourceAsStream("/META-INF/maven/org.openucx/jucx/pom.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    /** An endpoint or request failed in UCX with {@code status}; our own cancels are not failures of the peer. */
    void sawPeerFailure(int status) {
        if (status != UcsConstants.STATUS.UCS_ERR_CANCELED) {
            PEER_FAILURES.incrementAndGet();
        }
    }

    /** How many times UCX itself reported a failed endpoint or request in this process. */
    static long peerFailures() {
        return PEER_FAILURES.get();
    }

    TransportContext context() {
        return context;
    }

    UcxSettings settings() {
        return settings;
    }

    List<UcxLoop> loops() {
        return loops;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String endpoint() {
        return endpoint;
    }

    @Override
    public Map<String, String> register(RegisteredRegion region) {
        if (region.kind() != MemoryKind.HOST) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE, "the ucx transport moves host memory only: " + region.name());
        }
        MemorySegment m = region.memory();
        UcpMemory memory;
        try {
            memory = ucp.memoryMap(new UcpMemMapParams().setAddress(m.address()).setLength(m.byteSize()));
        } catch (UcxException e) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE, "ucx cannot map region " + region.name() + ": " + e.getMessage());
        }
        int slot;
        synchronized (usedSlots) {
            slot = usedSlots.nextClearBit(0);
            if (slot >= FENCE_SLOTS) {
                memory.deregister();
                throw new HiCacheException(
                        ErrorCode.TRANSFER_UNAVAILABLE,
                        "the ucx transport has " + FENCE_SLOTS + " regions registered; unregister some first");
            }
            usedSlots.set(slot);
        }
        long token = ThreadLocalRandom.current().nextLong(1, Long.MAX_VALUE);
        fences.setAtIndex(ValueLayout.JAVA_LONG, slot, token);
        VarHandle.fullFence();
        registrations.put(region.id(), new Registration(memory, slot, token));
        return Map.of(
                "rkey", hex(memory.getRemoteKeyBuffer()),
                "addr", Long.toString(m.address()),
                "slot", Integer.toString(slot),
                "token", Long.toString(token));
    }

    @Override
    public void deregister(RegisteredRegion region) {
        Registration r = registrations.remove(region.id());
        if (r == null) {
            return;
        }
        fences.setAtIndex(ValueLayout.JAVA_LONG, r.slot(), 0L);
        VarHandle.fullFence();
        graceSleep();
        drainLoops();
        unmap(r);
    }

    /** After the grace: what peers already put into this process's workers lands before the memory goes. */
    private void drainLoops() {
        for (UcxLoop l : loops) {
            l.drain(1_000);
        }
    }

    private void unmap(Registration r) {
        try {
            r.memory().deregister();
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "ucx could not unmap a region", e);
        }
        synchronized (usedSlots) {
            usedSlots.clear(r.slot());
        }
    }

    private void graceSleep() {
        if (settings.unmapGraceMillis() > 0) {
            try {
                Thread.sleep(settings.unmapGraceMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
        return remote.endpoint(NAME).isPresent()
                && (!settings.sameHostOnly() || local.hostId().equals(remote.hostId()));
    }

    @Override
    public TransportLink link(PeerContext peer) {
        return new UcxLink(this, peer);
    }

    @Override
    public void close() {
        sweep.cancel(false);
        if (!registrations.isEmpty()) {
            registrations.values().forEach(r -> fences.setAtIndex(ValueLayout.JAVA_LONG, r.slot(), 0L));
            VarHandle.fullFence();
            graceSleep();
            drainLoops();
        }
        boolean allStopped = true;
        for (UcxLoop l : loops) {
            allStopped &= l.stop();
        }
        if (!allStopped) {
            // a worker still in use by a stuck thread: unmapping under it could crash the process; leak instead
            LOG.log(Level.WARNING, "ucx transport of " + context.engineName() + " left open: a worker did not stop");
            return;
        }
        registrations.values().forEach(this::unmap);
        registrations.clear();
        try {
            fenceMemory.deregister();
            ucp.close();
        } finally {
            fenceArena.close();
        }
    }
}
