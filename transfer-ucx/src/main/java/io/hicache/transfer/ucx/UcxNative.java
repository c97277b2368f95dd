package io.hicache.transfer.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What JUCX does not bind, called through the foreign-function API: the library's version, an endpoint's lanes (to
 * say which UCX transports carry a peer) and {@code setenv} for UCX settings that only its environment reaches.
 * Stateless; every call is safe from any thread except {@link #lanes}, which must run on the endpoint's worker
 * thread.
 */
final class UcxNative {
    static final String LIBRARY = "libucp.so.0";
    private static final Linker LINKER = Linker.nativeLinker();
    private static final Pattern LANE = Pattern.compile("lane\\[\\d+]:\\s+\\d+:(\\S+?)\\.\\d+\\s.*?->\\s*\\S+(.*)$");

    private UcxNative() {}

    @SuppressWarnings("restricted")
    private static final class Lib {
        static final SymbolLookup UCP = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
        static final SymbolLookup LIBC = LINKER.defaultLookup();
        static final MethodHandle VERSION = LINKER.downcallHandle(
                UCP.findOrThrow("ucp_get_version_string"), FunctionDescriptor.of(ValueLayout.ADDRESS));
        static final MethodHandle EP_PRINT = LINKER.downcallHandle(
                UCP.findOrThrow("ucp_ep_print_info"),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        static final MethodHandle OPEN_MEMSTREAM = LINKER.downcallHandle(
                LIBC.findOrThrow("open_memstream"),
                FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        static final MethodHandle FCLOSE = LINKER.downcallHandle(
                LIBC.findOrThrow("fclose"), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        static final MethodHandle FREE =
                LINKER.downcallHandle(LIBC.findOrThrow("free"), FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        static final MethodHandle SETENV = LINKER.downcallHandle(
                LIBC.findOrThrow("setenv"),
                FunctionDescriptor.of(
                        ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    }

    /** Why UCX cannot be used in this process, or empty when its library loads. */
    @SuppressWarnings("restricted")
    static Optional<String> unavailable() {
        try {
            Class.forName("org.openucx.jucx.ucp.UcpContext", false, UcxNative.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            return Optional.of("JUCX (org.openucx:jucx) is not on the class path");
        }
        try {
            SymbolLookup.libraryLookup(LIBRARY, Arena.global());
            return Optional.empty();
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return Optional.of(
                    "UCX's " + LIBRARY + " does not load (install libucx0, or UCX 1.13 or newer): " + e.getMessage());
        }
    }

    /** The loaded UCX library's version, e.g. {@code 1.13.1}. */
    @SuppressWarnings("restricted")
    static String version() {
        try {
            MemorySegment s = (MemorySegment) Lib.VERSION.invokeExact();
            return s.reinterpret(64).getString(0);
        } catch (Throwable e) {
            return "unknown (" + e + ")";
        }
    }

    /** Sets environment variable {@code name} unless it is set already; true when it was set here. */
    static boolean setenvIfAbsent(String name, String value) {
        if (System.getenv(name) != null) {
            return false;
        }
        try (Arena a = Arena.ofConfined()) {
            int rc = (int) Lib.SETENV.invokeExact(a.allocateFrom(name), a.allocateFrom(value), 0);
            return rc == 0;
        } catch (Throwable e) {
            return false;
        }
    }

    /**
     * The UCX transports (and devices) that carry the endpoint at native address {@code ep}, with what each lane is
     * for, e.g. {@code [posix/memory am, cma/memory rma_bw]}; empty when UCX did not say.
     */
    @SuppressWarnings("restricted")
    static List<String> lanes(long ep) {
        List<String> out = new ArrayList<>();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment bufPtr = a.allocate(ValueLayout.ADDRESS);
            MemorySegment sizePtr = a.allocate(ValueLayout.JAVA_LONG);
            MemorySegment file = (MemorySegment) Lib.OPEN_MEMSTREAM.invokeExact(bufPtr, sizePtr);
            if (file.equals(MemorySegment.NULL)) {
                return out;
            }
            Lib.EP_PRINT.invokeExact(MemorySegment.ofAddress(ep), file);
            int closed = (int) Lib.FCLOSE.invokeExact(file);
            MemorySegment buf = bufPtr.get(ValueLayout.ADDRESS, 0);
            long size = sizePtr.get(ValueLayout.JAVA_LONG, 0);
            if (closed == 0 && !buf.equals(MemorySegment.NULL)) {
                String text = buf.reinterpret(size + 1).getString(0);
                for (String line : text.split("\n")) {
                    Matcher m = LANE.matcher(line);
                    if (m.find()) {
                        String use = m.group(2).strip().replaceAll("\\s+", " ");
                        out.add(use.isEmpty() ? m.group(1) + " (rma)" : m.group(1) + " (" + use + ")");
                    }
                }
            }
            if (!buf.equals(MemorySegment.NULL)) {
                Lib.FREE.invokeExact(buf);
            }
        } catch (Throwable e) {
            out.add("(lanes unknown: " + e + ")");
        }
        return out;
    }
}
