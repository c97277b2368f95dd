package io.hicache.storage.remote.protocol;

import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The daemon's own requests (docs/protocol.md §3): STATS and HEALTH, which read its state (and are answered during a
 * shutdown too), and FLUSH and STORE, which change it; FLUSH, STORE DETACH and STORE ATTACH are admin operations
 * (§2). Immutable records (see {@link Request}).
 */
public sealed interface AdminRequest extends Request {
    /** STATS: no payload. The daemon's metrics, in Prometheus' text format. */
    record Stats() implements AdminRequest {
        @Override
        public int op() {
            return Wire.STATS;
        }

        @Override
        public void writeTo(ByteBuf out) {}
    }

    /** HEALTH: no payload. Whether the daemon serves or is shutting down. */
    record Health() implements AdminRequest {
        @Override
        public int op() {
            return Wire.HEALTH;
        }

        @Override
        public void writeTo(ByteBuf out) {}
    }

    /** FLUSH: no payload. Drops the host slab's unpinned pages once L3 has them. A write; an admin operation. */
    record Flush() implements AdminRequest {
        @Override
        public int op() {
            return Wire.FLUSH;
        }

        @Override
        public boolean isWrite() {
            return true;
        }

        @Override
        public void writeTo(ByteBuf out) {}
    }

    /** STORE: {@code sub:u8 ...}. Shows, detaches or attaches the L3 store; every STORE is a write (§1). */
    sealed interface Store extends AdminRequest {
        /** The sub-operation's byte: one of {@code Wire.STORE_*}. */
        int sub();

        @Override
        default int op() {
            return Wire.STORE;
        }

        @Override
        default boolean isWrite() {
            return true;
        }

        /**
         * Reads a STORE's payload.
         *
         * @throws ProtocolException for a sub-operation that is not defined, or a malformed ATTACH
         */
        static Store read(ByteBuf in) {
            int sub = Codec.readUnsignedByte(in);
            return switch (sub) {
                case Wire.STORE_SHOW -> new StoreShow();
                case Wire.STORE_DETACH -> new StoreDetach();
                case Wire.STORE_ATTACH -> StoreAttach.read(in);
                default ->
                    throw new ProtocolException(
                            "STORE sub-operation " + sub + " is not defined (0 SHOW, 1 DETACH, " + "2 ATTACH)");
            };
        }
    }

    /** STORE SHOW: {@code 0}. Which L3 store is attached. Not an admin operation. */
    record StoreShow() implements Store {
        @Override
        public int sub() {
            return Wire.STORE_SHOW;
        }

        @Override
        public void writeTo(ByteBuf out) {
            out.writeByte(Wire.STORE_SHOW);
        }
    }

    /** STORE DETACH: {@code 1}. Drains the write-behind up to the deadline, then detaches the L3 store. */
    record StoreDetach() implements Store {
        @Override
        public int sub() {
            return Wire.STORE_DETACH;
        }

        @Override
        public void writeTo(ByteBuf out) {
            out.writeByte(Wire.STORE_DETACH);
        }
    }

    /**
     * STORE ATTACH: {@code 2 name:string n:u32 n × (key:string value:string)}. Opens store {@code name} with the
     * daemon's settings and these over them, and attaches it.
     *
     * @param name     the store's name ({@code file}, {@code rocksdb}, ...)
     * @param settings settings over the daemon's, in order; the daemon reads at most {@link #MAX_SETTINGS}
     */
    record StoreAttach(String name, Map<String, String> settings) implements Store {
        /** The most settings the daemon reads from an ATTACH: more make it ERROR MALFORMED. */
        public static final int MAX_SETTINGS = 1024;

        public StoreAttach {
            Checks.checkNotNull(name, "name");
            settings = Collections.unmodifiableMap(new LinkedHashMap<>(settings));
        }

        static StoreAttach read(ByteBuf in) {
            String name = Codec.readString(in);
            int n = Codec.readCount(in, 4, MAX_SETTINGS);
            Map<String, String> settings = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
                settings.put(Codec.readString(in), Codec.readString(in));
            }
            return new StoreAttach(name, settings);
        }

        @Override
        public int sub() {
            return Wire.STORE_ATTACH;
        }

        @Override
        public void writeTo(ByteBuf out) {
            out.writeByte(Wire.STORE_ATTACH);
            Codec.writeString(out, name);
            out.writeInt(settings.size());
            settings.forEach((key, value) -> {
                Codec.writeString(out, key);
                Codec.writeString(out, value);
            });
        }
    }
}
