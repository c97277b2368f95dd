package io.hicache.cli;

import io.hicache.core.util.Threads;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * Single key presses on the terminal, for {@code top}'s {@code q}: the terminal is put in non-canonical mode without
 * echo ({@code stty}) while this is open, so a key arrives without Enter, and put back as it was on {@link #close} or,
 * on Ctrl-C, by a shutdown hook. Where standard input is not a terminal (a pipe, CI) it reads nothing and changes
 * nothing. Not thread-safe: one command's thread polls it.
 */
final class KeyPresses implements AutoCloseable {
    private final InputStream in;
    private final String savedMode;
    private final Thread restoreOnExit;

    private KeyPresses(InputStream in, String savedMode) {
        this.in = in;
        this.savedMode = savedMode;
        this.restoreOnExit = Threads.unstarted("top-terminal-restore", () -> stty(savedMode));
    }

    /** Key presses on this terminal, or none where there is none (or stty fails). */
    static KeyPresses open() {
        if (!Progress.isTerminal()) {
            return new KeyPresses(InputStream.nullInputStream(), "");
        }
        String saved = stty("-g");
        if (saved == null || saved.isEmpty() || stty("-icanon", "-echo", "min", "0", "time", "0") == null) {
            return new KeyPresses(InputStream.nullInputStream(), "");
        }
        KeyPresses keys = new KeyPresses(System.in, saved);
        Runtime.getRuntime().addShutdownHook(keys.restoreOnExit);
        return keys;
    }

    /** Waits up to {@code time}; true as soon as {@code q} (or {@code Q}) is pressed. */
    boolean quitWithin(Duration time) throws InterruptedException, IOException {
        long end = System.nanoTime() + time.toNanos();
        do {
            while (in.available() > 0) {
                int key = in.read();
                if (key == 'q' || key == 'Q') {
                    return true;
                }
            }
            long left = end - System.nanoTime();
            if (left > 0) {
                Thread.sleep(Math.min(50, TimeUnit.NANOSECONDS.toMillis(left) + 1));
            }
        } while (System.nanoTime() < end);
        return false;
    }

    @Override
    public void close() {
        if (savedMode.isEmpty()) {
            return;
        }
        stty(savedMode);
        try {
            Runtime.getRuntime().removeShutdownHook(restoreOnExit);
        } catch (IllegalStateException e) {
            // the JVM is exiting: the hook restores the terminal
        }
    }

    /** Runs stty on the controlling terminal: its output, or null when it fails. */
    private static @Nullable String stty(String... args) {
        String command = "stty " + String.join(" ", List.of(args)) + " < /dev/tty";
        try {
            Process p = new ProcessBuilder("sh", "-c", command)
                    .redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            return p.waitFor() == 0 ? out : null;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
