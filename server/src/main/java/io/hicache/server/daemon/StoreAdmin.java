package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import java.lang.System.Logger.Level;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

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
    record Detached(Named store, long droppedWrites) {
    }

    /** The daemon will not do what was asked; the message says why. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private final SlabCache cache;
    private final ServerConfig config;

    StoreAdmin(SlabCache cache, ServerConfig config) {
        this.cache = cache;
        this.config = config;
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
            cache.writeBehind.awaitProgress(Math.max(1, Math.min(50,
                    TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()))));
        }
        long dropped = cache.writeBehind.pendingPages(); // the write-behind drops them once it finds no store
        cache.l3.detach(true); // closed by the slot once no request uses it
        cache.l3.awaitUnused(store, System.nanoTime() + Math.max(0, deadline.remainingNanos()));
        Named was = Named.of(store);
        LOG.log(Level.INFO, "detached the L3 store '" + was.name() + "' at " + was.location()
                + (dropped > 0 ? "; " + dropped + " pages put before were not written to it" : ""));
        return new Detached(was, dropped);
    }

    /**
     * Opens store {@code name} with the daemon's settings and {@code settings} over them, and attaches it: pages put
     * from now on are written behind to it, and GETs look in it.
     *
     * @throws Refused when a store is attached already, no store has that name, or it fails to open
     */
    synchronized Named attach(String name, Map<String, String> settings) throws Refused {
        Optional<PageStore> attached = cache.l3.current();
        if (attached.isPresent()) {
            throw new Refused("a store is attached already ('" + attached.get().name() + "' at "
                    + attached.get().location() + "): detach it first", null);
        }
        PageStore store;
        try {
            store = open(config, name, settings);
        } catch (RuntimeException e) {
            throw new Refused("cannot open store '" + name + "': " + e.getMessage(), e);
        }
        cache.l3.attach(store); // cannot be refused: attaches and detaches hold this monitor
        cache.events.l3Medium(SlabCache.medium(store));
        Named now = Named.of(store);
        LOG.log(Level.INFO, "attached the L3 store '" + now.name() + "' at " + now.location());
        return now;
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
