package io.hicache.storage.remote;

import io.hicache.core.HiCacheException;
import io.hicache.storage.remote.RemoteConnection.Reply;
import io.hicache.storage.remote.protocol.AdminRequest;
import io.hicache.storage.remote.protocol.Codec;
import io.netty.buffer.ByteBuf;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The operator's requests to a running daemon (docs/protocol.md §3, FLUSH and STORE), over a {@link RemotePageStore}'s
 * connections: what {@code hicache admin} sends. A request the daemon refuses, or that gets no answer, completes
 * exceptionally with a {@link HiCacheException} whose message carries the daemon's. Each takes the daemon's
 * deadline as a timeout; the answer, which may come at that deadline, is waited for {@link #GRACE} longer.
 * Stateless apart from the client it was made over, which its caller owns and closes; thread-safe.
 */
public final class DaemonAdmin {
    /** What a FLUSH did: host-slab pages dropped, and pages it left there (pinned, or not in L3 by the deadline). */
    public record Flushed(long droppedPages, long keptPages) {}

    /** An L3 store by its name and location. */
    public record Store(String name, String location) {}

    /** What a STORE DETACH did: the store it detached (empty: none was attached), and the writes it dropped. */
    public record Detached(Optional<Store> store, long droppedWrites) {}

    /** How much longer than the daemon's deadline the answer is waited for. */
    public static final Duration GRACE = Duration.ofSeconds(10);

    private final RemotePageStore client;

    /** Admin requests over {@code client}'s connections. */
    public DaemonAdmin(RemotePageStore client) {
        this.client = client;
    }

    /** FLUSH: drops the host slab's unpinned pages, waiting up to {@code timeout} for the write-behind first. */
    public CompletableFuture<Flushed> flush(Duration timeout) {
        return call(new AdminRequest.Flush(), timeout, Answers.read("flush", in -> {
            Codec.need(in, 16, "flush answer");
            return new Flushed(in.readLong(), in.readLong());
        }));
    }

    /** STORE SHOW: the attached L3 store, if any. */
    public CompletableFuture<Optional<Store>> store(Duration timeout) {
        return call(new AdminRequest.StoreShow(), timeout, Answers.read("store show", DaemonAdmin::store));
    }

    /** STORE DETACH: drains the write-behind up to {@code timeout}, then detaches the store. */
    public CompletableFuture<Detached> detach(Duration timeout) {
        return call(new AdminRequest.StoreDetach(), timeout, Answers.read("store detach", in -> {
            Optional<Store> store = store(in);
            return new Detached(store, Codec.readLong(in));
        }));
    }

    /**
     * STORE ATTACH: the daemon opens store {@code name} with its own settings and {@code settings} over them, and
     * attaches it; refused when a store is attached already, the name is unknown or the store fails to open.
     */
    public CompletableFuture<Store> attach(String name, Map<String, String> settings, Duration timeout) {
        return call(
                new AdminRequest.StoreAttach(name, settings),
                timeout,
                Answers.read("store attach", in -> store(in).orElseThrow()));
    }

    private <T> CompletableFuture<T> call(AdminRequest request, Duration timeout, Reply<T> reply) {
        return client.callWithin(request, timeout, GRACE, reply);
    }

    /** attached:u8, name, location. */
    private static Optional<Store> store(ByteBuf in) {
        boolean attached = Codec.readUnsignedByte(in) == 1;
        String name = Codec.readString(in);
        String location = Codec.readString(in);
        return attached ? Optional.of(new Store(name, location)) : Optional.empty();
    }
}
