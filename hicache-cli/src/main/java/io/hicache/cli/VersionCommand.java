package io.hicache.cli;

import io.hicache.core.HiCacheVersion;
import java.io.PrintStream;
import java.util.List;
import java.util.Set;

/** {@code hicache version}: this build's version and the runtime it runs on. Stateless. */
public final class VersionCommand implements Subcommand {
    @Override
    public String name() {
        return "version";
    }

    @Override
    public String summary() {
        return "print the version of HiCache and of the Java runtime";
    }

    @Override
    public String help() {
        return "usage: hicache version\n\nPrints the HiCache version, the Java runtime and the platform.";
    }

    @Override
    public int run(List<String> args, PrintStream out, PrintStream err) throws Args.UsageException {
        Args parsed = Args.parse(args, Set.of(), Set.of(), false);
        if (!parsed.positional().isEmpty()) {
            throw new Args.UsageException("unexpected argument '" + parsed.positional().getFirst() + "'");
        }
        out.println("hicache " + HiCacheVersion.version());
        out.println("java " + Runtime.version() + " (" + System.getProperty("java.vendor") + ", "
                + System.getProperty("java.home") + ")");
        out.println("platform " + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ", "
                + Runtime.getRuntime().availableProcessors() + " cpus");
        return OK;
    }
}
