package io.hicache.cli;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * The option or command closest to a mistyped one, by edit distance: one suggestion, not every option that shares a
 * prefix (the daemon has twenty {@code --server.*} options). Stateless.
 */
final class Nearest {
    private Nearest() {}

    /** The nearest known name to the first unmatched word, or null when none is near. */
    static @Nullable String suggest(UnmatchedArgumentException e) {
        List<String> unmatched = e.getUnmatched();
        if (unmatched.isEmpty()) {
            return null;
        }
        String word = unmatched.getFirst();
        List<String> known = new ArrayList<>();
        if (word.startsWith("-")) {
            known.addAll(e.getCommandLine().getCommandSpec().optionsMap().keySet());
        } else {
            e.getCommandLine().getSubcommands().keySet().forEach(known::add);
        }
        return nearest(word, known);
    }

    /**
     * The first word of {@code args} that looks like an option of {@code line}'s command but is none of its options (nor
     * an option of a command above it), or null: for errors that picocli reports as something else.
     */
    static @Nullable String unknownOption(CommandLine line, String[] args) {
        Set<String> known = new HashSet<>();
        for (CommandLine c = line; c != null; c = c.getParent()) {
            known.addAll(c.getCommandSpec().optionsMap().keySet());
        }
        for (String arg : args) {
            if (arg.equals("--")) {
                break;
            }
            String name = arg.contains("=") ? arg.substring(0, arg.indexOf('=')) : arg;
            // "-1" is a value (server.metrics-port -1), not an option.
            if (name.startsWith("-") && name.length() > 1 && !name.matches("-\\d.*") && !known.contains(name)) {
                return name;
            }
        }
        return null;
    }

    /** The name of {@code known} nearest to {@code word}, if within a quarter of its length (at least 2 edits). */
    static @Nullable String nearest(String word, List<String> known) {
        String best = null;
        int bestDistance = Math.max(2, word.length() / 4) + 1;
        for (String k : known) {
            int d = distance(word, k);
            if (d < bestDistance) {
                best = k;
                bestDistance = d;
            }
        }
        return best;
    }

    /** Levenshtein distance. */
    static int distance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitute = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitute, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] t = previous;
            previous = current;
            current = t;
        }
        return previous[b.length()];
    }
}
