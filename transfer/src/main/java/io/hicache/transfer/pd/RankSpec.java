package io.hicache.transfer.pd;

import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.page.AttentionKind;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import io.hicache.transfer.LocalRegion;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What a prefill or decode rank tells its peers about its KV: the whole model's geometry, the page size, its place in
 * tensor parallelism, its KV pool (region {@code kv}, laid out as {@link DeviceLayout} says, {@code kvPages} pages of
 * its own heads) and its aux slots (region {@code aux}), and the address of its transfer engine. Immutable.
 *
 * <p>A rank whose pool no transport reaches (a CUDA pool) stages: {@code stagingSlots} is then the size of its staging
 * area (region {@code staging}, {@link io.hicache.transfer.staged.StagingArea}), and peers write into that instead of
 * the pool; 0 for a rank whose pool is registered itself as region {@code kv}. A staged rank whose engine has a
 * transport that moves device memory (e.g. {@code cuda-ipc}) also registers its pool as the device region {@code kv}
 * ({@code deviceKv}): a peer with a linked device transport writes straight into it, device to device, and only peers
 * without one stage.
 */
public record RankSpec(
        KvGeometry model,
        int pageSizeTokens,
        int tpSize,
        int tpRank,
        int kvPages,
        int auxSlots,
        int auxSlotBytes,
        String engineAddress,
        int stagingSlots,
        boolean deviceKv) {
    public static final String KV_REGION = "kv";
    public static final String AUX_REGION = "aux";
    public static final String STAGING_REGION = "staging";

    /** A rank whose pool is registered itself (no staging). */
    public RankSpec(
            KvGeometry model,
            int pageSizeTokens,
            int tpSize,
            int tpRank,
            int kvPages,
            int auxSlots,
            int auxSlotBytes,
            String engineAddress) {
        this(model, pageSizeTokens, tpSize, tpRank, kvPages, auxSlots, auxSlotBytes, engineAddress, 0, false);
    }

    public RankSpec {
        if (tpSize < 1 || tpRank < 0 || tpRank >= tpSize) {
            throw new IllegalArgumentException("tp rank " + tpRank + " of size " + tpSize + " is not valid");
        }
        if (kvPages < 1 || auxSlots < 1 || auxSlotBytes < 1 || pageSizeTokens < 1) {
            throw new IllegalArgumentException("kvPages, auxSlots, auxSlotBytes and pageSizeTokens must be >= 1");
        }
        if (stagingSlots < 0) {
            throw new IllegalArgumentException("stagingSlots must be >= 0, got " + stagingSlots);
        }
        if (deviceKv && stagingSlots == 0) {
            throw new IllegalArgumentException(
                    "only a staged rank (a device pool) registers its pool as device memory");
        }
        model.perRank(tpSize); // refuses head counts that do not split
    }

    /**
     * Checks that {@code region} is the one a rank registers as {@code name} and holds at least {@code bytes}.
     *
     * @throws IllegalArgumentException when it is not
     */
    static void checkRegion(LocalRegion region, String name, long bytes) {
        if (!region.name().equals(name) || region.memory().byteSize() < bytes) {
            throw new IllegalArgumentException(
                    "expected region '" + name + "' of at least " + bytes + " bytes, got " + region);
        }
    }

    /** The page format of this rank's pool (its share of the heads). */
    public PageFormat format() {
        return new PageFormat(model.perRank(tpSize), pageSizeTokens, HostLayout.LAYER_FIRST);
    }

    /** This spec for a rank that stages through {@code slots} staging pages. */
    public RankSpec withStaging(int slots) {
        return new RankSpec(
                model,
                pageSizeTokens,
                tpSize,
                tpRank,
                kvPages,
                auxSlots,
                auxSlotBytes,
                engineAddress,
                slots,
                deviceKv && slots > 0);
    }

    /** This spec for a staged rank whose pool is ({@code true}) or is not registered as the device region kv. */
    public RankSpec withDeviceKv(boolean registered) {
        return new RankSpec(
                model,
                pageSizeTokens,
                tpSize,
                tpRank,
                kvPages,
                auxSlots,
                auxSlotBytes,
                engineAddress,
                stagingSlots,
                registered);
    }

    /** Whether the rank's pages pass through a staging area. */
    public boolean staged() {
        return stagingSlots > 0;
    }

    /** Index of the first KV head this rank holds (heads are replicated when there are fewer heads than ranks). */
    public int firstHead() {
        if (model.attention() == AttentionKind.MLA) {
            return 0;
        }
        int perRank = model.perRank(tpSize).kvHeads();
        return model.kvHeads() >= tpSize ? tpRank * perRank : tpRank / (tpSize / model.kvHeads());
    }

    /** KV heads this rank holds. */
    public int heads() {
        return model.perRank(tpSize).kvHeads();
    }

    /** Bytes of the KV region. */
    public long kvBytes() {
        return DeviceLayout.poolBytes(format(), kvPages);
    }

    /** Bytes of the aux region. */
    public long auxBytes() {
        return (long) auxSlots * auxSlotBytes;
    }

    /** The text form used by the bootstrap server and in messages. */
    public String encode() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("attention", model.attention().name());
        m.put("layers", Integer.toString(model.layers()));
        m.put("heads", Integer.toString(model.kvHeads()));
        m.put("dim", Integer.toString(model.headDim()));
        m.put("dtype", model.dtype().name());
        m.put("page", Integer.toString(pageSizeTokens));
        m.put("tp", Integer.toString(tpSize));
        m.put("rank", Integer.toString(tpRank));
        m.put("pages", Integer.toString(kvPages));
        m.put("auxSlots", Integer.toString(auxSlots));
        m.put("auxBytes", Integer.toString(auxSlotBytes));
        m.put("address", engineAddress);
        m.put("staging", Integer.toString(stagingSlots));
        m.put("device", Boolean.toString(deviceKv));
        StringBuilder b = new StringBuilder();
        m.forEach(
                (k, v) -> b.append(b.isEmpty() ? "" : ";").append(k).append('=').append(v));
        return b.toString();
    }

    /**
     * Parses {@link #encode()}'s form.
     *
     * @throws IllegalArgumentException when a field is missing or malformed
     */
    public static RankSpec decode(String text) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String part : text.trim().split(";")) {
            int eq = part.indexOf('=');
            if (eq > 0) {
                m.put(part.substring(0, eq), part.substring(eq + 1));
            }
        }
        try {
            // a missing name fails as a missing address does (valueOf would throw a bare NullPointerException)
            KvGeometry g = new KvGeometry(
                    AttentionKind.valueOf(Objects.requireNonNull(m.get("attention"), "attention")),
                    i(m, "layers"),
                    i(m, "heads"),
                    i(m, "dim"),
                    KvDtype.valueOf(Objects.requireNonNull(m.get("dtype"), "dtype")));
            return new RankSpec(
                    g,
                    i(m, "page"),
                    i(m, "tp"),
                    i(m, "rank"),
                    i(m, "pages"),
                    i(m, "auxSlots"),
                    i(m, "auxBytes"),
                    Objects.requireNonNull(m.get("address"), "address"),
                    m.containsKey("staging") ? i(m, "staging") : 0,
                    Boolean.parseBoolean(m.get("device")));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("not a rank spec: '" + text + "': " + e.getMessage(), e);
        }
    }

    private static int i(Map<String, String> m, String key) {
        String v = m.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key);
        }
        return Integer.parseInt(v);
    }

    /**
     * Why a decode rank with this spec cannot take KV from {@code prefill}, or null when it can: the model geometry
     * (which includes the KV dtype) and the page size must be the same, and both sides stage or neither does. Staged
     * ranks that go through their staging areas ({@code deviceToDevice} false) also need the same TP size, MLA aside;
     * device-to-device writes split heads as host writes do.
     */
    public @Nullable String incompatibility(RankSpec prefill, boolean deviceToDevice) {
        if (pageSizeTokens != prefill.pageSizeTokens) {
            return "page size differs: prefill " + prefill.pageSizeTokens + " tokens, decode " + pageSizeTokens;
        }
        if (model.dtype() != prefill.model.dtype()) {
            return "KV dtype differs: prefill " + prefill.model.dtype() + ", decode " + model.dtype();
        }
        if (!model.equals(prefill.model)) {
            return "model geometry differs: prefill " + prefill.model + ", decode " + model;
        }
        if (staged() != prefill.staged()) {
            return "only the " + (staged() ? "decode" : "prefill") + " stages its pages through host memory (a device"
                    + " pool no transport reaches): both sides must, or neither";
        }
        if (staged() && !deviceToDevice && model.attention() != AttentionKind.MLA && tpSize != prefill.tpSize) {
            return "staged handoffs move whole rows: prefill TP " + prefill.tpSize + " and decode TP " + tpSize
                    + " split the KV heads differently (no device transport links the two ranks)";
        }
        return null;
    }
}
