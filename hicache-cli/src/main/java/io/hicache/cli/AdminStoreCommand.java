package io.hicache.cli;

import io.hicache.storage.remote.DaemonAdmin;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code hicache admin store show|detach|attach}: a running daemon's L3 page store, looked at, taken away or put in
 * place while the daemon serves. Each subcommand runs once.
 */
@Command(
        name = "store",
        header = "show, detach or attach a running daemon's L3 store",
        mixinStandardHelpOptions = true,
        synopsisSubcommandLabel = "COMMAND",
        subcommands = {AdminStoreCommand.Show.class, AdminStoreCommand.Detach.class, AdminStoreCommand.Attach.class},
        description =
                "A running daemon's L3 page store: 'show' names it, 'detach' takes it away (puts stay in the host "
                        + "slab only, gets no longer read L3), 'attach' opens one and puts it in place. No request fails "
                        + "because of either.")
public final class AdminStoreCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        spec.commandLine().usage(spec.commandLine().getErr());
        return Subcommand.USAGE;
    }

    static String describe(DaemonAdmin.Store s) {
        return "'" + s.name() + "' at " + s.location();
    }

    /** {@code hicache admin store show}. */
    @Command(
            name = "show",
            header = "name the attached L3 store",
            mixinStandardHelpOptions = true,
            description = "Prints the daemon's L3 store, its name and location, or 'none'.")
    public static final class Show implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        DaemonAddress daemon;

        @Mixin
        AdminCommand.AdminToken adminToken;

        @Mixin
        AdminCommand.Timeout timeout;

        @Override
        public Integer call() throws Exception {
            return AdminCommand.ask(
                    spec,
                    daemon,
                    adminToken,
                    timeout,
                    admin -> admin.store(timeout.timeout),
                    store -> "L3 store: "
                            + store.map(AdminStoreCommand::describe).orElse("none"));
        }
    }

    /** {@code hicache admin store detach}. */
    @Command(
            name = "detach",
            header = "stop using the L3 store",
            mixinStandardHelpOptions = true,
            sortOptions = false,
            description = "Lets the write-behind write what it has, up to --timeout, then detaches the L3 store: pages "
                    + "put from then on stay in the host slab only, and gets no longer read L3. Writes still queued "
                    + "when --timeout passes are dropped (the pages stay in the slab) and counted.")
    public static final class Detach implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        DaemonAddress daemon;

        @Mixin
        AdminCommand.AdminToken adminToken;

        @Mixin
        AdminCommand.Timeout timeout;

        @Override
        public Integer call() throws Exception {
            return AdminCommand.ask(
                    spec,
                    daemon,
                    adminToken,
                    timeout,
                    admin -> admin.detach(timeout.timeout),
                    d -> d.store()
                            .map(s -> "detached the L3 store " + describe(s)
                                    + (d.droppedWrites() > 0
                                            ? "; "
                                                    + d.droppedWrites()
                                                    + " pages were not written to it before --timeout passed (they stay in "
                                                    + "the host slab only)"
                                            : ""))
                            .orElse("no L3 store was attached"));
        }
    }

    /** {@code hicache admin store attach NAME [--set key=value]...}. */
    @Command(
            name = "attach",
            header = "open an L3 store and attach it",
            mixinStandardHelpOptions = true,
            sortOptions = false,
            description =
                    "Has the daemon open store NAME (file, rocksdb, s3, remote, ...) as --server.store opens it at "
                            + "start, with the daemon's own settings and each --set over them, and attach it. Refused when a "
                            + "store is attached (detach it first), NAME is unknown, a --set key is not one of the store's "
                            + "settings, a folder it names is outside the daemon's server.store-root (by default the folder "
                            + "holding its own store folder: ./hicache-data), a remote store is the daemon itself, or the store "
                            + "fails to open.",
            footer = {
                "%nExamples:",
                "  hicache admin store attach file --set file.root=hicache-data/file-2",
                "  hicache admin store attach rocksdb --set rocksdb.root=hicache-data/rocksdb"
            })
    public static final class Attach implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        DaemonAddress daemon;

        @Mixin
        AdminCommand.AdminToken adminToken;

        @Mixin
        AdminCommand.Timeout timeout;

        @Parameters(index = "0", paramLabel = "NAME", description = "the store's name")
        String name;

        @Option(
                names = "--set",
                paramLabel = "KEY=VALUE",
                description = "a setting of the store, as at start (file.root=DIR, ...); repeatable")
        Map<String, String> settings = new LinkedHashMap<>();

        @Override
        public Integer call() throws Exception {
            return AdminCommand.ask(
                    spec,
                    daemon,
                    adminToken,
                    timeout,
                    admin -> admin.attach(name, settings, timeout.timeout),
                    s -> "attached the L3 store " + describe(s));
        }
    }
}
