package io.hicache.transfer;

import io.hicache.core.memory.MappedFiles;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.Transport;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The regions an engine registered, by id (what transports serve from and the descriptor lists) and by name (unique).
 * A region is registered with every transport that takes its kind before it is published, so no peer can address it
 * earlier; it is unregistered after the requests on it drained (one slice timeout), then freed.
 *
 * <p>Thread-safe. Owned by its {@link TransferEngine}, which checks that it is open before it adds a region.
 */
final class Regions {
    private static final System.Logger LOG = System.getLogger(Regions.class.getName());

    private final TransferEngine engine;
    private final TransferConfig config;
    /** The engine's transports, in its order of preference; fixed once the engine is open. */
    private final Map<String, Transport> transports;

    private final Map<Integer, LocalRegion> byId = new ConcurrentHashMap<>();
    private final Map<String, LocalRegion> byName = new ConcurrentHashMap<>();
    private final AtomicInteger nextId = new AtomicInteger(1);

    Regions(TransferEngine engine, Map<String, Transport> transports) {
        this.engine = engine;
        this.config = engine.config();
        this.transports = transports;
    }

    /** Whether {@code t} moves device memory (to or from either kind). */
    static boolean movesDevice(Transport t) {
        return t.moves(MemoryKind.DEVICE, MemoryKind.DEVICE)
                || t.moves(MemoryKind.HOST, MemoryKind.DEVICE)
                || t.moves(MemoryKind.DEVICE, MemoryKind.HOST);
    }

    /** The transports that register a region of {@code kind}: all for host memory, device movers for device. */
    private List<Transport> registering(MemoryKind kind) {
        return transports.values().stream()
                .filter(t -> kind == MemoryKind.HOST || movesDevice(t))
                .toList();
    }

    /**
     * Registers {@code memory} as region {@code name} with every transport that takes {@code kind}, then publishes it;
     * {@code free} runs when it is unregistered (or at once when it cannot be registered).
     */
    LocalRegion add(String name, MemorySegment memory, MemoryKind kind, Optional<Path> file, Runnable free) {
        engine.requireOpen();
        if (memory.byteSize() == 0) {
            throw new IllegalArgumentException("region " + name + " is empty");
        }
        LocalRegion region = new LocalRegion(engine, name, nextId.getAndIncrement(), memory, kind, file, free);
        if (byName.putIfAbsent(name, region) != null) {
            free.run();
            throw new IllegalArgumentException("a region named " + name + " is already registered");
        }
        // every transport prepares the region before a peer can address it (byId is what transports serve from)
        Map<String, String> keys = new LinkedHashMap<>();
        List<Transport> done = new ArrayList<>();
        try {
            for (Transport t : registering(kind)) {
                t.register(region.served()).forEach((k, v) -> keys.put(t.name() + "." + k, v));
                done.add(t);
            }
        } catch (RuntimeException e) {
            done.forEach(t -> t.deregister(region.served()));
            byName.remove(name, region);
            free.run();
            throw TransferEngine.translate(e);
        }
        region.publish(keys);
        byId.put(region.id(), region);
        return region;
    }

    /**
     * Creates region {@code name} of {@code bytes} zeroed bytes in a new file under the shared-memory folder, its space
     * reserved ({@link MappedFiles#create}); unregistering it unmaps and deletes the file.
     *
     * @throws TransferException {@code TRANSFER_UNAVAILABLE} when the file cannot be created, reserved or mapped
     */
    LocalRegion addShared(String name, long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("a region needs bytes > 0, got " + bytes);
        }
        Path file = config.shmDir()
                .resolve("hicache-xfer-" + safe(config.name()) + "-"
                        + ProcessHandle.current().pid() + "-" + safe(name) + "-" + Long.toHexString(System.nanoTime()));
        Arena arena = Arena.ofShared();
        try {
            // Reserved, not sparse: a full tmpfs refuses the region here rather than SIGBUS a later write into it.
            MemorySegment memory = MappedFiles.create(file, bytes, true, arena);
            return add(name, memory, MemoryKind.HOST, Optional.of(file), () -> {
                arena.close();
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    LOG.log(Level.WARNING, "could not delete " + file, e);
                }
            });
        } catch (IOException | RuntimeException e) {
            if (arena.scope().isAlive()) { // add frees what it refuses: the arena may be closed already
                arena.close();
            }
            try {
                Files.deleteIfExists(file);
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            if (e instanceof IllegalArgumentException iae) {
                throw iae;
            }
            throw TransferException.unavailable("cannot create shared region " + name + " of " + bytes + " bytes in "
                    + config.shmDir() + ": " + e.getMessage());
        }
    }

    private static String safe(String s) {
        return s.replaceAll("[^A-Za-z0-9_.-]", "_");
    }

    /**
     * Unregisters {@code region} (once; later calls do nothing): refuses new requests, waits one slice timeout for
     * those in flight, then closes the connections that still carry some, deregisters it from every transport and
     * frees it.
     */
    void remove(LocalRegion region) {
        if (byName.remove(region.name(), region)) {
            byId.remove(region.id());
            if (!region.retire(config.sliceTimeoutMillis())) {
                LOG.log(
                        Level.WARNING,
                        () -> region + " still had requests moving after " + config.sliceTimeoutMillis()
                                + " ms; closing the connections that carry them");
                transports.values().forEach(t -> t.closeInbound(config.sliceTimeoutMillis()));
            }
            for (Transport t : registering(region.kind())) {
                try {
                    t.deregister(region.served());
                } catch (RuntimeException e) {
                    LOG.log(Level.WARNING, "transport " + t.name() + " failed to deregister " + region, e);
                }
            }
            region.free();
        }
    }

    /** Unregisters every region (the engine closing). */
    void removeAll() {
        for (LocalRegion r : List.copyOf(byName.values())) {
            remove(r);
        }
    }

    /** The region with id {@code id}, or null. */
    @Nullable
    LocalRegion byId(int id) {
        return byId.get(id);
    }

    /** The regions published now. */
    List<LocalRegion> all() {
        return List.copyOf(byId.values());
    }

    /** Their descriptors, by id. */
    List<RegionDescriptor> descriptors() {
        List<RegionDescriptor> out = new ArrayList<>();
        for (LocalRegion r : byId.values()) {
            out.add(r.descriptor());
        }
        out.sort(Comparator.comparingInt(RegionDescriptor::id));
        return out;
    }

    /** The published region that holds all of {@code local}, or null. */
    @Nullable
    LocalRegion around(MemorySegment local) {
        long start = local.address();
        long end = start + local.byteSize();
        for (LocalRegion r : byId.values()) {
            long rs = r.memory().address();
            if (start >= rs && end <= rs + r.memory().byteSize()) {
                return r;
            }
        }
        return null;
    }
}
