package io.hicache.core.memory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Reserves a file's blocks with {@code posix_fallocate(3)}, through FFM. A sparse slab on tmpfs takes memory
 * only as pages are first written; if the tmpfs fills up meanwhile, that write kills the process with SIGBUS.
 * Reserving the whole slab when it is created turns that into a clear error at start-up. Stateless.
 */
final class Fallocate {
    private static final int O_RDWR = 2;
    private static final Optional<MethodHandle[]> CALLS = link();

    private Fallocate() {}

    // Calling libc is the point of this class; the JVM runs with --enable-native-access (see the parent POM).
    @SuppressWarnings("restricted")
    private static Optional<MethodHandle[]> link() {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            MethodHandle open = linker.downcallHandle(
                    libc.find("open").orElseThrow(),
                    FunctionDescriptor.of(
                            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
                    Linker.Option.firstVariadicArg(2));
            MethodHandle fallocate = linker.downcallHandle(
                    libc.find("posix_fallocate").orElseThrow(),
                    FunctionDescriptor.of(
                            ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
            MethodHandle close = linker.downcallHandle(
                    libc.find("close").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
            return Optional.of(new MethodHandle[] {open, fallocate, close});
        } catch (RuntimeException | LinkageError e) {
            return Optional.empty();
        }
    }

    /** True when this platform can reserve file blocks. */
    static boolean available() {
        return CALLS.isPresent();
    }

    /**
     * Reserves {@code bytes} of {@code file} (which must exist).
     *
     * @throws IOException naming the error (ENOSPC when the file system is full)
     */
    static void reserve(Path file, long bytes) throws IOException {
        MethodHandle[] calls = CALLS.orElseThrow(() -> new IOException("posix_fallocate is not available here"));
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) calls[0].invokeExact(arena.allocateFrom(file.toString()), O_RDWR, 0);
            if (fd < 0) {
                throw new IOException("cannot open " + file + " to reserve its space");
            }
            try {
                int error = (int) calls[1].invokeExact(fd, 0L, bytes);
                if (error != 0) {
                    throw new IOException("posix_fallocate of " + bytes + " bytes for " + file + " failed with errno "
                            + error + (error == 28 ? " (no space left on the file system)" : ""));
                }
            } finally {
                int ignored = (int) calls[2].invokeExact(fd);
            }
        } catch (IOException e) {
            throw e;
        } catch (Throwable t) {
            throw new IOException("posix_fallocate call failed: " + t, t);
        }
    }
}
