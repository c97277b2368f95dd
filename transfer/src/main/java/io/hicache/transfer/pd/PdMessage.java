package io.hicache.transfer.pd;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * A control message between a decode rank and a prefill rank, carried by the transfer engine's messages: a type and
 * {@code key=value} lines. Immutable.
 *
 * <ul>
 *   <li>{@code INFO} decode to prefill: {@code room}, {@code spec} (the decode rank), {@code pages} (destination
 *       page per page position), {@code aux} (slot), {@code prefix} (leading pages decode already holds),
 *       {@code dummy} (this prefill rank sends nothing for the room), {@code path} (how the pages go: {@code direct}
 *       into the pool's host-visible region, {@code staged} through both staging areas into {@code staging}, the
 *       decode's staging slots, or {@code device} into the pool's device region over a device transport).
 *   <li>{@code LAYER} prefill to decode, staged rooms: {@code room}, {@code rank}, {@code from}, {@code count},
 *       {@code layer}: that layer of those pages is in the decode's staging slots.
 *   <li>{@code STATUS} prefill to decode: {@code room}, {@code rank}, {@code state} (TRANSFERRING, SUCCESS,
 *       FAILED), {@code reason}.
 *   <li>{@code ABORT} decode to prefill: {@code room}. {@code ABORT_ACK} back: {@code room}, {@code rank}, sent once
 *       no write of the room is in flight any more.
 * </ul>
 */
record PdMessage(String type, Map<String, String> fields) {
    static final String PATH_DIRECT = "direct";
    static final String PATH_STAGED = "staged";
    static final String PATH_DEVICE = "device";

    static PdMessage of(String type, String... keyValues) {
        Map<String, String> f = new LinkedHashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            f.put(keyValues[i], keyValues[i + 1]);
        }
        return new PdMessage(type, f);
    }

    String get(String key) {
        String v = fields.get(key);
        if (v == null) {
            throw new IllegalArgumentException(type + " message without " + key);
        }
        return v;
    }

    long room() {
        return Long.parseLong(get("room"));
    }

    byte[] encode() {
        StringBuilder b = new StringBuilder(type);
        fields.forEach((k, v) -> b.append('\n').append(k).append('=').append(v.replace('\n', ' ')));
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    static PdMessage decode(byte[] bytes) {
        String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n");
        Map<String, String> f = new LinkedHashMap<>();
        for (int i = 1; i < lines.length; i++) {
            int eq = lines[i].indexOf('=');
            if (eq > 0) {
                f.put(lines[i].substring(0, eq), lines[i].substring(eq + 1));
            }
        }
        return new PdMessage(lines[0], f);
    }

    static String ints(int[] values) {
        return Arrays.stream(values).mapToObj(Integer::toString).collect(Collectors.joining(","));
    }

    static int[] ints(String text) {
        return text.isEmpty() ? new int[0] : Arrays.stream(text.split(",")).mapToInt(Integer::parseInt).toArray();
    }
}
