package io.hicache.core.page;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The element type of the KV cache. Part of every page's namespace: pages of one model in two dtypes hold
 * different bytes for the same tokens, and mixing them up gives wrong output (SGLang issue #33268).
 */
public enum KvDtype {
    BFLOAT16("bfloat16", 16, "bf16"),
    FLOAT16("float16", 16, "fp16", "half"),
    FLOAT32("float32", 32, "fp32"),
    FP8_E4M3("fp8_e4m3", 8, "float8_e4m3fn"),
    FP8_E5M2("fp8_e5m2", 8, "float8_e5m2"),
    /** Packed 4-bit floats, two per byte. */
    FP4_E2M1("fp4_e2m1", 4);

    private final String configName;
    private final int bits;
    private final String[] aliases;

    KvDtype(String configName, int bits, String... aliases) {
        this.configName = configName;
        this.bits = bits;
        this.aliases = aliases;
    }

    /** The name used in configuration, namespaces and logs (SGLang's spelling). */
    public String configName() {
        return configName;
    }

    /** Bits per element; 4 for packed FP4. */
    public int bits() {
        return bits;
    }

    /** Parses a configuration name or a common alias ({@code bf16}, {@code fp16}, ...), case-insensitively. */
    public static KvDtype parse(String name) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        for (KvDtype dtype : values()) {
            if (dtype.configName.equals(wanted) || Arrays.asList(dtype.aliases).contains(wanted)) {
                return dtype;
            }
        }
        throw new IllegalArgumentException("unknown KV dtype '" + name + "'; expected one of "
                + Arrays.stream(values()).map(KvDtype::configName).collect(Collectors.joining(", ")));
    }

    @Override
    public String toString() {
        return configName;
    }
}
