package io.hicache.architecture;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import io.hicache.architecture.fixture.ArchFixtureUnmapped;
import io.hicache.bench.ArchFixtureUseOfInternal;
import io.hicache.core.page.ArchFixtureUpwardImport;
import io.hicache.storage.file.ArchFixtureUseOfUndeclaredModule;
import io.hicache.transfer.ArchFixtureEngineSide;
import io.hicache.transfer.spi.ArchFixtureSpiSide;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Reads the compiled main classes of every module (the jars on this module's test class path, test jars excluded) and
 * checks them against {@link Layout}. The fixture classes show that each rule fails on the violation it is for.
 */
class ArchitectureTest {
    private static JavaClasses main;

    @BeforeAll
    static void importMainClasses() {
        main = new ClassFileImporter()
                .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .withImportOption(location -> !location.contains("-tests.jar") && !location.contains("/test-classes/"))
                .importPackages("io.hicache");
        assertTrue(main.size() > 200, "expected the main classes of every module, found " + main.size());
    }

    @Test
    void everyPackageIsInTheLayout() {
        LayoutRules.everyPackageIsInTheTable().check(main);
    }

    @Test
    void importsGoDownTheLayersAndOnlyToApiPackagesOfDeclaredModules() {
        LayoutRules.importsFollowTheLayout().check(main);
    }

    @Test
    void noPackageCycles() {
        LayoutRules.noPackageCycles().check(main);
    }

    /* ---------------------------------------------------------------- the rules have teeth */

    @Test
    void anImportUpTheLayersFails() {
        JavaClasses bad = new ClassFileImporter().importClasses(ArchFixtureUpwardImport.class);
        AssertionError e = assertThrows(AssertionError.class, () -> LayoutRules.importsFollowTheLayout().check(bad));
        assertTrue(e.getMessage().contains("points up the layers of hicache-core"), e.getMessage());
    }

    @Test
    void aUseOfAnotherModulesInternalPackageFails() {
        JavaClasses bad = new ClassFileImporter().importClasses(ArchFixtureUseOfInternal.class);
        AssertionError e = assertThrows(AssertionError.class, () -> LayoutRules.importsFollowTheLayout().check(bad));
        assertTrue(e.getMessage().contains("is internal to storage-nixl"), e.getMessage());
    }

    @Test
    void aUseOfAModuleThePomDoesNotDeclareFails() {
        JavaClasses bad = new ClassFileImporter().importClasses(ArchFixtureUseOfUndeclaredModule.class);
        AssertionError e = assertThrows(AssertionError.class, () -> LayoutRules.importsFollowTheLayout().check(bad));
        assertTrue(e.getMessage().contains("module storage-file may not depend on module storage-s3"), e.getMessage());
    }

    @Test
    void aPackageCycleFails() {
        JavaClasses bad = new ClassFileImporter().importClasses(ArchFixtureSpiSide.class, ArchFixtureEngineSide.class);
        AssertionError e = assertThrows(AssertionError.class, () -> LayoutRules.noPackageCycles().check(bad));
        assertTrue(e.getMessage().contains("Cycle detected"), e.getMessage());
    }

    @Test
    void aPackageMissingFromTheTableFails() {
        JavaClasses bad = new ClassFileImporter().importClasses(ArchFixtureUnmapped.class);
        AssertionError e = assertThrows(AssertionError.class, () -> LayoutRules.everyPackageIsInTheTable().check(bad));
        assertTrue(e.getMessage().contains("is not in Layout.PACKAGES"), e.getMessage());
    }
}
