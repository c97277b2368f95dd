package io.hicache.storage.remote;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntToLongFunction;

/**
 * How the {@code remote} store cuts a batch into requests: the protocol carries one namespace per request, and a
 * request and its answer must each fit the daemon's frame limit. Stateless.
 */
final class Requests {
    /** Frame bytes besides the per-page fields and bodies, at most: length, header, namespace, count. */
    static final int OVERHEAD_BYTES = 4 + Wire.HEADER_BYTES + 3 * (2 + Codec.MAX_STRING_BYTES) + 5 + 4 + 16;

    private Requests() {}

    /**
     * The indices of {@code keys} in requests: grouped by namespace (in order of first appearance), and cut so that
     * {@code perPageBytes} plus each page's {@code bodyBytes} fits {@code maxFrameBytes} per request.
     */
    static List<int[]> byNamespace(
            List<StoreKey> keys, int maxFrameBytes, int perPageBytes, IntToLongFunction bodyBytes) {
        Map<Namespace, List<Integer>> groups = new LinkedHashMap<>();
        for (int i = 0; i < keys.size(); i++) {
            groups.computeIfAbsent(keys.get(i).namespace(), ns -> new ArrayList<>())
                    .add(i);
        }
        List<int[]> out = new ArrayList<>();
        for (List<Integer> group : groups.values()) {
            cut(group, maxFrameBytes, perPageBytes, bodyBytes, out);
        }
        return out;
    }

    /**
     * The indices of {@code keys} in runs of consecutive keys of one namespace, cut to fit the frame limit: for the
     * leading-hit count, which must keep the keys' order.
     */
    static List<int[]> runs(List<StoreKey> keys, int maxFrameBytes) {
        List<int[]> out = new ArrayList<>();
        int start = 0;
        for (int i = 1; i <= keys.size(); i++) {
            if (i == keys.size()
                    || !keys.get(i).namespace().equals(keys.get(start).namespace())) {
                List<Integer> run = new ArrayList<>(i - start);
                for (int j = start; j < i; j++) {
                    run.add(j);
                }
                cut(run, maxFrameBytes, Wire.HASH_BYTES, j -> 0, out);
                start = i;
            }
        }
        return out;
    }

    private static void cut(
            List<Integer> indices, int maxFrameBytes, int perPageBytes, IntToLongFunction bodyBytes, List<int[]> out) {
        long budget = maxFrameBytes - OVERHEAD_BYTES;
        List<Integer> current = new ArrayList<>();
        long used = 0;
        for (int i : indices) {
            long bytes = perPageBytes + bodyBytes.applyAsLong(i);
            if (!current.isEmpty() && used + bytes > budget) {
                out.add(current.stream().mapToInt(Integer::intValue).toArray());
                current.clear();
                used = 0;
            }
            current.add(i);
            used += bytes;
        }
        if (!current.isEmpty()) {
            out.add(current.stream().mapToInt(Integer::intValue).toArray());
        }
    }
}
