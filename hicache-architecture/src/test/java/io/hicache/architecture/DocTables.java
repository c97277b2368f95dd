package io.hicache.architecture;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * The two tables of docs/architecture.md that {@link Layout} also holds (packages; module edges), read from the
 * page: the rows below a marker comment, up to the first line that is not a table row. Stateless.
 */
final class DocTables {
    static final Path DOC = Path.of("..", "docs", "architecture.md");

    private DocTables() {}

    /** The package table: "package | module | rank | kind" per row, in the doc's spelling. */
    static Set<String> packages() throws IOException {
        Set<String> out = new TreeSet<>();
        for (List<String> cells : rows("<!-- packages:")) {
            out.add(String.join(
                    " | ",
                    cells.get(0).replace("`", ""),
                    cells.get(1),
                    cells.get(2),
                    cells.get(3).toLowerCase(Locale.ROOT)));
        }
        return out;
    }

    /** The same rows made from {@link Layout#PACKAGES}. */
    static Set<String> layoutPackages() {
        return Layout.PACKAGES.stream()
                .map(p -> String.join(
                        " | ",
                        p.name(),
                        p.module(),
                        Integer.toString(p.rank()),
                        p.kind().name().toLowerCase(Locale.ROOT)))
                .collect(Collectors.toCollection(TreeSet::new));
    }

    /** The module edges table: each module and the modules it may use. */
    static Map<String, Set<String>> moduleEdges() throws IOException {
        Map<String, Set<String>> out = new TreeMap<>();
        for (List<String> cells : rows("<!-- module edges:")) {
            Set<String> uses = cells.get(1).equals("(none)")
                    ? Set.of()
                    : Arrays.stream(cells.get(1).split(",")).map(String::trim).collect(Collectors.toSet());
            out.put(cells.get(0), uses);
        }
        return out;
    }

    private static List<List<String>> rows(String marker) throws IOException {
        List<String> lines = Files.readAllLines(DOC);
        int at = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).startsWith(marker)) {
                at = i;
                break;
            }
        }
        if (at < 0) {
            throw new IllegalStateException(DOC + " has no table marked '" + marker + "'");
        }
        List<List<String>> rows = new ArrayList<>();
        for (int i = at + 3; i < lines.size() && lines.get(i).startsWith("|"); i++) { // past the header and rule
            String line = lines.get(i);
            rows.add(Arrays.stream(line.substring(1, line.length() - 1).split("\\|"))
                    .map(String::trim)
                    .toList());
        }
        return rows;
    }
}
