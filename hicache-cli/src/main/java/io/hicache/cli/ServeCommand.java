package io.hicache.cli;

import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.util.Threads;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

/**
 * {@code hicache serve}: runs the daemon until the process is told to stop (SIGINT, SIGTERM), then shuts it down
 * gracefully. Stateless; each run owns the daemon it starts.
 */
public final class ServeCommand implements Subcommand {
    @Override
    public String name() {
        return "serve";
    }

    @Override
    public String summary() {
        return "run the HiCache daemon (host slab + L3 store behind the binary protocol)";
    }

    @Override
    public String help() {
        StringBuilder b = new StringBuilder("""
                usage: hicache serve [--config FILE] [--SETTING VALUE ...]

                Runs the HiCache daemon: a host slab (server.host-size in server.host-dir, a tmpfs) in front of an L3
                page store (server.store), serving the binary protocol of docs/protocol.md on
                server.bind:server.port, with Prometheus metrics at /metrics and a health check at /health on
                server.metrics-port. Puts land in the slab and are written behind to the store; gets are served from
                the slab, else from the store. It logs what it chose at start. Ctrl-C (SIGINT) or SIGTERM stops it
                gracefully: requests in flight finish and every page not yet in the store is written there first.

                """);
        b.append(CommandSettings.PRECEDENCE).append("\n\ndaemon settings:\n");
        CommandSettings.describe(b, ServerConfig.SETTINGS, "  ");
        b.append("\nL3 stores (server.store), with their settings; the file store's file.root defaults to "
                + HiCacheServer.DEFAULT_FILE_ROOT + " under the working directory here:\n");
        for (PageStoreProvider p : PageStores.providers()) {
            b.append("  ").append(p.name()).append(": ").append(p.description()).append('\n');
            // The daemon puts the file store under the working directory unless told otherwise: show that default.
            CommandSettings.describe(b, p.settings(), "      ", Map.of("file.root", HiCacheServer.DEFAULT_FILE_ROOT));
        }
        b.append("""

                examples:
                  hicache serve
                  hicache serve --server.host-size 8GiB --file.root /mnt/nvme/hicache
                  hicache serve --server.bind 0.0.0.0 --server.auth-token "$(cat token)" --server.store s3 --s3.bucket kv""");
        return b.toString();
    }

    @Override
    public int run(List<String> args, PrintStream out, PrintStream err) throws Exception {
        Args parsed = Args.parse(args, Set.of("config"), Set.of(), true);
        if (!parsed.positional().isEmpty()) {
            throw new Args.UsageException("unexpected argument '" + parsed.positional().getFirst() + "'");
        }
        Settings settings = CommandSettings.from(parsed, Set.of());
        ServerConfig config = ServerConfig.from(settings);
        List<Setting<?>> known = new ArrayList<>(ServerConfig.SETTINGS);
        if (!config.store().isEmpty()) {
            known.addAll(PageStores.provider(config.store()).settings());
        }
        settings.requireKnown(known);
        HiCacheServer server = HiCacheServer.start(config);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(Threads.unstarted("serve-shutdown", () -> {
            out.println("stopping: finishing requests in flight and writing pages behind to the L3 store");
            out.flush();
            server.close();
            out.println("stopped");
            out.flush();
            stopped.countDown();
        }));
        out.println(server.describe());
        out.println("serving; Ctrl-C or SIGTERM stops it gracefully");
        out.flush();
        stopped.await();
        return OK;
    }
}
