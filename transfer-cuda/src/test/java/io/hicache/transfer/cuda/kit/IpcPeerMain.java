package io.hicache.transfer.cuda.kit;

import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.kit.TransferPatterns;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * The exporting peer of the cuda-ipc kit and bench, in a child JVM: a transfer engine ({@code cuda-ipc} then
 * {@code shm}) with a device region {@code kv} of the given bytes on the given device, filled with
 * {@link TransferPatterns#fill} of the seed, and a small shared host region {@code aux}. Prints
 * {@code ready <address>}, then answers commands read from standard input, one per line:
 * {@code crc OFFSET LENGTH} (prints {@code crc <value>}: CRC-32C of that range of kv, read back from the device),
 * {@code unregister} (closes kv; prints {@code unregistered <ms>}, how long the close took),
 * {@code inbound NAME} (prints {@code inbound <n>}: connections the engine NAME holds here). Exits when its input
 * closes. Arguments: shared-memory folder, kv bytes, seed, device ordinal.
 */
public final class IpcPeerMain {
    private IpcPeerMain() {}

    public static void main(String[] args) throws Exception {
        Path shmDir = Path.of(args[0]);
        long bytes = Long.parseLong(args[1]);
        long seed = Long.parseLong(args[2]);
        int ordinal = Integer.parseInt(args[3]);
        TransferConfig config = TransferConfig.defaults("ipc-peer")
                .withTransports(List.of("cuda-ipc", "shm"))
                .withShmDir(shmDir)
                .withTimeouts(2_000, 1_000, 500);
        try (DeviceBuffer kv = DeviceBuffer.allocate(ordinal, bytes);
                TransferEngine engine = TransferEngine.open(config)) {
            fill(kv, seed);
            LocalRegion region = engine.registerDevice("kv", kv.address(), bytes);
            engine.registerShared("aux", 4096);
            System.out.println("ready " + engine.address());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] cmd = line.trim().split(" ");
                switch (cmd[0]) {
                    case "crc" -> System.out.println("crc " + crc(kv, Long.parseLong(cmd[1]), Long.parseLong(cmd[2])));
                    case "unregister" -> {
                        long t0 = System.nanoTime();
                        region.close();
                        System.out.println("unregistered " + (System.nanoTime() - t0) / 1_000_000);
                    }
                    case "inbound" -> System.out.println("inbound " + engine.inboundConnections(cmd[1]));
                    default -> System.out.println("unknown " + line);
                }
                System.out.flush();
            }
        }
    }

    /** Fills the whole buffer with {@link TransferPatterns#fill} of {@code seed}, through host memory. */
    public static void fill(DeviceBuffer buffer, long seed) {
        long chunk = Math.min(buffer.bytes(), 256L << 20);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment staging = arena.allocate(chunk, 4096);
            for (long off = 0; off < buffer.bytes(); off += chunk) {
                long n = Math.min(chunk, buffer.bytes() - off);
                for (long w = 0; w < n; w += 8) {
                    staging.set(ValueLayout.JAVA_LONG_UNALIGNED, w, TransferPatterns.word(seed, off + w));
                }
                buffer.upload(staging.asSlice(0, n), off);
            }
        }
    }

    /** CRC-32C of [offset, offset + length) of the device buffer. */
    public static long crc(DeviceBuffer buffer, long offset, long length) {
        CRC32C crc = new CRC32C();
        long chunk = Math.max(1, Math.min(length, 256L << 20));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(chunk, 4096);
            for (long off = 0; off < length; off += chunk) {
                long n = Math.min(chunk, length - off);
                buffer.download(host.asSlice(0, n), offset + off);
                crc.update(host.asSlice(0, n).asByteBuffer());
            }
        }
        return crc.getValue();
    }

    /** CRC-32C of host memory, to compare with {@link #crc(DeviceBuffer, long, long)}. */
    public static long crc(MemorySegment host) {
        CRC32C crc = new CRC32C();
        long chunk = 256L << 20; // a ByteBuffer holds at most 2 GiB
        for (long off = 0; off < host.byteSize(); off += chunk) {
            crc.update(host.asSlice(off, Math.min(chunk, host.byteSize() - off)).asByteBuffer());
        }
        return crc.getValue();
    }
}
