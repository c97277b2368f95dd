package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.config.Settings;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The commands a user runs against a running daemon ({@code stats}, {@code top}), the completion script, the
 * nearest-option hints, and progress output that stays plain when it is not a terminal.
 */
class DaemonCommandsTest {
    @Test
    void statsAndTopReadARunningDaemon(@TempDir Path dir) throws Exception {
        HiCacheServer server = HiCacheServer.start(ServerConfig.from(Settings.builder()
                .flag("server.bind", "127.0.0.1")
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.host-size", "64MiB")
                .flag("server.host-dir", dir.toString())
                .build()));
        try {
            String port = Integer.toString(server.port());
            HiCacheCliTest.Run stats = HiCacheCliTest.run("stats", "--port", port);
            assertEquals(0, stats.status(), stats.err());
            assertTrue(stats.out().contains("daemon 127.0.0.1:" + port), stats.out());
            assertTrue(stats.out().contains("slab         0 B of 64 MiB used"), stats.out());
            assertTrue(stats.out().contains("connections"), stats.out());
            HiCacheCliTest.Run raw = HiCacheCliTest.run("stats", "--port", port, "--raw");
            assertTrue(raw.out().contains("# TYPE hicache_server_request_seconds histogram"), raw.out());

            HiCacheCliTest.Run top = HiCacheCliTest.run("top", "--port", port, "--count", "2", "--interval", "200ms");
            assertEquals(0, top.status(), top.err());
            assertEquals(2, top.out().split("hicache top: 127.0.0.1:" + port, -1).length - 1, top.out());
            for (String line : new String[] {"throughput", "hit rate", "slab", "write-behind", "requests/s", "stats"}) {
                assertTrue(top.out().contains(line), "top lacks '" + line + "':\n" + top.out());
            }
            assertFalse(top.out().contains("\033"), "no escape codes when the output is not a terminal");

            HiCacheCliTest.Run refused = HiCacheCliTest.run("top", "--port", port, "--interval", "0s");
            assertEquals(2, refused.status());
            assertTrue(refused.err().contains("--interval must be positive"), refused.err());
        } finally {
            server.close();
        }
    }

    @Test
    void aMistypedOptionOrCommandNamesTheNearestOne() {
        HiCacheCliTest.Run option = HiCacheCliTest.run("conformance", "--store", "memory", "--memroy.capacity", "1GiB");
        assertEquals(2, option.status());
        assertTrue(option.err().contains("did you mean --memory.capacity?"), option.err());
        HiCacheCliTest.Run command = HiCacheCliTest.run("serv");
        assertEquals(2, command.status());
        assertTrue(
                command.err().contains("unknown command 'serv'")
                        && command.err().contains("did you mean serve?"),
                command.err());
        HiCacheCliTest.Run far = HiCacheCliTest.run("frobnicate");
        assertFalse(far.err().contains("did you mean"), "nothing is near: " + far.err());
        HiCacheCliTest.Run badValue = HiCacheCliTest.run("serve", "--server.host-size", "lots");
        assertEquals(2, badValue.status());
        assertTrue(badValue.err().contains("'lots' is not a byte size"), badValue.err());
    }

    @Test
    void theCompletionScriptKnowsCommandsSettingsAndStores() {
        HiCacheCliTest.Run script = HiCacheCliTest.run("completion");
        assertEquals(0, script.status(), script.err());
        for (String word : new String[] {
            "complete -F _complete_hicache -o default hicache ./hicache",
            "serve",
            "conformance",
            "--server.port",
            "--memory.capacity",
            "--allow-clear-all"
        }) {
            assertTrue(script.out().contains(word), "the script lacks '" + word + "'");
        }
    }

    @Test
    void progressIsPlainLinesOffATerminalAndOneRedrawnLineOnIt() {
        StringWriter plain = new StringWriter();
        Progress p = Progress.of(new PrintWriter(plain), false, "suite", 3, 0);
        for (int i = 1; i <= 3; i++) {
            p.update(i, "round " + i);
        }
        p.finish();
        assertEquals("suite 1/3: round 1\nsuite 2/3: round 2\nsuite 3/3: round 3\n", plain.toString());

        StringWriter drawn = new StringWriter();
        Progress t = Progress.of(new PrintWriter(drawn), true, "suite", 4, 0);
        t.update(2, "a longer detail");
        t.update(4, "end");
        t.finish();
        assertTrue(
                drawn.toString().startsWith("\r[###############               ] suite 2/4: a longer detail"),
                drawn.toString());
        assertTrue(
                drawn.toString().contains("\r[##############################] suite 4/4: end      "), drawn.toString());
        assertTrue(drawn.toString().endsWith("\n"));
    }
}
