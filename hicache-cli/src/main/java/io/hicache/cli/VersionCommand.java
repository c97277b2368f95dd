package io.hicache.cli;

import io.hicache.core.HiCacheVersion;
import picocli.CommandLine.Command;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** {@code hicache version}: this build's version and the runtime it runs on. Runs once. */
@Command(
        name = "version",
        header = "print the version of HiCache and of the Java runtime",
        mixinStandardHelpOptions = true,
        description = "Prints the version of HiCache, of the Java runtime and the platform.")
public final class VersionCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        for (String line : new Lines().getVersion()) {
            spec.commandLine().getOut().println(line);
        }
        return OK;
    }

    /** The version lines, also what {@code hicache --version} prints. Stateless. */
    static final class Lines implements IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {
                "hicache " + HiCacheVersion.version(),
                "java " + Runtime.version() + " (" + System.getProperty("java.vendor") + ", "
                        + System.getProperty("java.home") + ")",
                "platform " + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ", "
                        + Runtime.getRuntime().availableProcessors() + " cpus"
            };
        }
    }
}
