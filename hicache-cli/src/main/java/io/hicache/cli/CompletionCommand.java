package io.hicache.cli;

import picocli.AutoComplete;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * {@code hicache completion}: prints a bash (and zsh, through bashcompinit) completion script for every command,
 * option and setting, generated from the command line itself so it never falls behind. Runs once.
 */
@Command(
        name = "completion",
        header = "print a bash/zsh completion script",
        mixinStandardHelpOptions = true,
        description = "Prints a completion script for bash and zsh: commands, options, settings and store names.",
        footer = {
            "%nInstall it for this shell, or for every shell of this user:",
            "  source <(./hicache completion)",
            "  ./hicache completion > ~/.local/share/bash-completion/completions/hicache"
        })
public final class CompletionCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        String script = AutoComplete.bash("hicache", spec.root().commandLine());
        // The launcher is ./hicache as well as hicache on the PATH: complete both.
        spec.commandLine()
                .getOut()
                .print(script.replace(
                        "complete -F _complete_hicache -o default hicache",
                        "complete -F _complete_hicache -o default hicache ./hicache"));
        spec.commandLine().getOut().flush();
        return OK;
    }
}
