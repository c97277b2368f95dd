package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryRegion;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A bounded, least-recently-used cache of the storage-side read registrations of pages, where SGLang registers and
 * deregisters the file of every page on every transfer. A cached POSIX registration keeps its file open, so a page
 * read again costs no open and close. A lease keeps a registration alive while a transfer uses it; one evicted or
 * invalidated meanwhile is deregistered when its last lease ends. Size 0 turns caching off (every lease registers and
 * deregisters, as SGLang does). Thread-safe.
 */
final class RegistrationCache {
    /** A registration in use; {@link #close()} ends the use. */
    final class Lease implements Transfers.Storage {
        private final Slot slot;

        private Lease(Slot slot) {
            this.slot = slot;
        }

        @Override
        public Registration registration() {
            return slot.registration;
        }

        @Override
        public void close() {
            release(slot);
        }
    }

    private static final class Slot {
        final Registration registration;
        final long length;
        int users;
        boolean dropped;

        Slot(Registration registration, long length) {
            this.registration = registration;
            this.length = length;
        }
    }

    private final NixlAgent agent;
    private final int capacity;
    private final LinkedHashMap<String, Slot> slots = new LinkedHashMap<>(16, 0.75f, true);
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();

    RegistrationCache(NixlAgent agent, int capacity) {
        this.agent = agent;
        this.capacity = capacity;
    }

    /** A lease on the registration of {@code name}'s region, registering it (with {@code region}) on a miss. */
    Lease lease(String name, long length, Supplier<MemoryRegion> region) {
        synchronized (this) {
            Slot s = slots.get(name);
            if (s != null && s.length == length) {
                s.users++;
                hits.incrementAndGet();
                return new Lease(s);
            }
        }
        misses.incrementAndGet();
        Slot made = new Slot(agent.register(region.get()), length);
        made.users = 1;
        List<Slot> toDrop = new ArrayList<>();
        synchronized (this) {
            if (capacity == 0) {
                made.dropped = true;
            } else {
                Slot old = slots.put(name, made);
                if (old != null) {
                    toDrop.add(old);
                }
                Iterator<Slot> eldest = slots.values().iterator();
                while (slots.size() > capacity && eldest.hasNext()) {
                    toDrop.add(eldest.next());
                    eldest.remove();
                }
            }
        }
        toDrop.forEach(this::drop);
        return new Lease(made);
    }

    /** Drops the cached registration of {@code name}: its page was deleted, replaced or found bad. */
    void invalidate(String name) {
        Slot s;
        synchronized (this) {
            s = slots.remove(name);
        }
        if (s != null) {
            drop(s);
        }
    }

    /** Drops every cached registration whose name starts with {@code prefix} (all for null). */
    void invalidateAll(@Nullable String prefix) {
        List<Slot> toDrop = new ArrayList<>();
        synchronized (this) {
            Iterator<Map.Entry<String, Slot>> it = slots.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<String, Slot> e = it.next();
                if (prefix == null || e.getKey().startsWith(prefix)) {
                    toDrop.add(e.getValue());
                    it.remove();
                }
            }
        }
        toDrop.forEach(this::drop);
    }

    long hits() {
        return hits.get();
    }

    long misses() {
        return misses.get();
    }

    synchronized int size() {
        return slots.size();
    }

    private void drop(Slot s) {
        boolean now;
        synchronized (this) {
            s.dropped = true;
            now = s.users == 0;
        }
        if (now) {
            deregister(s);
        }
    }

    private void release(Slot s) {
        boolean now;
        synchronized (this) {
            s.users--;
            now = s.users == 0 && s.dropped;
        }
        if (now) {
            deregister(s);
        }
    }

    private void deregister(Slot s) {
        if (s.registration.isRegistered()) {
            agent.deregister(s.registration);
        }
    }
}
