package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.store.DroppedPages;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.IntSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The STORE request's work on the daemon's L3 store while requests run: which store is attached, a detach that first
 * lets the write-behind drain, and an attach of a store opened as {@code server.store} is at start.
 *
 * <p>Thread-safe: detaches and attaches run one at a time (this object's monitor); requests go on meanwhile. The
 * slab cache's {@link io.hicache.core.store.StoreSlot} owns the stores; this only moves them in and out.
 */
final class StoreAdmin {
    private static final System.Logger LOG = System.getLogger(StoreAdmin.class.getName());

    /** A store by its name and location. */
    record Named(String name, String location) {
        static Named of(PageStore s) {
            return new Named(s.name(), s.location());
        }
    }

    /** What a detach did: the store it detached (null: none was attached), and the writes it dropped. */
    record Detached(@Nullable Named store, long droppedWrites) {}

    /** The daemon will not do what was asked; the message says why. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message, @Nullable Throwable cause) {
            super(message, cause);
        }

        /** Never null: always made with one, which the request is answered with. */
        @Override
        public String getMessage() {
            return Checks.checkNotNull(super.getMessage(), "the message");
        }
    }

    private final SlabCache cache;
    private final ServerConfig config;
    /** The daemon's port, once it listens: a remote store there is the daemon itself. */
    private final IntSupplier port;

    StoreAdmin(SlabCache cache, ServerConfig config, IntSupplier port) {
        this.cache = cache;
        this.config = config;
        this.port = port;
    }

    /** The attached store, if any. */
    Optional<Named> show() {
        return cache.l3.current().map(Named::of);
    }

    /**
     * Detaches the store: pages put from now on stay in the slab only, and GETs of pages not in the slab no longer
     * look in L3. Waits up to the deadline for the write-behind to write the pages it has; those it has not written
     * by then are dropped (they stay in the slab, evictable). The store is closed once no request uses it.
     */
    synchronized Detached detach(Deadline deadline) throws InterruptedException {
        PageStore store = cache.l3.current().orElse(null);
        if (store == null) {
            return new Detached(null, 0);
        }
        cache.l3.stopWrites();
        while (cache.writeBehind.pendingPages() > 0 && !deadline.isOver()) {
            cache.writeBehind.awaitProgress(Waits.pollMillis(deadline));
        }
        long dropped = cache.writeBehind.pendingPages(); // the write-behind drops them once it finds no store
        cache.l3.detach(true); // closed by the slot once no request uses it
        store.onDropped(DroppedPages.NONE); // its late drops are no longer this daemon's news
        cache.events.cleared(); // its pages are no longer served: a router forgets what it knew (docs/kv-events.md)
        cache.l3.awaitUnused(store, System.nanoTime() + Math.max(0, deadline.remainingNanos()));
        Named was = Named.of(store);
        LOG.log(
                Level.INFO,
                "detached the L3 store '" + was.name() + "' at " + was.location()
                        + (dropped > 0 ? "; " + dropped + " pages put before were not written to it" : ""));
        return new Detached(was, dropped);
    }

    /**
     * Opens store {@code name} with the daemon's settings and {@code settings} over them, and attaches it: pages put
     * from now on are written behind to it, and GETs look in it.
     *
     * @throws Refused when a store is attached already, no store has that name, a setting is not one of the store's,
     *     a folder it names is outside {@code server.store-root}, it is a {@code remote} store on this daemon, or it
     *     fails to open; nothing was made then
     */
    synchronized Named attach(String name, Map<String, String> settings) throws Refused {
        Optional<PageStore> attached = cache.l3.current();
        if (attached.isPresent()) {
            throw new Refused(
                    "a store is attached already ('" + attached.get().name() + "' at "
                            + attached.get().location() + "): detach it first",
                    null);
        }
        PageStoreProvider provider;
        try {
            provider = PageStores.provider(name);
        } catch (RuntimeException e) {
            throw new Refused("cannot open store '" + name + "': " + e.getMessage(), e);
        }
        check(provider, settings);
        PageStore store;
        try {
            store = open(config, name, settings);
        } catch (RuntimeException e) {
            throw new Refused("cannot open store '" + name + "': " + e.getMessage(), e);
        }
        cache.events.l3Attached(store); // before the attach: a drop in between is announced too
        cache.l3.attach(store); // cannot be refused: attaches and detaches hold this monitor
        Named now = Named.of(store);
        LOG.log(Level.INFO, "attached the L3 store '" + now.name() + "' at " + now.location());
        return now;
    }

    /**
     * Refuses an attach before anything is opened or made: a key that is not one of the store's settings (a misspelt
     * one would otherwise be ignored), a folder outside {@code server.store-root}, a {@code remote} store that is
     * this daemon (every miss would cost a request's whole deadline).
     */
    private void check(PageStoreProvider provider, Map<String, String> settings) throws Refused {
        String name = provider.name();
        Map<String, Setting<?>> known = new LinkedHashMap<>();
        provider.settings().forEach(st -> known.put(st.key(), st));
        if (!known.keySet().containsAll(settings.keySet())) {
            Settings.Builder given = Settings.builder();
            settings.forEach(given::flag);
            String why;
            try {
                given.build().requireKnown(provider.settings());
                why = "unknown setting";
            } catch (HiCacheException e) {
                // "unknown setting 'x' (from flag --x), did you mean 'y'?": the nearest key, without the origin
                why = Checks.checkNotNull(e.getMessage(), "the unknown setting's message")
                        .replaceAll(" \\(from flag --[^)]*\\)", "");
            }
            throw new Refused(
                    "store '" + name + "': " + why + " (its settings: " + String.join(", ", known.keySet()) + ")",
                    null);
        }
        Path root;
        try {
            root = real(config.storeRoot());
        } catch (IOException e) {
            throw new Refused(
                    "server.store-root (" + config.storeRoot() + ") cannot be resolved: " + e.getMessage(), e);
        }
        for (Map.Entry<String, String> e : settings.entrySet()) {
            Setting<?> st = Checks.checkNotNull(known.get(e.getKey()), "the setting (all are known: checked above)");
            List<String> folders = st.type().equals("path")
                    ? List.of(e.getValue())
                    : e.getKey().endsWith(".dirs") ? List.of(e.getValue().split(",")) : List.of();
            for (String folder : folders) {
                Path asked;
                try {
                    asked = real(Path.of(folder.trim()));
                } catch (InvalidPathException | IOException ex) {
                    throw new Refused(
                            e.getKey() + " = '" + folder.trim() + "' is not a usable folder: " + ex.getMessage(), ex);
                }
                if (!asked.startsWith(root)) {
                    throw new Refused(
                            e.getKey() + " = '" + folder.trim() + "' (" + asked + ") is outside "
                                    + "server.store-root (" + root + "): a store may be attached only under it",
                            null);
                }
            }
        }
        if (name.equals("remote")) {
            Settings effective = config.settings();
            for (Map.Entry<String, String> e : settings.entrySet()) {
                effective = effective.with(e.getKey(), e.getValue());
            }
            String host;
            int remotePort;
            try {
                host = RemoteStoreConfig.HOST.from(effective).trim();
                remotePort = RemoteStoreConfig.PORT.from(effective);
            } catch (RuntimeException ex) {
                throw new Refused("cannot open store 'remote': " + ex.getMessage(), ex);
            }
            if (remotePort == port.getAsInt() && isThisHost(host)) {
                throw new Refused(
                        "the remote store at " + host + ":" + remotePort + " is this daemon: every page it "
                                + "lacks would be asked of itself",
                        null);
            }
        }
    }

    /**
     * {@code p} made absolute, its {@code .} and {@code ..} resolved and every part that exists replaced by what it
     * really is (symbolic links followed), part by part from the root, so that a link or a {@code ..} cannot lead
     * out of a folder it seems to be in. Parts that do not exist yet are taken as written.
     *
     * @throws IOException when a part cannot be resolved, or is a symbolic link to nothing
     */
    static Path real(Path p) throws IOException {
        Path abs = p.toAbsolutePath();
        Path at = abs.getRoot();
        for (Path part : at.relativize(abs)) {
            String n = part.toString();
            if (n.isEmpty() || n.equals(".")) {
                continue;
            }
            if (n.equals("..")) {
                at = at.getParent() != null ? at.getParent() : at;
                continue;
            }
            Path next = at.resolve(n);
            if (Files.exists(next)) {
                at = next.toRealPath();
            } else if (Files.isSymbolicLink(next)) {
                throw new IOException(next + " is a symbolic link to nothing");
            } else {
                at = next;
            }
        }
        return at;
    }

    /** Whether {@code host} names this machine: a loopback, wildcard or local interface address. */
    static boolean isThisHost(String host) {
        try {
            for (InetAddress a : InetAddress.getAllByName(host)) {
                if (a.isLoopbackAddress() || a.isAnyLocalAddress() || NetworkInterface.getByInetAddress(a) != null) {
                    return true;
                }
            }
        } catch (IOException e) {
            return false; // an unknown host is not this one (opening the store will say what is wrong)
        }
        return false;
    }

    /**
     * Opens store {@code name} as the daemon opens {@code server.store} at start: its settings are the daemon's with
     * {@code overrides} over them, and the file store's root defaults to {@link HiCacheServer#DEFAULT_FILE_ROOT}.
     * The caller closes it.
     */
    static PageStore open(ServerConfig config, String name, Map<String, String> overrides) {
        Settings settings = config.settings();
        for (Map.Entry<String, String> e : overrides.entrySet()) {
            settings = settings.with(e.getKey(), e.getValue());
        }
        if (name.equals("file") && settings.lookup("file.root").isEmpty()) {
            settings = settings.with("file.root", HiCacheServer.DEFAULT_FILE_ROOT);
        }
        return PageStores.open(new StoreConfig(name, settings));
    }
}
