package io.hicache.storage.nixl;

import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The handle of one {@link NixlAgent#register} call: its regions, in the order given. Thread-safe. Whoever registered
 * it deregisters it ({@link NixlAgent#deregister}); the agent deregisters what is left when it closes.
 */
final class Registration {
    private final NixlAgent agent;
    private final AtomicBoolean registered = new AtomicBoolean(true);
    private List<Region> regions = List.of();

    Registration(NixlAgent agent) {
        this.agent = agent;
    }

    void setRegions(List<Region> made) {
        this.regions = List.copyOf(made);
    }

    /** The regions, in registration order. */
    public List<Region> regions() {
        return regions;
    }

    /** Region {@code index}. */
    public Region region(int index) {
        return regions.get(index);
    }

    public int size() {
        return regions.size();
    }

    /** Whether it is still registered. */
    public boolean isRegistered() {
        return registered.get();
    }

    NixlAgent agent() {
        return agent;
    }

    /** Marks it deregistered; true for the first caller only. */
    boolean markDeregistered() {
        return registered.compareAndSet(true, false);
    }
}
