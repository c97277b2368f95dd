package io.hicache.architecture;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the module list of the parent POM and each module's compile-scope HiCache dependencies, as the module names
 * {@link Layout} uses (folder names; a test jar of module M is {@code M-kit}). Plain text matching: the POMs keep one
 * dependency per {@code <dependency>} element, which is all this needs. Stateless.
 */
final class Poms {
    private static final Pattern MODULE = Pattern.compile("<module>([^<]+)</module>");
    private static final Pattern DEPENDENCY = Pattern.compile("<dependency>(.*?)</dependency>", Pattern.DOTALL);
    private static final Pattern ARTIFACT = Pattern.compile("<artifactId>([^<]+)</artifactId>");
    private static final Pattern GROUP = Pattern.compile("<groupId>([^<]+)</groupId>");
    private static final Pattern SCOPE = Pattern.compile("<scope>([^<]+)</scope>");
    private static final Pattern TYPE = Pattern.compile("<type>([^<]+)</type>");
    private static final Pattern OWN_ARTIFACT = Pattern.compile("</parent>\\s*<artifactId>([^<]+)</artifactId>");

    /** Modules whose test jar carries a kit that other modules run (Layout's {@code *-kit} modules). */
    private static final Set<String> KIT_MODULES = Set.of("hicache-cuda", "transfer", "transfer-cuda");

    private Poms() {}

    /** Module folder to the modules its main code may use, for every module but this test's own. */
    static Map<String, Set<String>> compileDependencies() throws IOException {
        Path root = Path.of("").toAbsolutePath().getParent();
        String parent = Files.readString(root.resolve("pom.xml"));
        String dependencyBlock =
                parent.substring(parent.indexOf("<dependencies>", parent.indexOf("</dependencyManagement>")));
        Map<String, String> folderOf = new HashMap<>();
        Map<String, String> poms = new HashMap<>();
        for (Matcher m = MODULE.matcher(parent); m.find(); ) {
            String folder = m.group(1);
            String pom = Files.readString(root.resolve(folder).resolve("pom.xml"));
            Matcher own = OWN_ARTIFACT.matcher(pom);
            if (!own.find()) {
                throw new IllegalStateException(folder + "/pom.xml: no artifactId after its parent");
            }
            folderOf.put(own.group(1), folder);
            poms.put(folder, pom);
        }
        Map<String, Set<String>> edges = new HashMap<>();
        Map<String, Set<String>> testEdges = new HashMap<>();
        poms.forEach((folder, pom) -> {
            if (folder.equals("hicache-architecture")) {
                return;
            }
            Set<String> uses = new HashSet<>();
            Set<String> testUses = new HashSet<>();
            String own = pom.substring(pom.indexOf("<dependencies>"));
            for (Matcher d = DEPENDENCY.matcher(own); d.find(); ) {
                String dep = d.group(1);
                Matcher group = GROUP.matcher(dep);
                Matcher scope = SCOPE.matcher(dep);
                if (!group.find() || !group.group(1).equals("io.hicache")) {
                    continue;
                }
                String scopeName = scope.find() ? scope.group(1) : "compile";
                Matcher artifact = ARTIFACT.matcher(dep);
                artifact.find();
                String module = folderOf.get(artifact.group(1));
                Matcher type = TYPE.matcher(dep);
                String used = type.find() && type.group(1).equals("test-jar") ? module + "-kit" : module;
                if (scopeName.equals("compile")) {
                    uses.add(used);
                } else if (scopeName.equals("test")) {
                    testUses.add(used);
                }
            }
            edges.put(folder, uses);
            testEdges.put(folder, testUses);
        });
        if (DEPENDENCY
                .matcher(dependencyBlock)
                .results()
                .anyMatch(d -> d.group(1).contains("io.hicache"))) {
            throw new IllegalStateException("the parent POM gives every module a HiCache dependency");
        }
        // The kits ship in their module's test jar: they may use the module, what it uses, and its test dependencies.
        for (String module : KIT_MODULES) {
            Set<String> kit = new HashSet<>(edges.get(module));
            kit.addAll(testEdges.get(module));
            kit.add(module);
            edges.put(module + "-kit", kit);
        }
        return edges;
    }
}
