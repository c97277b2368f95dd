package io.hicache.server.daemon;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.channel.Channel;
import io.netty.channel.unix.UnixChannel;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * A socket's TCP congestion control ({@code setsockopt(TCP_CONGESTION)}, Linux), through FFM: Netty and the JDK have no
 * option for it. Set on a listening socket, it is what every connection accepted from it uses. Why the daemon offers
 * it: under BBR (a common system default) the kernel paces each connection's sends with a timer even on loopback,
 * where there is nothing to pace for; the daemon's batched answers pay for that (docs/benchmarks.md, server section).
 * Stateless and thread-safe.
 */
final class TcpCongestion {
    private static final int IPPROTO_TCP = 6;
    private static final int TCP_CONGESTION = 13;
    private static final int ENOENT = 2;
    private static final int EPERM = 1;
    /** TCP_CA_NAME_MAX in the kernel. */
    private static final int NAME_MAX = 16;

    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    /** setsockopt and getsockopt; empty where they cannot be linked. */
    private static final Optional<MethodHandle[]> CALLS = link();

    private TcpCongestion() {}

    // Calling libc is the point of this class; the JVM runs with --enable-native-access (see the parent POM).
    @SuppressWarnings("restricted")
    private static Optional<MethodHandle[]> link() {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            Linker.Option errno = Linker.Option.captureCallState("errno");
            return Optional.of(new MethodHandle[] {
                downcall(linker, libc, "setsockopt", ValueLayout.JAVA_INT, errno),
                downcall(linker, libc, "getsockopt", ValueLayout.ADDRESS, errno)
            });
        } catch (RuntimeException | LinkageError e) {
            return Optional.empty(); // no libc to link: calls() says so (elsewhere than Linux, fd() finds no epoll)
        }
    }

    @SuppressWarnings("restricted")
    private static MethodHandle downcall(
            Linker linker, SymbolLookup libc, String name, ValueLayout lengthArg, Linker.Option errno) {
        return linker.downcallHandle(
                libc.find(name).orElseThrow(),
                FunctionDescriptor.of(
                        ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT,
                        ValueLayout.ADDRESS,
                        lengthArg),
                errno);
    }

    /**
     * Makes {@code channel}'s socket (a listener: then every connection it accepts) use {@code algorithm}.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} when the transport has no file descriptor to set it on
     *     (NIO), or the kernel refuses the name (not available, or not allowed to this user), naming the setting
     */
    static void set(Channel channel, String algorithm) {
        int fd = fd(channel);
        try (Arena arena = Arena.ofConfined()) {
            byte[] name = algorithm.getBytes(StandardCharsets.US_ASCII);
            MemorySegment value = arena.allocate(name.length);
            value.copyFrom(MemorySegment.ofArray(name));
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) calls()[0].invokeExact(state, fd, IPPROTO_TCP, TCP_CONGESTION, value, name.length);
            if (rc != 0) {
                int errno = (int) ERRNO.get(state, 0L);
                throw new HiCacheException(ErrorCode.CONFIG_INVALID, refusal(algorithm, errno));
            }
        } catch (HiCacheException e) {
            throw e;
        } catch (Throwable t) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID, "server.tcp-congestion: setsockopt(TCP_CONGESTION) failed: " + t, t);
        }
    }

    /** The congestion control {@code channel}'s socket uses. */
    static String get(Channel channel) {
        int fd = fd(channel);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(NAME_MAX);
            MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, NAME_MAX);
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) calls()[1].invokeExact(state, fd, IPPROTO_TCP, TCP_CONGESTION, value, length);
            if (rc != 0) {
                throw new IllegalStateException("getsockopt(TCP_CONGESTION) failed with errno " + ERRNO.get(state, 0L));
            }
            // The kernel says how many bytes it wrote (its name, NUL-padded); read no further, stop at the first NUL.
            byte[] bytes = value.asSlice(0, Math.min(NAME_MAX, Math.max(0, length.get(ValueLayout.JAVA_INT, 0))))
                    .toArray(ValueLayout.JAVA_BYTE);
            int end = 0;
            while (end < bytes.length && bytes[end] != 0) {
                end++;
            }
            return new String(bytes, 0, end, StandardCharsets.US_ASCII);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("getsockopt(TCP_CONGESTION) failed: " + t, t);
        }
    }

    /** The system's default ({@code net.ipv4.tcp_congestion_control}); empty where it cannot be read. */
    static Optional<String> systemDefault() {
        try {
            return Optional.of(Files.readString(Path.of("/proc/sys/net/ipv4/tcp_congestion_control"))
                    .trim());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static MethodHandle[] calls() {
        return CALLS.orElseThrow(() -> new HiCacheException(
                ErrorCode.CONFIG_INVALID,
                "server.tcp-congestion: this platform has no setsockopt to call (Linux only); leave it empty"));
    }

    private static int fd(Channel channel) {
        calls();
        if (!(channel instanceof UnixChannel unix)) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "server.tcp-congestion needs the epoll transport (server.transport epoll or auto where epoll "
                            + "loads); this daemon runs on "
                            + channel.getClass().getSimpleName());
        }
        return unix.fd().intValue();
    }

    private static String refusal(String algorithm, int errno) {
        String why = switch (errno) {
            case ENOENT ->
                "the kernel has no such congestion control (see "
                        + "/proc/sys/net/ipv4/tcp_available_congestion_control; a module may need loading)";
            case EPERM ->
                "this user may not choose it (add it to net.ipv4.tcp_allowed_congestion_control, or run "
                        + "with CAP_NET_ADMIN)";
            default -> "errno " + errno;
        };
        return "server.tcp-congestion " + algorithm + " refused: " + why + "; leave it empty for the system's default";
    }
}
