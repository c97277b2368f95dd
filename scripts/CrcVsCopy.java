import java.lang.foreign.*;
import java.util.zip.CRC32C;
/**
 * CRC-32C against a plain copy of the same 256 MiB, one core: what checking a page on a load-back costs (docs/keys.md);
 * then CRC-32C over one 64 KiB / 256 KiB / 1 MiB buffer again and again, as over bytes still in cache right after they
 * arrived (what the daemon's PUT lander checks, docs/benchmarks.md). Run: java scripts/CrcVsCopy.java
 */
public class CrcVsCopy {
  public static void main(String[] a) {
    long n = 256L << 20;
    try (Arena ar = Arena.ofConfined()) {
      MemorySegment src = ar.allocate(n, 64), dst = ar.allocate(n, 64);
      for (long i = 0; i < n; i += 8) src.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
      for (int r = 0; r < 8; r++) {
        long t0 = System.nanoTime();
        CRC32C c = new CRC32C();
        for (long off = 0; off < n; off += 1 << 20) c.update(src.asSlice(off, 1 << 20).asByteBuffer());
        long t1 = System.nanoTime();
        MemorySegment.copy(src, 0, dst, 0, n);
        long t2 = System.nanoTime();
        if (r >= 3) System.out.printf("out of memory: crc32c %.1f GB/s  copy %.1f GB/s%n", n / (double) (t1 - t0), n / (double) (t2 - t1));
      }
      for (long chunk : new long[] {64 << 10, 256 << 10, 1 << 20}) {
        MemorySegment hot = src.asSlice(0, chunk);
        double best = 0;
        for (int r = 0; r < 8; r++) {
          long t0 = System.nanoTime();
          CRC32C c = new CRC32C();
          for (long done = 0; done < n; done += chunk) c.update(hot.asByteBuffer());
          best = Math.max(best, n / (double) (System.nanoTime() - t0));
        }
        System.out.printf("in cache, %4d KiB again and again: crc32c %.1f GB/s (best of 8)%n", chunk >> 10, best);
      }
    }
  }
}
