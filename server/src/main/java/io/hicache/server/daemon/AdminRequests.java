package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The operator's requests (docs/protocol.md §3): FLUSH, and STORE with its SHOW, DETACH and ATTACH. Parsed on the
 * event loop, run on a worker (they wait for the write-behind, or open a store). FLUSH, DETACH and ATTACH (and
 * CLEAR_ALL) are admin operations: {@link ServerHandler} runs them only on a connection whose HELLO carried
 * {@code server.admin-token}, or, without one, from a loopback peer. For a connection's order they are writes.
 * Stateless; thread-safe.
 */
final class AdminRequests {
    /** The most settings an ATTACH may carry. */
    static final int MAX_SETTINGS = 1024;

    private AdminRequests() {
    }

    /**
     * The work of a FLUSH or STORE request.
     *
     * @throws ProtocolException if the payload is malformed
     */
    static Operations.Work parse(HiCacheServer server, Responder out, Operations.Request r, ByteBuf in) {
        if (r.op() == Wire.FLUSH) {
            return Operations.Work.slow(() -> {
                SlabCache.Flushed f = server.cache.flush(r.deadline());
                ByteBuf answer = out.begin(r.op(), r.id());
                answer.writeLong(f.dropped());
                answer.writeLong(f.kept());
                out.send(answer);
            });
        }
        int sub = Codec.readUnsignedByte(in);
        return switch (sub) {
            case Wire.STORE_SHOW -> Operations.Work.slow(() -> {
                ByteBuf answer = out.begin(r.op(), r.id());
                named(answer, server.stores.show());
                out.send(answer);
            });
            case Wire.STORE_DETACH -> Operations.Work.slow(() -> {
                StoreAdmin.Detached d;
                try {
                    d = server.stores.detach(r.deadline());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    out.fail(r.id(), Wire.E_INTERNAL, "interrupted while detaching the store", false);
                    return;
                }
                ByteBuf answer = out.begin(r.op(), r.id());
                named(answer, Optional.ofNullable(d.store()));
                answer.writeLong(d.droppedWrites());
                out.send(answer);
            });
            case Wire.STORE_ATTACH -> {
                String name = Codec.readString(in);
                int n = Codec.readCount(in, 4, MAX_SETTINGS);
                Map<String, String> settings = new LinkedHashMap<>();
                for (int i = 0; i < n; i++) {
                    settings.put(Codec.readString(in), Codec.readString(in));
                }
                yield Operations.Work.slow(() -> {
                    StoreAdmin.Named attached;
                    try {
                        attached = server.stores.attach(name, settings);
                    } catch (StoreAdmin.Refused e) {
                        out.fail(r.id(), Wire.E_REFUSED, e.getMessage(), false);
                        return;
                    }
                    ByteBuf answer = out.begin(r.op(), r.id());
                    named(answer, Optional.of(attached));
                    out.send(answer);
                });
            }
            default -> throw new ProtocolException("STORE sub-operation " + sub + " is not defined (0 SHOW, 1 DETACH, "
                    + "2 ATTACH)");
        };
    }

    /** attached:u8, then name and location (empty strings when none). */
    private static void named(ByteBuf answer, Optional<StoreAdmin.Named> store) {
        answer.writeByte(store.isPresent() ? 1 : 0);
        Codec.writeString(answer, store.map(StoreAdmin.Named::name).orElse(""));
        Codec.writeString(answer, store.map(StoreAdmin.Named::location).orElse(""));
    }
}
