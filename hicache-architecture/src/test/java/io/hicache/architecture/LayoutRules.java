package io.hicache.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaField;
import com.tngtech.archunit.core.domain.JavaMember;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.util.LinkedHashSet;
import java.util.Optional;
import java.util.Set;

/** The rules of {@link Layout}, as ArchUnit rules over compiled classes. Stateless. */
final class LayoutRules {
    private static final String ROOT = "io.hicache";

    private LayoutRules() {}

    /** Every package of HiCache's main code is in the table, so no package escapes the other rules. */
    static ArchRule everyPackageIsInTheTable() {
        return classes()
                .that()
                .resideInAPackage(ROOT + "..")
                .should(new ArchCondition<>("be in a package of Layout") {
                    @Override
                    public void check(JavaClass c, ConditionEvents events) {
                        if (Layout.find(c.getPackageName()).isEmpty()) {
                            events.add(
                                    SimpleConditionEvent.violated(
                                            c,
                                            "package " + c.getPackageName() + " of " + c.getName()
                                                    + " is not in Layout.PACKAGES: add it (module, rank, API or internal) and to docs/architecture.md"));
                        }
                    }
                })
                .allowEmptyShould(false);
    }

    /**
     * A class uses its own module's packages of the same or a lower rank, never a plug-in package but its own, and other
     * modules only where its module may depend on them (the POMs' edges), and there only their API packages.
     */
    static ArchRule importsFollowTheLayout() {
        return classes()
                .that()
                .resideInAPackage(ROOT + "..")
                .should(new ArchCondition<>("import only down the layers") {
                    @Override
                    public void check(JavaClass c, ConditionEvents events) {
                        Optional<Layout.Pkg> from = Layout.find(c.getPackageName());
                        if (from.isEmpty()) {
                            return; // reported by everyPackageIsInTheTable
                        }
                        for (Dependency d : c.getDirectDependenciesFromSelf()) {
                            JavaClass target = d.getTargetClass().getBaseComponentType();
                            if (!target.getPackageName().startsWith(ROOT)) {
                                continue;
                            }
                            problem(from.get(), target)
                                    .ifPresent(why -> events.add(
                                            SimpleConditionEvent.violated(d, d.getDescription() + ": " + why)));
                        }
                    }
                })
                .allowEmptyShould(false);
    }

    private static Optional<String> problem(Layout.Pkg from, JavaClass target) {
        Optional<Layout.Pkg> found = Layout.find(target.getPackageName());
        if (found.isEmpty()) {
            return Optional.of("uses " + target.getPackageName() + ", which is not in Layout.PACKAGES");
        }
        Layout.Pkg to = found.get();
        if (to.name().equals(from.name())) {
            return Optional.empty();
        }
        if (to.kind() == Layout.Kind.PLUGIN) {
            return Optional.of(to.name() + " is a plug-in of " + to.module()
                    + ", found by ServiceLoader: no other package" + " may use it");
        }
        if (to.module().equals(from.module())) {
            return to.rank() <= from.rank()
                    ? Optional.empty()
                    : Optional.of("points up the layers of " + from.module() + " (" + from.name() + " rank "
                            + from.rank() + " -> " + to.name() + " rank " + to.rank() + ")");
        }
        if (!Layout.MODULE_DEPENDENCIES.getOrDefault(from.module(), Set.of()).contains(to.module())) {
            return Optional.of("module " + from.module() + " may not depend on module " + to.module());
        }
        if (to.kind() != Layout.Kind.API
                && !Layout.INTERNAL_USE_ALLOWED
                        .getOrDefault(from.module(), Set.of())
                        .contains(to.name())) {
            return Optional.of(to.name() + " is internal to " + to.module());
        }
        return Optional.empty();
    }

    /**
     * What a public class of an API package shows (its public and protected constructors, methods and fields: their
     * types, type arguments, parameters and exceptions) names only public types of API packages: no internal type and
     * no package-private one leaks into what other modules compile against.
     */
    static ArchRule publicSignaturesUseOnlyApiTypes() {
        return classes()
                .that()
                .resideInAPackage(ROOT + "..")
                .and()
                .arePublic()
                .should(new ArchCondition<>("show only public API types in public signatures") {
                    @Override
                    public void check(JavaClass c, ConditionEvents events) {
                        Optional<Layout.Pkg> own = Layout.find(c.getPackageName());
                        if (own.isEmpty() || own.get().kind() != Layout.Kind.API) {
                            return;
                        }
                        for (JavaMember m : c.getMembers()) {
                            if (!isShown(m.getModifiers())) {
                                continue;
                            }
                            for (JavaClass t : signatureTypes(m)) {
                                hiddenType(t)
                                        .ifPresent(why -> events.add(SimpleConditionEvent.violated(
                                                m, m.getFullName() + " shows " + t.getName() + ", " + why)));
                            }
                        }
                    }
                })
                .allowEmptyShould(false);
    }

    private static boolean isShown(Set<JavaModifier> modifiers) {
        return modifiers.contains(JavaModifier.PUBLIC) || modifiers.contains(JavaModifier.PROTECTED);
    }

    private static Set<JavaClass> signatureTypes(JavaMember m) {
        Set<JavaClass> types = new LinkedHashSet<>();
        if (m instanceof JavaField f) {
            types.addAll(f.getType().getAllInvolvedRawTypes());
        } else if (m instanceof JavaCodeUnit u) {
            types.addAll(u.getReturnType().getAllInvolvedRawTypes());
            u.getParameterTypes().forEach(t -> types.addAll(t.getAllInvolvedRawTypes()));
            u.getThrowsClause().getTypes().forEach(types::add);
        }
        return types;
    }

    /** Why {@code t} may not appear in a public signature of an API package, or empty when it may. */
    private static Optional<String> hiddenType(JavaClass t) {
        JavaClass type = t.getBaseComponentType();
        if (!type.getPackageName().startsWith(ROOT) || type.isPrimitive()) {
            return Optional.empty();
        }
        if (!type.getModifiers().contains(JavaModifier.PUBLIC)) {
            return Optional.of("which is not public");
        }
        Optional<Layout.Pkg> pkg = Layout.find(type.getPackageName());
        if (pkg.isPresent() && pkg.get().kind() != Layout.Kind.API) {
            return Optional.of("a type of the internal package " + type.getPackageName());
        }
        return Optional.empty();
    }

    /** No two packages import each other, directly or through others. */
    static ArchRule noPackageCycles() {
        return slices().matching(ROOT + ".(**)").should().beFreeOfCycles();
    }
}
