package io.hicache.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The tuning record's checks and defaults (no GPU needed). */
class CudaTuningTest {
    @Test
    void backupsShareTheDeviceAsBeforeUnlessAsked() {
        assertEquals(8, CudaTuning.DEFAULT.backupBlocksPerMultiprocessor());
        assertFalse(CudaTuning.DEFAULT.prioritizeLoads());
        CudaTuning shared = CudaTuning.DEFAULT.withBackupShare(2, true);
        assertEquals(2, shared.backupBlocksPerMultiprocessor());
        assertTrue(shared.prioritizeLoads());
        assertEquals(CudaTuning.DEFAULT.layersPerLoadLaunch(), shared.layersPerLoadLaunch(), "nothing else changes");
    }

    @Test
    void outOfRangeSharesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> CudaTuning.DEFAULT.withBackupShare(0, true));
        assertThrows(IllegalArgumentException.class, () -> CudaTuning.DEFAULT.withBackupShare(9, true));
        assertThrows(IllegalArgumentException.class, () -> CudaTuning.DEFAULT.withLayersPerLoadLaunch(0));
    }
}
