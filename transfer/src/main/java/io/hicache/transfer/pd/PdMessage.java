package io.hicache.transfer.pd;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The messages between a decode rank and a prefill rank, carried by the transfer engine's messages
 * ({@link io.hicache.transfer.RemoteSegment#send}): one record per kind. On the wire each is its kind's name and one
 * {@code key=value} line per field (text, so a captured message reads as what it says). Immutable.
 *
 * <ul>
 *   <li>{@link Info} decode to prefill: where the decode rank wants the room's KV and by which path.
 *   <li>{@link Layer} prefill to decode, staged rooms: a layer of some pages is in the decode's staging slots.
 *   <li>{@link Status} prefill to decode: the prefill rank's state of the room.
 *   <li>{@link Abort} decode to prefill, and {@link AbortAck} back once no write of the room is in flight any more.
 * </ul>
 * {@link Destination} is what INFO carries: a room's destination, which the decode rank keeps as well.
 */
sealed interface PdMessage {
    /** The room the message is about. */
    long room();

    /** The bytes on the wire. */
    byte[] encode();

    /**
     * Where a decode rank wants one room's KV, as its INFO carries it: page {@code pages[i]} of its pool receives page
     * position {@code i} of the request, aux slot {@code auxSlot} the aux data, and the first {@code prefixPages}
     * positions it holds already (they are not sent). Immutable: the pages are copied in and out; equal when the
     * contents are.
     *
     * @param pages       the decode's pool page of every page position of the request
     * @param auxSlot     the decode's aux slot for the request's aux data
     * @param prefixPages leading positions the decode already holds
     */
    record Destination(int[] pages, int auxSlot, int prefixPages) {
        public Destination {
            if (auxSlot < 0) {
                throw new IllegalArgumentException("aux slot " + auxSlot + " is negative");
            }
            if (prefixPages < 0 || prefixPages > pages.length) {
                throw new IllegalArgumentException(
                        "prefix of " + prefixPages + " pages for " + pages.length + " pages");
            }
            pages = pages.clone();
        }

        /** A copy of the pages. */
        @Override
        public int[] pages() {
            return pages.clone();
        }

        /** Page positions of the request. */
        int positions() {
            return pages.length;
        }

        /** Pages the prefill sends: positions {@code [prefixPages, positions())}. */
        int wanted() {
            return pages.length - prefixPages;
        }

        /** The decode's pages of positions {@code [from, from + count)}. */
        int[] pages(int from, int count) {
            return Arrays.copyOfRange(pages, from, from + count);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Destination d
                    && Arrays.equals(pages, d.pages)
                    && auxSlot == d.auxSlot
                    && prefixPages == d.prefixPages;
        }

        @Override
        public int hashCode() {
            return (Arrays.hashCode(pages) * 31 + auxSlot) * 31 + prefixPages;
        }

        @Override
        public String toString() {
            return "Destination[pages=" + Arrays.toString(pages) + ", auxSlot=" + auxSlot + ", prefixPages="
                    + prefixPages + "]";
        }
    }

    /**
     * Where decode rank {@code decode} wants room {@code room}'s KV, and how the pages go ({@code path}); {@code dummy}
     * when this prefill rank sends nothing for it (MLA: another rank sends the whole latent); {@code stagingSlots}, for
     * the staged path, the decode's staging slots of positions {@code [prefixPages, pages)} (else empty).
     */
    record Info(
            long room,
            RankSpec decode,
            Destination destination,
            boolean dummy,
            DeliveryPath.Kind path,
            int[] stagingSlots)
            implements PdMessage {
        public Info {
            stagingSlots = stagingSlots.clone();
        }

        @Override
        public int[] stagingSlots() {
            return stagingSlots.clone();
        }

        @Override
        public byte[] encode() {
            return new Text("INFO")
                    .put("room", room)
                    .put("spec", decode.encode())
                    .put("pages", destination.pages())
                    .put("aux", destination.auxSlot())
                    .put("prefix", destination.prefixPages())
                    .put("dummy", dummy)
                    .put("path", path.wireName())
                    .put("staging", stagingSlots)
                    .bytes();
        }
    }

    /** Layer {@code layer} of positions {@code [from, from + count)}, from prefill rank {@code rank}, is staged. */
    record Layer(long room, int rank, int from, int count, int layer) implements PdMessage {
        @Override
        public byte[] encode() {
            return new Text("LAYER")
                    .put("room", room)
                    .put("rank", rank)
                    .put("from", from)
                    .put("count", count)
                    .put("layer", layer)
                    .bytes();
        }
    }

    /** Prefill rank {@code rank}'s state of the room: TRANSFERRING, SUCCESS, or FAILED with {@code reason}. */
    record Status(long room, int rank, KvPoll state, String reason) implements PdMessage {
        @Override
        public byte[] encode() {
            return new Text("STATUS")
                    .put("room", room)
                    .put("rank", rank)
                    .put("state", state.name())
                    .put("reason", reason)
                    .bytes();
        }
    }

    /** The decode gives the room up; prefill ranks answer {@code from} (its engine address) once they drained. */
    record Abort(long room, String from) implements PdMessage {
        @Override
        public byte[] encode() {
            return new Text("ABORT").put("room", room).put("from", from).bytes();
        }
    }

    /** Prefill rank {@code rank} has no write of the room in flight any more, and starts none. */
    record AbortAck(long room, int rank) implements PdMessage {
        @Override
        public byte[] encode() {
            return new Text("ABORT_ACK").put("room", room).put("rank", rank).bytes();
        }
    }

    /**
     * The message {@code bytes} encode.
     *
     * @throws IllegalArgumentException for an unknown kind, or a field missing or malformed
     */
    static PdMessage decode(byte[] bytes) {
        Text t = Text.parse(bytes);
        try {
            return switch (t.kind) {
                case "INFO" ->
                    new Info(
                            t.room(),
                            RankSpec.decode(t.get("spec")),
                            new Destination(t.ints("pages"), t.integer("aux"), t.integer("prefix")),
                            Boolean.parseBoolean(t.get("dummy")),
                            DeliveryPath.Kind.named(t.get("path")),
                            t.ints("staging"));
                case "LAYER" ->
                    new Layer(t.room(), t.integer("rank"), t.integer("from"), t.integer("count"), t.integer("layer"));
                case "STATUS" ->
                    new Status(t.room(), t.integer("rank"), KvPoll.valueOf(t.get("state")), t.get("reason"));
                case "ABORT" -> new Abort(t.room(), t.get("from"));
                case "ABORT_ACK" -> new AbortAck(t.room(), t.integer("rank"));
                default -> throw new IllegalArgumentException("unknown PD message kind '" + t.kind + "'");
            };
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("malformed " + t.kind + " message: " + e.getMessage(), e);
        }
    }

    /** The text form: the kind on the first line, then {@code key=value} lines (values on one line). */
    final class Text {
        private final String kind;
        private final Map<String, String> fields = new LinkedHashMap<>();

        private Text(String kind) {
            this.kind = kind;
        }

        private Text put(String key, Object value) {
            fields.put(key, String.valueOf(value).replace('\n', ' '));
            return this;
        }

        private Text put(String key, int[] values) {
            return put(key, Arrays.stream(values).mapToObj(Integer::toString).collect(Collectors.joining(",")));
        }

        private byte[] bytes() {
            StringBuilder b = new StringBuilder(kind);
            fields.forEach((k, v) -> b.append('\n').append(k).append('=').append(v));
            return b.toString().getBytes(StandardCharsets.UTF_8);
        }

        private static Text parse(byte[] bytes) {
            String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n");
            Text t = new Text(lines[0]);
            for (int i = 1; i < lines.length; i++) {
                int eq = lines[i].indexOf('=');
                if (eq > 0) {
                    t.fields.put(lines[i].substring(0, eq), lines[i].substring(eq + 1));
                }
            }
            return t;
        }

        private String get(String key) {
            String v = fields.get(key);
            if (v == null) {
                throw new IllegalArgumentException(kind + " message without " + key);
            }
            return v;
        }

        private long room() {
            return Long.parseLong(get("room"));
        }

        private int integer(String key) {
            return Integer.parseInt(get(key));
        }

        private int[] ints(String key) {
            String text = get(key);
            return text.isEmpty()
                    ? new int[0]
                    : Arrays.stream(text.split(",")).mapToInt(Integer::parseInt).toArray();
        }
    }
}
