import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * Build step of hicache-core (run by the exec plugin after compile, on the build's JDK): the classes Chronicle Values
 * would otherwise generate and compile with javac at run time, the first time a Chronicle Map is created in a JVM.
 * Chronicle loads a class named {@code <ValueType>$$Native} from the value type's class loader before it generates one,
 * so shipping it in hicache-core's jar means an embedding JVM needs no {@code jdk.compiler} module, no
 * {@code --add-exports jdk.compiler/...} flag, and no second of javac on the host pool's first open. The source is
 * Chronicle's own generator's output for the pinned Chronicle version, made anew in every build (never committed).
 *
 * <p>Arguments: the output class folder, a folder for the generated sources, then the value types; the class path it
 * runs on is the one their sources compile against.
 */
public class ChronicleValueClasses {
    public static void main(String[] args) throws Exception {
        Path classes = Path.of(args[0]);
        Path sources = Path.of(args[1]);
        String classPath = System.getProperty("java.class.path");
        Class<?> model = Class.forName("net.openhft.chronicle.values.ValueModel");
        Method acquire = model.getMethod("acquire", Class.class);
        // Package-private in Chronicle Values: its generator, which the run-time path calls too.
        Method generate = Class.forName("net.openhft.chronicle.values.Generators")
                .getDeclaredMethod("generateNativeClass", model, String.class);
        generate.setAccessible(true);
        List<String> files = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            Class<?> type = Class.forName(args[i]);
            String simpleName = type.getSimpleName() + "$$Native";
            String source = (String) generate.invoke(null, acquire.invoke(null, type), simpleName);
            Path file = sources.resolve(type.getPackageName().replace('.', '/')).resolve(simpleName + ".java");
            Files.createDirectories(file.getParent());
            Files.writeString(file, source, StandardCharsets.UTF_8);
            files.add(file.toString());
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        List<String> options = new ArrayList<>(List.of(
                "-d", classes.toString(), "-cp", classPath, "-proc:none", "-nowarn", "-Xlint:none", "--release", "25"));
        options.addAll(files);
        int status = javac.run(null, null, null, options.toArray(String[]::new));
        if (status != 0) {
            throw new IllegalStateException("javac failed on Chronicle's generated value classes: " + files);
        }
    }
}
