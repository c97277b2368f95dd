package io.hicache.cli;

import io.hicache.storage.remote.DaemonAdmin;
import io.hicache.storage.remote.RemotePageStore;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code hicache admin}: the operator's requests to a running daemon, {@code flush} and {@code store ...}
 * ({@link AdminStoreCommand}), with the daemon's address and token as {@code stats} takes them. A daemon's refusal
 * exits with 1, bad arguments with 2. Runs once.
 */
@Command(
        name = "admin",
        header = "flush a running daemon's host slab, or show, detach or attach its L3 store",
        mixinStandardHelpOptions = true,
        synopsisSubcommandLabel = "COMMAND",
        subcommands = {AdminCommand.Flush.class, AdminStoreCommand.class},
        description = "Operations on a running daemon while it serves: 'flush' empties its host slab (L3 keeps the "
                + "pages: SGLang's /flush_cache, not FLUSHALL), 'store' shows, detaches or attaches its L3 page store.",
        footer = {
            "%nExamples:",
            "  hicache admin flush",
            "  hicache admin store show --port 7371",
            "  hicache admin store detach",
            "  hicache admin store attach file --set file.root=/data/hicache"
        })
public final class AdminCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        spec.commandLine().usage(spec.commandLine().getErr());
        return USAGE;
    }

    /** How long the daemon may take: the request's deadline. A picocli mixin; filled once. */
    static final class Timeout {
        @Option(
                names = "--timeout",
                paramLabel = "DURATION",
                defaultValue = "30s",
                converter = TopCommand.DurationConverter.class,
                description = "how long the daemon may wait for its write-behind (default ${DEFAULT-VALUE})")
        Duration timeout;

        /** The answer, waiting a little past the deadline; a failure is rethrown as it came (a HiCacheException). */
        <T> T await(CompletableFuture<T> answer) throws Exception {
            try {
                return answer.get(timeout.plus(DaemonAdmin.GRACE).toMillis() + 1_000, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                throw e.getCause() instanceof Exception cause ? cause : e;
            }
        }
    }

    /**
     * The daemon's admin token ({@code server.admin-token}), sent in the HELLO instead of {@code --auth-token} when
     * given. A picocli mixin; filled once.
     */
    static final class AdminToken {
        @Option(
                names = "--admin-token",
                paramLabel = "TEXT",
                defaultValue = "${env:HICACHE_SERVER_ADMIN_TOKEN:-}",
                description = "the daemon's server.admin-token, sent instead of --auth-token (default: "
                        + "HICACHE_SERVER_ADMIN_TOKEN, else none: a daemon without one takes admin requests from loopback "
                        + "only, with its ordinary token)")
        String adminToken;
    }

    /**
     * Connects to the daemon (with the admin token if one is given), sends {@code request}, and prints the line
     * {@code line} makes of its answer; what every admin subcommand does. A refusal is thrown as it came (the command
     * line turns it into exit status 1).
     */
    static <T> int ask(
            CommandSpec spec,
            DaemonAddress daemon,
            AdminToken admin,
            Timeout timeout,
            Function<DaemonAdmin, CompletableFuture<T>> request,
            Function<T, String> line)
            throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        try (RemotePageStore client =
                admin.adminToken.isEmpty() ? daemon.connect() : daemon.connect(admin.adminToken)) {
            out.println(line.apply(timeout.await(request.apply(new DaemonAdmin(client)))));
            out.flush();
            return Subcommand.OK;
        }
    }

    /** {@code hicache admin flush}. */
    @Command(
            name = "flush",
            header = "drop the host slab's pages; L3 keeps them (SGLang's /flush_cache, not Redis' FLUSHALL)",
            mixinStandardHelpOptions = true,
            sortOptions = false,
            description = "Drops every page of the daemon's host slab that no lease or reservation pins, in every "
                    + "namespace. Pages the write-behind has not yet written to L3 are written first, up to --timeout; "
                    + "those still unwritten then stay in the slab. L3 keeps every page: a later get reads it from there. "
                    + "It is what SGLang's /flush_cache does to its host cache, not Redis' FLUSHALL: nothing "
                    + "stored is lost.",
            footer = {"%nExamples:", "  hicache admin flush", "  hicache admin flush --port 7371 --timeout 2m"})
    public static final class Flush implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        DaemonAddress daemon;

        @Mixin
        AdminToken adminToken;

        @Mixin
        Timeout timeout;

        @Override
        public Integer call() throws Exception {
            return ask(
                    spec,
                    daemon,
                    adminToken,
                    timeout,
                    admin -> admin.flush(timeout.timeout),
                    f -> "flushed the host slab of "
                            + daemon.host + ":" + daemon.port + ": dropped " + f.droppedPages() + " pages, kept "
                            + f.keptPages()
                            + (f.keptPages() > 0 ? " (pinned, or not yet in L3 when --timeout passed)" : ""));
        }
    }
}
