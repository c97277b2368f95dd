package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.pd.BootstrapServer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Issue 20, part 5: {@code hicache pd bootstrap|prefill|decode}, the three roles as a user runs them (here on threads
 * of one JVM, each through the command line): three conversations of three turns hand off, the decode holds the earlier
 * turns and checks every byte, the prefill's cache serves what it computed before; the bootstrap server stops by
 * itself.
 */
class PdCommandTest {
    @Test
    void theThreeRolesHandOffConversationsOnTheirCaches() throws Exception {
        // three conversations of three turns: turn t's prompt is 64 + 48 t + 32 tokens
        int port;
        try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = free.getLocalPort();
        }
        String url = "http://127.0.0.1:" + port;
        ExecutorService roles = Executors.newFixedThreadPool(2); // the common pool may have one thread: two roles block
        CompletableFuture<HiCacheCliTest.Run> bootstrap = CompletableFuture.supplyAsync(
                () -> HiCacheCliTest.run("pd", "bootstrap", "--port", Integer.toString(port), "--for", "15s"), roles);
        CompletableFuture<HiCacheCliTest.Run> prefill = CompletableFuture.supplyAsync(
                () -> HiCacheCliTest.run(
                        "pd",
                        "prefill",
                        "--bootstrap",
                        url,
                        "--requests",
                        "9",
                        "--device-pages",
                        "256",
                        "--set",
                        "disaggregation-transfer-backend=tcp"),
                roles);
        HiCacheCliTest.Run decode = HiCacheCliTest.run(
                "pd",
                "decode",
                "--bootstrap",
                url,
                "--conversations",
                "3",
                "--turns",
                "3",
                "--device-pages",
                "256",
                "--set",
                "disaggregation-transfer-backend=tcp");
        HiCacheCliTest.Run served = prefill.get(2, TimeUnit.MINUTES);
        assertEquals(
                0, decode.status(), () -> decode.out() + decode.err() + "\nprefill:\n" + served.out() + served.err());
        assertEquals(0, served.status(), served.out() + served.err());
        assertTrue(decode.out().contains("decode: 9 handoffs, 0 failed"), decode.out());
        // turn 0: the first conversation finds nothing, the others the shared system prompt (64 tokens); turn 2: the
        // decode holds what it decoded at turn 1 (a prompt of 144 tokens and an answer of 16: 10 whole pages)
        assertTrue(
                decode.out()
                        .contains("conversation 0, turn 0: 96 prompt tokens, 0 held by this decode, 96 received;"
                                + " every byte checked"),
                decode.out());
        assertTrue(
                decode.out()
                        .contains("conversation 1, turn 0: 96 prompt tokens, 64 held by this decode, 32 "
                                + "received; every byte checked"),
                decode.out());
        assertTrue(
                decode.out()
                        .contains("conversation 0, turn 2: 192 prompt tokens, 160 held by this decode, 32 "
                                + "received; every byte checked"),
                decode.out());
        // the prefill's cache: turn 1 of a conversation finds turn 0's prompt (96 tokens, 6 whole pages); the answer
        // it never saw is computed
        assertTrue(
                served.out()
                        .contains("(conversation 1, turn 1): 144 prompt tokens, 96 from the cache, 48 computed:"
                                + " SUCCESS"),
                served.out());
        assertTrue(served.out().contains("prefill: 9 requests, 0 failed"), served.out());
        HiCacheCliTest.Run boot = bootstrap.get(1, TimeUnit.MINUTES); // it stops by itself (--for)
        assertEquals(0, boot.status(), boot.out() + boot.err());
        assertTrue(boot.out().contains("bootstrap server at " + url), boot.out());
        roles.shutdown();
    }

    /**
     * A prefill stopped by a signal (Ctrl-C or SIGTERM: the JVM runs its shutdown hooks and exits without unwinding the
     * command) removes its host folder from /dev/shm; it once left 128 MiB there.
     */
    @Test
    void aPrefillStoppedBySignalLeavesNothingInShm() throws Exception {
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm), "no /dev/shm here");
        Set<Path> before = pdFolders(shm);
        BootstrapServer boot = BootstrapServer.start("127.0.0.1", 0, 1);
        ChildJvm prefill = ChildJvm.start(
                HiCacheCli.class,
                List.of(
                        "pd",
                        "prefill",
                        "--bootstrap",
                        boot.url(),
                        "--device-pages",
                        "256",
                        "--set",
                        "disaggregation-transfer-backend=tcp"));
        try {
            assertTrue(
                    prefill.awaitLine("prefill registered", 60, TimeUnit.SECONDS),
                    () -> prefill.lines().toString());
            Set<Path> made = pdFolders(shm);
            made.removeAll(before);
            assertEquals(1, made.size(), () -> "the prefill's host folder: " + made);
            prefill.terminate(Duration.ofSeconds(30));
            Set<Path> after = pdFolders(shm);
            after.removeAll(before);
            assertEquals(Set.of(), after, "the stopped prefill left its host folder");
        } finally {
            prefill.kill();
            boot.close();
        }
    }

    private static Set<Path> pdFolders(Path shm) throws Exception {
        try (Stream<Path> all = Files.list(shm)) {
            return all.filter(p -> p.getFileName().toString().startsWith("hicache-pd-prefill"))
                    .collect(Collectors.toCollection(HashSet::new));
        }
    }
}
