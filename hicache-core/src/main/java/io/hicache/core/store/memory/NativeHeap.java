package io.hicache.core.store.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * Blocks of off-heap memory freed one by one, from libc's {@code aligned_alloc} and {@code free}: a shared
 * {@link Arena} per block costs a handshake with every thread when it closes (600k small pages took 15 s to free).
 * Where libc cannot be linked, each block falls back to its own shared arena.
 *
 * <p>Thread-safe. The caller frees each block exactly once and does not touch it after.
 */
final class NativeHeap {
    private static final long ALIGNMENT = 64;
    private static final Optional<MethodHandle[]> CALLS = link();

    private NativeHeap() {}

    // Calling libc is the point of this class; the JVM runs with --enable-native-access (see the parent POM).
    @SuppressWarnings("restricted")
    private static Optional<MethodHandle[]> link() {
        try {
            Linker linker = Linker.nativeLinker();
            var libc = linker.defaultLookup();
            MethodHandle alloc = linker.downcallHandle(
                    libc.find("aligned_alloc").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
            MethodHandle free = linker.downcallHandle(
                    libc.find("free").orElseThrow(), FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
            return Optional.of(new MethodHandle[] {alloc, free});
        } catch (RuntimeException | LinkageError e) {
            return Optional.empty();
        }
    }

    /** A block of {@code bytes}, 64-byte aligned. */
    record Block(MemorySegment bytes, @Nullable Arena arena) {
        /** Gives the memory back. */
        void free() {
            if (arena != null) {
                arena.close();
                return;
            }
            try {
                CALLS.orElseThrow()[1].invokeExact(bytes);
            } catch (Throwable t) {
                throw new IllegalStateException("free failed", t);
            }
        }
    }

    @SuppressWarnings("restricted")
    static Block allocate(long bytes) {
        if (CALLS.isEmpty()) {
            Arena arena = Arena.ofShared();
            return new Block(arena.allocate(bytes, ALIGNMENT), arena);
        }
        long rounded =
                Math.max(ALIGNMENT, (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT); // aligned_alloc wants a multiple
        MemorySegment raw;
        try {
            raw = (MemorySegment) CALLS.get()[0].invokeExact(ALIGNMENT, rounded);
        } catch (Throwable t) {
            throw new IllegalStateException("aligned_alloc failed", t);
        }
        if (raw.equals(MemorySegment.NULL)) {
            throw new OutOfMemoryError("aligned_alloc of " + rounded + " bytes failed");
        }
        return new Block(raw.reinterpret(bytes), null);
    }
}
