package io.hicache.storage.crypt;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Reaches the sealed pages of an encrypted store through its inner store, as someone with access to the storage but
 * not to the keys could: reads them, changes them and writes them back (the inner store keeps its own checksum of what
 * it is given, so only the encrypted store's authentication can notice). Stateless.
 */
final class InnerPages {
    private InnerPages() {}

    /** The sealed bytes of page {@code key} (of {@code pageBytes} in the clear), in memory of {@code arena}. */
    static MemorySegment read(EncryptedPageStore store, StoreKey key, long pageBytes, Arena arena) throws Exception {
        MemorySegment sealed = arena.allocate(SealedPageDescriptor.sealedBytes(pageBytes), 64);
        BatchResult got = await(store.inner().get(PageBatch.of(List.of(key), List.of(sealed)), deadline()));
        if (got.status(0) != PageStatus.OK) {
            throw new IllegalStateException("the inner store did not give page " + key + " of " + pageBytes
                    + " bytes (sealed " + sealed.byteSize() + "): " + got);
        }
        return sealed;
    }

    /** Stores {@code sealed} under {@code key} in the inner store, replacing what is there. */
    static void write(EncryptedPageStore store, StoreKey key, MemorySegment sealed) throws Exception {
        await(store.inner().delete(List.of(key), deadline()));
        BatchResult put = await(store.inner().put(PageBatch.of(List.of(key), List.of(sealed)), deadline()));
        if (!put.allSucceeded()) {
            throw new IllegalStateException("the inner store did not take page " + key + ": " + put);
        }
    }

    /** Flips the byte at {@code offset} of page {@code key}'s sealed bytes, through the inner store. */
    static void flipByte(EncryptedPageStore store, StoreKey key, long pageBytes, long offset) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sealed = read(store, key, pageBytes, arena);
            sealed.set(ValueLayout.JAVA_BYTE, offset, (byte) ~sealed.get(ValueLayout.JAVA_BYTE, offset));
            write(store, key, sealed);
        }
    }

    /** Copies page {@code from}'s sealed bytes under key {@code to}, through the inner store. */
    static void copy(EncryptedPageStore store, StoreKey from, StoreKey to, long pageBytes) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            write(store, to, read(store, from, pageBytes, arena));
        }
    }

    /** The key id in the header of page {@code key}. */
    static String keyId(EncryptedPageStore store, StoreKey key, long pageBytes) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sealed = read(store, key, pageBytes, arena);
            byte[] header = sealed.asSlice(0, SealedPageDescriptor.HEADER_BYTES).toArray(ValueLayout.JAVA_BYTE);
            return SealedPageDescriptor.keyId(header).orElseThrow();
        }
    }

    static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    static <T> T await(java.util.concurrent.CompletableFuture<T> call) throws Exception {
        return call.get(60, TimeUnit.SECONDS);
    }
}
