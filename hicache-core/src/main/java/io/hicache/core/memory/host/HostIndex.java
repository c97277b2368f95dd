package io.hicache.core.memory.host;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.PageRecordDescriptor;
import io.hicache.core.key.StoreKey;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import net.openhft.chronicle.map.ChronicleMap;
import net.openhft.chronicle.map.ChronicleMapBuilder;

/**
 * The host pool's persistent index: store key to slot, in a Chronicle Map file next to the slab, so a restarted
 * process finds its pages again. An entry is written once, when a write claims the key; whether the page is ready,
 * and its checksum, are the slot journal's (and the pool's slot states'), so committing a page touches no map.
 *
 * <pre>
 * key   (48 bytes): namespace id (16) | page hash (32)
 * value (16 bytes): version (1) | state (1) | unused (2) | slot (4, LE) | CRC-32C (4, LE) | unused (4)
 * </pre>
 *
 * The state is WRITING as claimed (CRC-32C 0), or READY with the page's checksum where a reopen re-entered a page
 * the journal holds (and in files from before commits stopped updating the index); readers go by the journal.
 *
 * The map is sized to one entry per slot and never grows past it, which keeps Chronicle's crash recovery
 * within the case it handles (recovering a map that outgrew its configured size loses entries).
 *
 * <p>Thread-safe (Chronicle Map is). Owns the map file's mapping; {@link #close()} releases it.
 */
final class HostIndex implements AutoCloseable {
    static final int KEY_BYTES = PageRecordDescriptor.KEY_LENGTH;
    static final int VALUE_BYTES = 16;
    private static final byte VERSION = 1;
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final ThreadLocal<byte[]> VALUE_BUFFER = ThreadLocal.withInitial(() -> new byte[VALUE_BYTES]);

    /**
     * What Chronicle Map reaches into the JDK for, as JVM flags: without them it fails deep inside with an
     * InaccessibleObjectException or IllegalAccessError. Chronicle's run-time javac (and the jdk.compiler export it
     * needed) is gone: the value class it would compile ships in this jar (src/build/ChronicleValueClasses.java).
     */
    static final List<String> REQUIRED_JVM_FLAGS = List.of(
            "--add-opens=java.base/java.lang=ALL-UNNAMED",
            "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED");

    static {
        // Chronicle's usage analytics and start-up announcement stay off unless the embedder asked for them: HiCache
        // sends nothing to any address it was not given, and that should not depend on two -D flags.
        if (System.getProperty("chronicle.analytics.disable") == null) {
            System.setProperty("chronicle.analytics.disable", "true");
        }
        if (System.getProperty("chronicle.announcer.disable") == null) {
            System.setProperty("chronicle.announcer.disable", "true");
        }
    }

    /** One index entry, decoded. */
    record Entry(byte[] key, int state, int slot, int checksum) {}

    private final ChronicleMap<byte[], byte[]> map;

    private HostIndex(ChronicleMap<byte[], byte[]> map) {
        this.map = map;
    }

    private static ChronicleMapBuilder<byte[], byte[]> builder(int entries) {
        return ChronicleMapBuilder.of(byte[].class, byte[].class)
                .name("hicache-host-index")
                .constantKeySizeBySample(new byte[KEY_BYTES])
                .constantValueSizeBySample(new byte[VALUE_BYTES])
                .entries(Math.max(entries, 1024));
    }

    /**
     * Opens the index at {@code file}, creating it if absent. {@code recover} runs Chronicle's recovery, which
     * the previous owner's crash calls for: it releases locks a killed process held and drops entries it left
     * half written.
     */
    static HostIndex open(Path file, int entries, boolean recover) {
        requireJvmFlags();
        try {
            ChronicleMapBuilder<byte[], byte[]> b = builder(entries);
            return new HostIndex(
                    recover ? b.recoverPersistedTo(file.toFile(), true) : b.createPersistedTo(file.toFile()));
        } catch (IOException | RuntimeException e) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE, "cannot open the host pool index " + file + ": " + e, e);
        }
    }

    /**
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_UNAVAILABLE} naming each of {@link #REQUIRED_JVM_FLAGS}
     *     this JVM was started without
     */
    static void requireJvmFlags() {
        List<String> missing = missingJvmFlags();
        if (!missing.isEmpty()) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE,
                    "the host tier's index (Chronicle Map) needs JVM flags this JVM was started without: "
                            + String.join(" ", missing)
                            + "; add them to the java command line (README, 'Embed it')");
        }
    }

    /** Those of {@link #REQUIRED_JVM_FLAGS} this JVM lacks, for Chronicle's module (the class path's, usually). */
    static List<String> missingJvmFlags() {
        Module chronicle = ChronicleMapBuilder.class.getModule();
        Module base = Object.class.getModule();
        List<String> missing = new ArrayList<>();
        if (!base.isOpen("java.lang", chronicle)) {
            missing.add(REQUIRED_JVM_FLAGS.get(0));
        }
        if (!base.isOpen("java.lang.reflect", chronicle)) {
            missing.add(REQUIRED_JVM_FLAGS.get(1));
        }
        if (!base.isExported("sun.nio.ch", chronicle)) {
            missing.add(REQUIRED_JVM_FLAGS.get(2));
        }
        return missing;
    }

    /** The index key of {@code key}. */
    static byte[] key(StoreKey key) {
        return PageRecordDescriptor.keyBytes(key);
    }

    /** Claims {@code key} for a write into {@code slot}; false if the key is already indexed (stored or being written). */
    boolean claimForWrite(byte[] key, int slot) {
        return map.putIfAbsent(key, value(SlotStates.WRITING, slot, 0)) == null;
    }

    /** Enters {@code key} as ready in {@code slot} with the page's checksum: a reopen's repair. */
    void markReady(byte[] key, int slot, int checksum) {
        map.put(key, value(SlotStates.READY, slot, checksum));
    }

    void remove(byte[] key) {
        map.remove(key);
    }

    /** The slot {@code key} was claimed in (ready or still being written: the journal says which), else -1. */
    int slotOf(byte[] key) {
        byte[] value = map.getUsing(key, VALUE_BUFFER.get());
        if (value == null || value[0] != VERSION) {
            return -1;
        }
        return (int) INT_LE.get(value, 4);
    }

    /** Every entry, decoded (a snapshot; entries changed meanwhile may or may not appear). */
    List<Entry> entries() {
        List<Entry> all = new ArrayList<>(map.size());
        for (Map.Entry<byte[], byte[]> e : map.entrySet()) {
            byte[] v = e.getValue();
            boolean known = v.length == VALUE_BYTES && v[0] == VERSION;
            all.add(new Entry(
                    e.getKey(),
                    known ? v[1] : -1,
                    known ? (int) INT_LE.get(v, 4) : -1,
                    known ? (int) INT_LE.get(v, 8) : 0));
        }
        return all;
    }

    int size() {
        return map.size();
    }

    private static byte[] value(int state, int slot, int checksum) {
        byte[] v = new byte[VALUE_BYTES];
        v[0] = VERSION;
        v[1] = (byte) state;
        INT_LE.set(v, 4, slot);
        INT_LE.set(v, 8, checksum);
        return v;
    }

    @Override
    public void close() {
        map.close();
    }
}
