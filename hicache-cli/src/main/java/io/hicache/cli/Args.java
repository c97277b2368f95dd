package io.hicache.cli;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A parsed command line: {@code --name value}, {@code --name=value}, bare {@code --switch}es and positional
 * words. Which names take a value and which are switches is declared up front, so a misspelt option is an
 * error, not a silent default. Immutable.
 */
public final class Args {
    private final Map<String, String> options;
    private final Set<String> switches;
    private final List<String> positional;

    private Args(Map<String, String> options, Set<String> switches, List<String> positional) {
        this.options = options;
        this.switches = switches;
        this.positional = positional;
    }

    /** Thrown for arguments that do not parse; the message says which one and why. */
    public static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        public UsageException(String message) {
            super(message);
        }
    }

    /**
     * Parses {@code args}.
     *
     * @param valued    option names (without {@code --}) that take a value
     * @param switches  option names that take none
     * @param anyValued whether options not in {@code valued} may take a value too (setting keys, say)
     */
    public static Args parse(List<String> args, Set<String> valued, Set<String> switches, boolean anyValued)
            throws UsageException {
        Map<String, String> options = new LinkedHashMap<>();
        Set<String> on = new java.util.LinkedHashSet<>();
        List<String> positional = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            String arg = args.get(i);
            if (arg.equals("--")) {
                positional.addAll(args.subList(i + 1, args.size()));
                break;
            }
            if (!arg.startsWith("--") || arg.length() == 2) {
                positional.add(arg);
                continue;
            }
            String name = arg.substring(2);
            String value = null;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            }
            if (switches.contains(name)) {
                if (value != null) {
                    throw new UsageException("option --" + name + " takes no value");
                }
                on.add(name);
                continue;
            }
            if (!valued.contains(name) && !anyValued) {
                throw new UsageException("unknown option --" + name);
            }
            if (value == null) {
                if (i + 1 >= args.size()) {
                    throw new UsageException("option --" + name + " needs a value");
                }
                value = args.get(++i);
            }
            if (options.put(name, value) != null) {
                throw new UsageException("option --" + name + " is given twice");
            }
        }
        return new Args(options, Set.copyOf(on), List.copyOf(positional));
    }

    public Optional<String> option(String name) {
        return Optional.ofNullable(options.get(name));
    }

    public boolean has(String switchName) {
        return switches.contains(switchName);
    }

    /** Every valued option, in the order given. */
    public Map<String, String> options() {
        return options;
    }

    public List<String> positional() {
        return positional;
    }
}
