package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.AdminRequest;
import io.hicache.storage.remote.protocol.AdminRequest.Flush;
import io.hicache.storage.remote.protocol.AdminRequest.Health;
import io.hicache.storage.remote.protocol.AdminRequest.Stats;
import io.hicache.storage.remote.protocol.AdminRequest.StoreAttach;
import io.hicache.storage.remote.protocol.AdminRequest.StoreDetach;
import io.hicache.storage.remote.protocol.AdminRequest.StoreShow;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The daemon's own requests' work (docs/protocol.md §3): STATS and HEALTH on the event loop (answered during a
 * shutdown too); FLUSH and STORE on a worker, since they wait for the write-behind or open a store. FLUSH, STORE
 * DETACH and ATTACH (and CLEAR_ALL) are admin operations: {@link ServerHandler} hands them here only from a connection
 * with admin permission. Stateless apart from the daemon it serves; thread-safe.
 */
final class AdminHandler {
    private final HiCacheServer server;

    AdminHandler(HiCacheServer server) {
        this.server = server;
    }

    /** The work of an admin request. */
    Work work(Call call, AdminRequest request) {
        return switch (request) {
            case Stats stats ->
                Work.quick(() -> {
                    ByteBuf answer = call.begin();
                    byte[] text = server.metrics.render().getBytes(StandardCharsets.UTF_8);
                    answer.writeInt(text.length);
                    answer.writeBytes(text);
                    call.send(answer);
                });
            case Health health ->
                Work.quick(() -> {
                    ByteBuf answer = call.begin();
                    answer.writeByte(server.shuttingDown() ? 1 : 0);
                    call.send(answer);
                });
            case Flush flush ->
                Work.slow(() -> {
                    SlabFlush.Flushed f = server.cache.flush.run(call.deadline());
                    ByteBuf answer = call.begin();
                    answer.writeLong(f.dropped());
                    answer.writeLong(f.kept());
                    call.send(answer);
                });
            case StoreShow show ->
                Work.slow(() -> {
                    ByteBuf answer = call.begin();
                    named(answer, server.stores.show());
                    call.send(answer);
                });
            case StoreDetach detach -> Work.slow(() -> detach(call));
            case StoreAttach attach -> Work.slow(() -> attach(call, attach));
        };
    }

    private void detach(Call call) {
        StoreAdmin.Detached d;
        try {
            d = server.stores.detach(call.deadline());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            call.fail(Wire.E_INTERNAL, "interrupted while detaching the store");
            return;
        }
        ByteBuf answer = call.begin();
        named(answer, Optional.ofNullable(d.store()));
        answer.writeLong(d.droppedWrites());
        call.send(answer);
    }

    private void attach(Call call, StoreAttach attach) {
        StoreAdmin.Named attached;
        try {
            attached = server.stores.attach(attach.name(), attach.settings());
        } catch (StoreAdmin.Refused e) {
            call.fail(Wire.E_REFUSED, e.getMessage());
            return;
        }
        ByteBuf answer = call.begin();
        named(answer, Optional.of(attached));
        call.send(answer);
    }

    /** attached:u8, then name and location (empty strings when none). */
    private static void named(ByteBuf answer, Optional<StoreAdmin.Named> store) {
        answer.writeByte(store.isPresent() ? 1 : 0);
        Codec.writeString(answer, store.map(StoreAdmin.Named::name).orElse(""));
        Codec.writeString(answer, store.map(StoreAdmin.Named::location).orElse(""));
    }
}
