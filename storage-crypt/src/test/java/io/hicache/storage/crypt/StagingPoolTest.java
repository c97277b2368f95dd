package io.hicache.storage.crypt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** Staging buffers are reused, best fit first, kept up to the bound, and freed at close. */
class StagingPoolTest {
    @Test
    void buffersAreReusedUpToTheBound() {
        try (StagingPool pool = new StagingPool(3L << 20)) {
            StagingPool.Buffer small = pool.take(100);
            StagingPool.Buffer big = pool.take((2L << 20) + 1);
            assertEquals(64 * 1024, small.capacity(), "in multiples of 64 KiB");
            assertEquals((2L << 20) + 64 * 1024, big.capacity());
            assertEquals(0, small.memory().address() % 4096, "4 KiB-aligned");
            pool.giveBack(big);
            pool.giveBack(small);
            assertEquals((2L << 20) + 128 * 1024, pool.freeBytes());
            assertSame(small, pool.take(4096), "the smallest that fits");
            assertSame(big, pool.take(1 << 20));
            StagingPool.Buffer other = pool.take(2L << 20);
            pool.giveBack(big);
            pool.giveBack(other); // past the bound: freed
            assertEquals(big.capacity(), pool.freeBytes());
            MemorySegment freed = other.memory();
            assertThrows(IllegalStateException.class, () -> freed.get(ValueLayout.JAVA_BYTE, 0));
        }
    }

    @Test
    void closeFreesWhatIsKeptAndWhatComesBackLater() {
        StagingPool pool = new StagingPool(1L << 30);
        StagingPool.Buffer kept = pool.take(1000);
        StagingPool.Buffer onLoan = pool.take(1000);
        pool.giveBack(kept);
        pool.close();
        assertThrows(IllegalStateException.class, () -> kept.memory().get(ValueLayout.JAVA_BYTE, 0));
        onLoan.memory().set(ValueLayout.JAVA_BYTE, 0, (byte) 1); // still usable until given back
        pool.giveBack(onLoan);
        assertThrows(IllegalStateException.class, () -> onLoan.memory().get(ValueLayout.JAVA_BYTE, 0));
        assertEquals(0, pool.freeBytes());
        assertTrue(pool.take(10).capacity() > 0, "a closed pool still lends (calls in flight at close)");
    }
}
