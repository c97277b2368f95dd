package io.hicache.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.PageHash;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Issue 39, part 2: placement is a function of membership alone. A model test over random memberships and keys:
 * every client agrees, a join moves slots only to the newcomer and about 1/N of them, a leave moves only the leaver's,
 * and the figures match a vector that the Python client checks too.
 */
class PlacementTest {
    private static List<ClusterMember> members(int n, String prefix) {
        List<ClusterMember> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new ClusterMember(prefix + i, "10.0.0." + (i % 250 + 1), 7370 + i, 1L << 30, 1));
        }
        return out;
    }

    private static PageHash randomHash(Random r) {
        byte[] b = new byte[32];
        r.nextBytes(b);
        return PageHash.fromBytes(b, 0);
    }

    @Test
    void everyClientWithTheSameMembersMapsEveryKeyAlike() {
        Random r = new Random(39);
        for (int round = 0; round < 20; round++) {
            List<ClusterMember> ms = members(1 + r.nextInt(40), "m" + round + "-");
            List<ClusterMember> shuffled = new ArrayList<>(ms);
            Collections.shuffle(shuffled, r);
            int replicas = 1 + r.nextInt(3);
            Placement a = new Placement(ms, replicas);
            Placement b = new Placement(shuffled, replicas);
            for (int k = 0; k < 2000; k++) {
                PageHash h = randomHash(r);
                int slot = Placement.slotOf(h);
                assertEquals(a.ownerOf(h), b.ownerOf(h));
                int[] oa = a.owners(slot);
                int[] ob = b.owners(slot);
                assertEquals(Math.min(replicas, ms.size()), oa.length);
                assertArrayEquals(oa, ob, "the same members in the same order");
                assertEquals(a.firstOwner(slot), oa[0], "the first of the owners is the first owner");
                assertEquals(oa.length, java.util.Arrays.stream(oa).distinct().count(), "replicas on distinct members");
            }
        }
    }

    @Test
    void aJoinMovesSlotsOnlyToTheNewcomerAndAboutOneInNPlusOne() {
        List<ClusterMember> ms = members(10, "node-");
        Placement before = new Placement(ms, 1);
        List<ClusterMember> joined = new ArrayList<>(ms);
        joined.add(new ClusterMember("node-new", "10.0.1.1", 7370, 1L << 30, 1));
        Placement after = new Placement(joined, 1);
        int moved = 0;
        for (int s = 0; s < Placement.SLOTS; s++) {
            ClusterMember was = before.members().get(before.firstOwner(s));
            ClusterMember is = after.members().get(after.firstOwner(s));
            if (!was.equals(is)) {
                assertEquals("node-new", is.id(), "slot " + s + " moved between old members");
                moved++;
            }
        }
        double ratio = moved / (double) Placement.SLOTS * 11;
        assertTrue(ratio > 0.95 && ratio < 1.05, "moved " + moved + " slots: " + ratio + " x 1/(N+1)");
    }

    @Test
    void aLeaveMovesOnlyTheLeaversSlots() {
        List<ClusterMember> ms = members(7, "n");
        Placement before = new Placement(ms, 1);
        Placement after = new Placement(ms.subList(1, 7), 1);
        for (int s = 0; s < Placement.SLOTS; s += 7) {
            ClusterMember was = before.members().get(before.firstOwner(s));
            ClusterMember is = after.members().get(after.firstOwner(s));
            if (!was.id().equals("n0")) {
                assertEquals(was, is, "slot " + s);
            }
        }
    }

    @Test
    void slotsSpreadEvenly() {
        int[] per = new Placement(members(100, "m"), 1).slotsPerMember();
        double mean = Placement.SLOTS / 100.0;
        int max = java.util.Arrays.stream(per).max().orElseThrow();
        assertTrue(max / mean <= 1.05, "max/mean " + max / mean);
    }

    /** The same figures as clients/python/tests/test_cluster.py: the two implementations agree. */
    @Test
    void theSharedVectorHolds() {
        assertEquals(0x66570ff05a207404L, Placement.seedOf("node-a"), "seed of node-a");
        List<ClusterMember> ms = new ArrayList<>();
        for (String id : List.of("node-c", "node-a", "node-e", "node-b", "node-d")) {
            ms.add(new ClusterMember(id, "127.0.0.1", 7370, 0, 0));
        }
        Placement p = new Placement(ms, 3);
        int[] slots = {0, 1, 2, 3, 12345, 777777, 1048575};
        String[][] owners = {
            {"node-e", "node-b", "node-c"},
            {"node-a", "node-b", "node-d"},
            {"node-e", "node-b", "node-d"},
            {"node-b", "node-c", "node-a"},
            {"node-a", "node-d", "node-c"},
            {"node-e", "node-b", "node-c"},
            {"node-a", "node-b", "node-c"}
        };
        for (int i = 0; i < slots.length; i++) {
            int[] o = p.owners(slots[i]);
            for (int r = 0; r < 3; r++) {
                assertEquals(owners[i][r], p.members().get(o[r]).id(), "slot " + slots[i] + " owner " + r);
            }
        }
        byte[] b = new byte[32];
        b[0] = (byte) 0xAB;
        b[1] = (byte) 0xCD;
        b[2] = (byte) 0xEF;
        assertEquals(0xABCDE, Placement.slotOf(PageHash.fromBytes(b, 0)));
    }

    @Test
    void badMembershipsAreRefused() {
        ClusterMember a = new ClusterMember("a", "h", 1, 0, 0);
        assertThrows(IllegalArgumentException.class, () -> new Placement(List.of(a, a), 1));
        assertThrows(IllegalArgumentException.class, () -> new ClusterMember("a/b", "h", 1, 0, 0));
        assertThrows(
                IllegalStateException.class,
                () -> new Placement(List.of(), 1).ownerOf(PageHash.fromBytes(new byte[32], 0)));
        assertEquals(-1, new Placement(List.of(), 1).firstOwner(5));
    }
}
