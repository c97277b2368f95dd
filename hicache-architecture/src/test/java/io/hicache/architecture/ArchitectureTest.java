package io.hicache.architecture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.Location;
import com.tngtech.archunit.lang.ArchRule;
import io.hicache.architecture.fixture.ArchFixtureUnmapped;
import io.hicache.bench.ArchFixtureAllowedInternal;
import io.hicache.bench.ArchFixtureUseOfInternal;
import io.hicache.core.page.ArchFixtureLeakyApi;
import io.hicache.core.page.ArchFixtureUpwardImport;
import io.hicache.storage.file.ArchFixtureLegalImports;
import io.hicache.storage.file.ArchFixtureUnmappedTarget;
import io.hicache.storage.file.ArchFixtureUseOfUndeclaredModule;
import io.hicache.transfer.ArchFixtureEngineSide;
import io.hicache.transfer.ArchFixtureEngineUsesPlugin;
import io.hicache.transfer.spi.ArchFixtureSpiSide;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Reads the compiled main classes of every module, and the three kits shipped in test jars, from this module's test class
 * path and checks them against {@link Layout}. The fixture classes show that each rule fails on the violation it is for,
 * and passes what it should.
 */
class ArchitectureTest {
    private static JavaClasses main;

    @BeforeAll
    static void importMainClasses() {
        main = new ClassFileImporter()
                .withImportOption(ArchitectureTest::isMainOrKit)
                .importPackages("io.hicache");
    }

    /** Main classes, plus the kits of the test jars; no other test classes (this module's fixtures among them). */
    private static boolean isMainOrKit(Location location) {
        String where = location.toString();
        if (where.contains("/io/hicache/cuda/kit/")
                || where.contains("/io/hicache/transfer/kit/")
                || where.contains("/io/hicache/transfer/cuda/kit/")) {
            return !where.contains("/hicache-architecture/");
        }
        return !where.contains("-tests.jar") && !where.contains("/test-classes/");
    }

    @Test
    void everyPackageOfTheLayoutIsPresentAndNoOtherIs() {
        Set<String> imported =
                main.stream().map(JavaClass::getPackageName).collect(Collectors.toCollection(TreeSet::new));
        Set<String> listed =
                Layout.PACKAGES.stream().map(Layout.Pkg::name).collect(Collectors.toCollection(TreeSet::new));
        assertEquals(
                listed,
                imported,
                "packages of the class path (right) against Layout.PACKAGES (left): a module is "
                        + "missing from this module's test class path, or the table has a dead entry");
        LayoutRules.everyPackageIsInTheTable().check(main);
    }

    @Test
    void importsGoDownTheLayersAndOnlyToApiPackagesOfDeclaredModules() {
        LayoutRules.importsFollowTheLayout().check(main);
    }

    @Test
    void publicSignaturesShowOnlyPublicApiTypes() {
        LayoutRules.publicSignaturesUseOnlyApiTypes().check(main);
    }

    @Test
    void noPackageCycles() {
        LayoutRules.noPackageCycles().check(main);
    }

    @Test
    void theModuleEdgesAreThePomsEdges() throws Exception {
        assertEquals(
                Layout.MODULE_DEPENDENCIES,
                Poms.compileDependencies(),
                "Layout.MODULE_DEPENDENCIES against the " + "compile-scope HiCache dependencies of the POMs");
    }

    @Test
    void theDocsPackageTableIsTheLayout() throws Exception {
        assertEquals(
                DocTables.layoutPackages(),
                DocTables.packages(),
                "docs/architecture.md's package table (right) "
                        + "against Layout.PACKAGES (left): change both together");
    }

    @Test
    void theDocsModuleEdgesAreTheLayouts() throws Exception {
        assertEquals(
                new TreeMap<>(Layout.MODULE_DEPENDENCIES),
                DocTables.moduleEdges(),
                "docs/architecture.md's module edges (right) against Layout.MODULE_DEPENDENCIES (left)");
    }

    /* ---------------------------------------------------------------- the rules have teeth */

    @Test
    void legalImportsPass() {
        LayoutRules.importsFollowTheLayout()
                .check(new ClassFileImporter()
                        .importClasses(ArchFixtureLegalImports.class, ArchFixtureAllowedInternal.class));
    }

    @Test
    void anImportUpTheLayersFails() {
        assertViolation(
                LayoutRules.importsFollowTheLayout(),
                "points up the layers of hicache-core",
                ArchFixtureUpwardImport.class);
    }

    @Test
    void aUseOfAnotherModulesInternalPackageFails() {
        assertViolation(
                LayoutRules.importsFollowTheLayout(), "is internal to transfer", ArchFixtureUseOfInternal.class);
    }

    @Test
    void aUseOfAPlugInFromItsOwnModuleFails() {
        assertViolation(
                LayoutRules.importsFollowTheLayout(), "is a plug-in of transfer", ArchFixtureEngineUsesPlugin.class);
    }

    @Test
    void aUseOfAModuleThePomDoesNotDeclareFails() {
        assertViolation(
                LayoutRules.importsFollowTheLayout(),
                "module storage-file may not depend on module storage-s3",
                ArchFixtureUseOfUndeclaredModule.class);
    }

    @Test
    void aUseOfAPackageMissingFromTheTableFails() {
        assertViolation(
                LayoutRules.importsFollowTheLayout(),
                "which is not in Layout.PACKAGES",
                ArchFixtureUnmappedTarget.class);
    }

    @Test
    void anInternalTypeInAPublicSignatureFails() {
        assertViolation(
                LayoutRules.publicSignaturesUseOnlyApiTypes(),
                "a type of the internal package io.hicache.core.tree",
                ArchFixtureLeakyApi.class);
    }

    @Test
    void aPackagePrivateTypeInAPublicSignatureFails() {
        assertViolation(
                LayoutRules.publicSignaturesUseOnlyApiTypes(), "which is not public", ArchFixtureLeakyApi.class);
    }

    @Test
    void aPackageCycleFails() {
        assertViolation(
                LayoutRules.noPackageCycles(), "Cycle detected", ArchFixtureSpiSide.class, ArchFixtureEngineSide.class);
    }

    @Test
    void aClassInAPackageMissingFromTheTableFails() {
        assertViolation(LayoutRules.everyPackageIsInTheTable(), "is not in Layout.PACKAGES", ArchFixtureUnmapped.class);
    }

    private static void assertViolation(ArchRule rule, String expected, Class<?>... classes) {
        JavaClasses bad = new ClassFileImporter().importClasses(classes);
        AssertionError e = assertThrows(AssertionError.class, () -> rule.check(bad));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }
}
