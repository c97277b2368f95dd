package io.hicache.storage.nixl;

import io.hicache.core.Deadline;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A NIXL agent in Java: a named owner of backends (made by {@link NixlPlugin}s), registered memory and transfer
 * requests, with NIXL's calls and semantics: register memory of any type with every backend that serves it, cut
 * descriptors from the regions, prepare a transfer between a local list and a storage list once, post it, poll it,
 * release it. Local transfers only: the metadata exchange with remote agents belongs to network plugins, of which
 * there are none here ({@code docs/nixl.md}).
 *
 * <p>Beyond NIXL, nothing here waits without a bound: {@link #await} takes a deadline, a post may carry a stall
 * timeout after which it is cancelled and reports {@link NixlStatus#ERR_TIMED_OUT}, and {@link #cancel} stops a post
 * without releasing the request.
 *
 * <p>Thread-safe. The creator closes it; closing cancels and releases every request, deregisters every registration
 * and closes the backends.
 */
final class NixlAgent implements AutoCloseable {
    private final String name;
    private final Map<String, NixlPlugin> plugins;
    private final List<NixlBackend> backends = new CopyOnWriteArrayList<>();
    private final Set<Registration> registrations = ConcurrentHashMap.newKeySet();
    private final Set<XferRequest> requests = ConcurrentHashMap.newKeySet();
    private final ConcurrentLinkedQueue<Notification> notifications = new ConcurrentLinkedQueue<>();
    private volatile boolean closed;

    private NixlAgent(String name, Map<String, NixlPlugin> plugins) {
        this.name = name;
        this.plugins = plugins;
    }

    /** An agent named {@code name} that can use every plugin on the class path. */
    public static NixlAgent create(String name) {
        return create(name, NixlPlugins.all());
    }

    /** An agent that can use only {@code plugins} (for tests and embedding). */
    public static NixlAgent create(String name, List<NixlPlugin> plugins) {
        Objects.requireNonNull(name, "name");
        if (name.isBlank()) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "an agent needs a name");
        }
        Map<String, NixlPlugin> byName = new LinkedHashMap<>();
        for (NixlPlugin p : plugins) {
            byName.put(p.name(), p);
        }
        return new NixlAgent(name, Collections.unmodifiableMap(byName));
    }

    public String name() {
        return name;
    }

    /** Names of the plugins it can make backends of ({@code get_plugin_list}). */
    public List<String> pluginNames() {
        return List.copyOf(plugins.keySet());
    }

    /** A plugin's parameters and their defaults ({@code get_plugin_params}). */
    public Map<String, String> pluginParams(String plugin) {
        return plugin(plugin).defaultParams();
    }

    /**
     * Makes a backend of {@code plugin} ({@code create_backend}); the agent owns and closes it.
     *
     * @throws NixlException {@link NixlStatus#ERR_NOT_FOUND} for an unknown plugin, {@link NixlStatus#ERR_NOT_SUPPORTED}
     *     when it cannot run here (the reason is in the message), or what the plugin throws
     */
    public NixlBackend createBackend(String plugin, Map<String, String> params) {
        checkOpen();
        NixlPlugin p = plugin(plugin);
        p.unavailableReason(params).ifPresent(why -> {
            throw new NixlException(NixlStatus.ERR_NOT_SUPPORTED, "plugin " + plugin + " cannot run: " + why);
        });
        NixlBackend backend = p.create(name, Map.copyOf(params));
        backends.add(backend);
        return backend;
    }

    /** The backends made so far, in the order they were made. */
    public List<NixlBackend> backends() {
        return List.copyOf(backends);
    }

    /* ------------------------------------------------------------- memory */

    /**
     * Registers regions with every backend that serves their type ({@code registerMem}); all or nothing.
     *
     * @throws NixlException {@link NixlStatus#ERR_NOT_SUPPORTED} when no backend serves a region's type, or what a
     *     backend throws (the regions registered before it are released again)
     */
    public Registration register(List<? extends MemoryRegion> memory) {
        checkOpen();
        Objects.requireNonNull(memory, "memory");
        if (memory.isEmpty()) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "nothing to register");
        }
        Registration registration = new Registration(this);
        List<Region> made = new ArrayList<>(memory.size());
        Map<NixlBackend, Object> pending = Map.of();
        MemoryRegion current = null;
        try {
            for (MemoryRegion m : memory) {
                current = Objects.requireNonNull(m, "a region");
                pending = new IdentityHashMap<>(2);
                for (NixlBackend b : backends) {
                    if (b.memoryTypes().contains(m.type())) {
                        pending.put(b, b.register(m));
                    }
                }
                if (pending.isEmpty()) {
                    throw new NixlException(
                            NixlStatus.ERR_NOT_SUPPORTED,
                            "no backend of agent " + name + " serves " + m.type() + " memory (backends: "
                                    + backendNames() + ")");
                }
                made.add(new Region(registration, m, Collections.unmodifiableMap(pending)));
                pending = Map.of();
            }
        } catch (RuntimeException e) {
            // Undo: the regions made, and the backends that took the failing one.
            MemoryRegion failed = current;
            if (failed != null) { // else nothing was registered yet: pending is empty
                pending.forEach((backend, state) -> backend.deregister(failed, state));
            }
            for (Region r : made) {
                deregisterRegion(r);
            }
            throw e;
        }
        registration.setRegions(made);
        registrations.add(registration);
        if (closed) {
            deregister(registration);
            checkOpen();
        }
        return registration;
    }

    /** Registers one region. */
    public Registration register(MemoryRegion memory) {
        return register(List.of(memory));
    }

    /**
     * Deregisters ({@code deregisterMem}). Transfers over its regions must have ended: preparing or posting one
     * afterwards fails with {@link NixlStatus#ERR_INVALID_PARAM}.
     *
     * @throws NixlException {@link NixlStatus#ERR_INVALID_PARAM} when it is not this agent's or already deregistered
     */
    public void deregister(Registration registration) {
        Objects.requireNonNull(registration, "registration");
        if (registration.agent() != this) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the registration belongs to another agent");
        }
        if (!registration.markDeregistered()) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the registration was already deregistered");
        }
        registrations.remove(registration);
        for (Region r : registration.regions()) {
            deregisterRegion(r);
        }
    }

    private static void deregisterRegion(Region region) {
        region.states().forEach((backend, state) -> backend.deregister(region.memory(), state));
    }

    /** Registrations in force now. */
    public int registrationCount() {
        return registrations.size();
    }

    /**
     * Whether each storage region exists ({@code queryMem}), asked of the first backend serving its type. An
     * unanswerable question reads as false.
     */
    public CompletableFuture<List<Boolean>> queryMemory(List<? extends MemoryRegion> memory) {
        checkOpen();
        if (memory.isEmpty()) {
            return CompletableFuture.completedFuture(List.of());
        }
        MemoryType type = memory.get(0).type();
        for (MemoryRegion m : memory) {
            if (m.type() != type) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "one query holds one memory type; got " + type + " and " + m.type());
            }
        }
        NixlBackend backend = backends.stream()
                .filter(b -> b.memoryTypes().contains(type))
                .findFirst()
                .orElseThrow(() -> new NixlException(NixlStatus.ERR_NOT_SUPPORTED, "no backend serves " + type));
        return backend.query(List.copyOf(memory));
    }

    /* ------------------------------------------------------------- transfers */

    /**
     * Checks descriptors once ({@code prepXferDlist}): one memory type, regions of this agent still registered.
     */
    public XferDescList prepDescList(List<XferDesc> descs) {
        checkOpen();
        Objects.requireNonNull(descs, "descs");
        if (descs.isEmpty()) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "an empty descriptor list");
        }
        MemoryType type = descs.get(0).type();
        for (XferDesc d : descs) {
            Objects.requireNonNull(d, "a descriptor");
            if (d.type() != type) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "one list holds one memory type; got " + type + " and " + d.type());
            }
            checkRegistered(d.region());
        }
        return new XferDescList(type, descs);
    }

    /** A transfer between whole prepared lists, pairwise ({@code makeXferReq} with every index). */
    public XferRequest makeXfer(XferOp op, XferDescList local, XferDescList remote, @Nullable String notification) {
        return makeXfer(op, local.type(), local.descs(), remote.type(), remote.descs(), notification);
    }

    /** A transfer between the descriptors at the given indices of prepared lists ({@code makeXferReq}). */
    public XferRequest makeXfer(
            XferOp op,
            XferDescList local,
            int[] localIndices,
            XferDescList remote,
            int[] remoteIndices,
            @Nullable String notification) {
        return makeXfer(
                op,
                local.type(),
                local.select(localIndices),
                remote.type(),
                remote.select(remoteIndices),
                notification);
    }

    /** A one-shot transfer from unprepared lists ({@code createXferReq}). */
    public XferRequest createXfer(
            XferOp op, List<XferDesc> local, List<XferDesc> remote, @Nullable String notification) {
        XferDescList l = prepDescList(local);
        XferDescList r = prepDescList(remote);
        return makeXfer(op, l.type(), l.descs(), r.type(), r.descs(), notification);
    }

    private XferRequest makeXfer(
            XferOp op,
            MemoryType localType,
            List<XferDesc> local,
            MemoryType remoteType,
            List<XferDesc> remote,
            @Nullable String notification) {
        checkOpen();
        Objects.requireNonNull(op, "op");
        if (!localType.isLocal()) {
            throw new NixlException(
                    NixlStatus.ERR_INVALID_PARAM, "the local list must be DRAM or VRAM, not " + localType);
        }
        if (local.size() != remote.size()) {
            throw new NixlException(
                    NixlStatus.ERR_INVALID_PARAM,
                    "the lists have " + local.size() + " and " + remote.size() + " descriptors");
        }
        NixlBackend backend = backends.stream()
                .filter(b ->
                        b.memoryTypes().contains(localType) && b.memoryTypes().contains(remoteType))
                .findFirst()
                .orElseThrow(() -> new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED,
                        "no backend of agent " + name + " moves " + localType + " to and from " + remoteType
                                + " (backends: " + backendNames() + ")"));
        List<Piece> l = new ArrayList<>(local.size());
        List<Piece> r = new ArrayList<>(remote.size());
        long bytes = 0;
        for (int i = 0; i < local.size(); i++) {
            XferDesc a = local.get(i);
            XferDesc b = remote.get(i);
            if (a.length() != b.length()) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "descriptor " + i + " is " + a.length() + " bytes locally and " + b.length() + " remotely");
            }
            checkRegistered(a.region());
            checkRegistered(b.region());
            l.add(new Piece(a.region().memory(), a.region().stateFor(backend), a.offset(), a.length()));
            r.add(new Piece(b.region().memory(), b.region().stateFor(backend), b.offset(), b.length()));
            bytes += a.length();
        }
        NixlBackend.Request prepared = backend.prepare(op, l, r);
        XferRequest request = new XferRequest(op, backend, prepared, notification, bytes, l.size());
        requests.add(request);
        return request;
    }

    /** Posts with the request's own notification and no stall timeout ({@code postXferReq}). */
    public NixlStatus post(XferRequest request) {
        return post(request, request.notification(), null);
    }

    /**
     * Posts a request ({@code postXferReq}). Returns {@link NixlStatus#SUCCESS} if it finished before returning,
     * else {@link NixlStatus#IN_PROG} (or an error that came as fast).
     *
     * @param notification delivered to {@link #notifications()} on success, or null for none
     * @param stallTimeout after which a post still in progress is cancelled and reports
     *                     {@link NixlStatus#ERR_TIMED_OUT}; null for none
     * @throws NixlException {@link NixlStatus#ERR_REPOST_ACTIVE} while a post is in progress,
     *     {@link NixlStatus#ERR_INVALID_PARAM} after release or when a region was deregistered
     */
    public NixlStatus post(XferRequest request, @Nullable String notification, @Nullable Duration stallTimeout) {
        checkOpen();
        Objects.requireNonNull(request, "request");
        CompletableFuture<NixlStatus> done = request.begin();
        int post = request.post();
        try {
            Runnable notify =
                    notification == null ? null : () -> notifications.add(new Notification(name, notification));
            request.prepared().post((status, detail) -> request.finish(post, status, detail, notify));
        } catch (RuntimeException e) {
            request.finish(post, NixlStatus.ERR_BACKEND, "the backend refused the post: " + e, null);
        }
        if (stallTimeout != null && !done.isDone()) {
            CompletableFuture.delayedExecutor(Math.max(1, stallTimeout.toNanos()), TimeUnit.NANOSECONDS)
                    .execute(() -> request.cancel(post, true));
        }
        return request.status();
    }

    /** The request's status now ({@code getXferStatus}). */
    public NixlStatus status(XferRequest request) {
        return request.status();
    }

    /**
     * Waits for the current post to end, at most until {@code deadline}; returns the status then
     * ({@link NixlStatus#IN_PROG} if it is still running).
     */
    public NixlStatus await(XferRequest request, Deadline deadline) {
        CompletableFuture<NixlStatus> done = request.completion();
        try {
            return done.get(Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            return request.status();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return request.status();
        } catch (ExecutionException e) {
            throw new IllegalStateException("a transfer's completion cannot fail", e);
        }
    }

    /** The current post's completion, for callers that compose rather than poll. */
    public CompletableFuture<NixlStatus> completion(XferRequest request) {
        return request.completion();
    }

    /**
     * Stops the current post (not in NIXL, which aborts only on release): the backend issues no more I/O and the
     * post ends with {@link NixlStatus#ERR_CANCELED} once nothing is in flight. Does not block.
     */
    public void cancel(XferRequest request) {
        request.cancel(request.post(), false);
    }

    /**
     * Releases a request ({@code releaseXferReq}); one in progress is cancelled first and its backend resources go
     * when its I/O has ended. Does not block.
     *
     * @throws NixlException {@link NixlStatus#ERR_INVALID_PARAM} when released twice
     */
    public void release(XferRequest request) {
        request.markReleased();
        requests.remove(request);
    }

    /** Requests made and not released. */
    public int requestCount() {
        return requests.size();
    }

    /** Takes the notifications delivered so far ({@code getNotifs}). */
    public List<Notification> notifications() {
        List<Notification> out = new ArrayList<>();
        for (Notification n; (n = notifications.poll()) != null; ) {
            out.add(n);
        }
        return out;
    }

    /** Cancels and releases every request, deregisters every registration, closes the backends. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (XferRequest r : List.copyOf(requests)) {
            if (!r.isReleased()) {
                release(r);
            }
        }
        for (Registration r : List.copyOf(registrations)) {
            if (r.isRegistered()) {
                deregister(r);
            }
        }
        for (NixlBackend b : backends) {
            b.close();
        }
    }

    private NixlPlugin plugin(String plugin) {
        NixlPlugin p = plugins.get(plugin);
        if (p == null) {
            throw new NixlException(
                    NixlStatus.ERR_NOT_FOUND, "no plugin named '" + plugin + "'; this agent has " + plugins.keySet());
        }
        return p;
    }

    private void checkRegistered(Region region) {
        if (region.owner().agent() != this) {
            throw new NixlException(
                    NixlStatus.ERR_INVALID_PARAM, "region " + region + " was registered by another agent");
        }
        if (!region.isRegistered()) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "region " + region + " was deregistered");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new NixlException(NixlStatus.ERR_NOT_ALLOWED, "agent " + name + " is closed");
        }
    }

    private List<String> backendNames() {
        return backends.stream().map(NixlBackend::name).toList();
    }
}
