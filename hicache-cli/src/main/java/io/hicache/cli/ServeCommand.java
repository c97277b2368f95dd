package io.hicache.cli;

import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStores;
import io.hicache.core.util.Threads;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code hicache serve}: runs the daemon until the process is told to stop (SIGINT, SIGTERM), then shuts it down
 * gracefully. Runs once; each run owns the daemon it starts.
 */
@Command(
        name = "serve",
        customSynopsis = "hicache serve [--config=FILE] [--port=N] [--host=ADDRESS] [--SETTING=VALUE ...]",
        header = "run the HiCache daemon (host slab + L3 store behind the binary protocol)",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        description = {
            "Runs the HiCache daemon: a host slab (server.host-size in server.host-dir, a tmpfs) in front of "
                    + "an L3 page store (server.store), serving the binary protocol of docs/protocol.md on "
                    + "server.bind:server.port, with Prometheus metrics at /metrics and a health check at /health on "
                    + "server.metrics-port. Puts land in the slab and are written behind to the store; gets are served "
                    + "from the slab, else from the store. It logs what it chose at start. Ctrl-C (SIGINT) or SIGTERM stops "
                    + "it gracefully: requests in flight finish and every page not yet in the store is written there first.",
            "",
            SettingOptions.PRECEDENCE
        },
        footer = {
            "%nExamples:",
            "  hicache serve",
            "  hicache serve --port 7400",
            "  hicache serve --server.host-size 8GiB --file.root /mnt/nvme/hicache",
            "  hicache serve --server.bind 0.0.0.0 --server.auth-token \"$(cat token)\" --server.store s3 --s3.bucket kv"
        })
public final class ServeCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Option(names = "--config", paramLabel = "FILE", description = "a properties file of settings")
    @Nullable
    Path config;

    // The names redis-server, memcached and SGLang take: aliases of the settings, which win over them if both are
    // given.
    @Option(
            names = {"--port", "-p"},
            paramLabel = "N",
            description = "the port to serve the protocol on: --server.port (default 7370; 0 takes any free one)")
    @Nullable
    Integer port;

    @Option(
            names = "--host",
            paramLabel = "ADDRESS",
            description = "the address to listen on: --server.bind (default 127.0.0.1, this host only)")
    @Nullable
    String host;

    @Override
    public void addOptions(CommandSpec spec) {
        // server.store-root has no fixed default: it follows the daemon's own store folder.
        SettingOptions.add(
                spec,
                "%nDaemon settings:",
                ServerConfig.SETTINGS,
                Map.of("server.store-root", "./hicache-data with the default file.root"));
        // The daemon puts the file store under the working directory unless told otherwise: show that default.
        SettingOptions.addStores(
                spec,
                p -> "%nStore '" + p.name() + "' (server.store " + p.name() + "): " + p.description() + ":",
                Map.of("file.root", HiCacheServer.DEFAULT_FILE_ROOT));
    }

    @Override
    public Integer call() throws Exception {
        List<Setting<?>> all = new ArrayList<>(ServerConfig.SETTINGS);
        PageStores.providers().forEach(p -> all.addAll(p.settings()));
        Settings settings = SettingOptions.read(spec.commandLine().getParseResult(), config, all);
        settings = withAlias(settings, "--port", port == null ? null : port.toString(), "server.port");
        settings = withAlias(settings, "--host", host, "server.bind");
        ServerConfig serverConfig = ServerConfig.from(settings);
        List<Setting<?>> known = new ArrayList<>(ServerConfig.SETTINGS);
        if (!serverConfig.store().isEmpty()) {
            known.addAll(PageStores.provider(serverConfig.store()).settings());
        }
        settings.requireKnown(known);
        HiCacheServer server = HiCacheServer.start(serverConfig);
        PrintWriter out = spec.commandLine().getOut();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(Threads.unstarted("serve-shutdown", () -> {
            out.println("stopping: finishing requests in flight and writing pages behind to the L3 store");
            out.flush();
            Thread drain = Threads.start("serve-drain-progress", () -> drainProgress(server));
            server.close();
            drain.interrupt();
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

    /** {@code settings} with {@code key} set from its alias's {@code value}; both given on the line is refused. */
    private Settings withAlias(Settings settings, String alias, @Nullable String value, String key) {
        if (value == null) {
            return settings;
        }
        if (spec.commandLine().getParseResult().hasMatchedOption("--" + key)) {
            throw new ParameterException(
                    spec.commandLine(), alias + " and --" + key + " name the same setting: give one of them");
        }
        return settings.with(key, value);
    }

    /** Shows the write-behind draining during a shutdown, once a second, until interrupted. */
    private void drainProgress(HiCacheServer server) {
        int first = server.pendingWriteBehindPages();
        if (first == 0) {
            return;
        }
        Progress progress = Progress.of(spec.commandLine().getErr(), "draining the write-behind:", first);
        try {
            while (!Thread.currentThread().isInterrupted()) {
                int left = server.pendingWriteBehindPages();
                progress.update(first - Math.min(first, left), left + " pages left to write to L3");
                if (left == 0) {
                    break;
                }
                Thread.sleep(1000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            progress.finish();
        }
    }
}
