package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import org.junit.jupiter.api.Test;

/**
 * Issue 19, part 2 across processes: two ranks, this JVM and a child, each with its own cache on an emulated device,
 * its own host pool and file store, agree through a TCP rank group on 127.0.0.1 while replaying the same multi-turn
 * chats (device-only, then all tiers). Every turn's device hits, load-backs and failures must be the same on both:
 * the path the GPU replay takes at TP 2, on the emulated device.
 */
class TpReplayTest {
    @Test
    void twoRankProcessesAnswerEveryTurnAlike() throws Exception {
        TpReplay.Outcome o;
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2)) {
            o = TpReplay.runTwoRanks(runtime, -1, KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16), 6, 3);
        }
        TpReplay.RankRun r = o.rank0();
        assertEquals(r.deviceOnlyTurns().size(), o.rank1DeviceOnly().size(), "rank 1 replayed every device-only turn");
        assertEquals(r.tierTurns().size(), o.rank1Tiers().size(), "rank 1 replayed every turn with all tiers");
        assertEquals(0, o.disagreements(), "turns on which the ranks answered differently");
        assertEquals(0, r.tiers().failed() + r.deviceOnly().failed(), "failed turns");
        assertTrue(
                r.tiers().served() > r.deviceOnly().served(),
                "the host tier and the store served more: " + r.tiers() + " vs " + r.deviceOnly());
        assertTrue(r.loads().bytes > 0, "some turns loaded pages back from the host");
    }
}
