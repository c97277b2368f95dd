package io.hicache.cluster;

import io.hicache.core.key.PageHash;
import io.hicache.core.util.Checks;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Where a page lives in a cluster, computed by every client from the membership alone (docs/cluster.md):
 *
 * <ul>
 *   <li>its <b>slot</b> is the top {@value #SLOT_BITS} bits of its page hash (a SHA-256: uniform), one of
 *       {@value #SLOTS} slots;
 *   <li>a slot's <b>owners</b> are the {@code replicas} members of highest rendezvous weight
 *       {@code mix64(seed(member) ^ slot * 0x9E3779B97F4A7C15)} (unsigned; {@code seed} the first 8 bytes of the
 *       SHA-256 of the member's id, big-endian; {@code mix64} SplitMix64's finalizer), ties to the smaller id.
 * </ul>
 *
 * A join takes to the new member only the slots it now weighs most for (about 1/N of them) and a leave moves only the
 * leaver's; no data moves (a page whose slot moved is a miss, or comes from a shared L3). Slots are many (2^20) so
 * that they spread evenly: with 100 members the fullest holds about 3% over the mean (a Redis-sized 16,384 slots
 * would leave it about 18% over: see docs/benchmarks.md, cluster).
 *
 * <p>Immutable as seen from outside; thread-safe. A slot's first owner is computed when first asked and kept (an
 * idempotent race: any thread computes the same).
 */
public final class Placement {
    /** Bits of a page hash that name its slot. */
    public static final int SLOT_BITS = 20;
    /** The number of slots. */
    public static final int SLOTS = 1 << SLOT_BITS;

    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private final List<ClusterMember> members;
    private final long[] seeds;
    private final int replicas;
    /** Per slot, its first owner's index plus one; 0 until computed. */
    private final int[] first;

    /**
     * The placement over {@code members} (any order; a member id at most once) with {@code replicas} owners per slot
     * (at most the member count).
     */
    public Placement(List<ClusterMember> members, int replicas) {
        Checks.checkNotNull(members, "members");
        Checks.checkPositive(replicas, "replicas");
        List<ClusterMember> sorted = new ArrayList<>(members);
        sorted.sort(Comparator.comparing(ClusterMember::id));
        for (int i = 1; i < sorted.size(); i++) {
            Checks.requireArgument(
                    !sorted.get(i).id().equals(sorted.get(i - 1).id()),
                    "member %s is listed twice",
                    sorted.get(i).id());
        }
        this.members = List.copyOf(sorted);
        this.replicas = replicas;
        this.seeds = new long[sorted.size()];
        for (int i = 0; i < seeds.length; i++) {
            seeds[i] = seedOf(sorted.get(i).id());
        }
        this.first = new int[SLOTS];
    }

    /** The members, by id. */
    public List<ClusterMember> members() {
        return members;
    }

    /** Owners per slot (the members there are, if fewer). */
    public int replicas() {
        return Math.min(replicas, members.size());
    }

    /** The slot of a page. */
    public static int slotOf(PageHash hash) {
        return (int) (hash.prefix64() >>> (Long.SIZE - SLOT_BITS));
    }

    /** A member's seed: the first 8 bytes of the SHA-256 of its id (UTF-8), big-endian. */
    public static long seedOf(String memberId) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(memberId.getBytes(StandardCharsets.UTF_8));
            long v = 0;
            for (int i = 0; i < 8; i++) {
                v = v << 8 | (d[i] & 0xFF);
            }
            return v;
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }

    /** A member's rendezvous weight for a slot (compared unsigned). */
    public static long weight(long seed, int slot) {
        long z = seed ^ (slot * GOLDEN);
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** The index (in {@link #members()}) of the slot's first owner; -1 without members. */
    public int firstOwner(int slot) {
        Checks.checkInRange(slot, 0, SLOTS - 1, "slot");
        if (seeds.length == 0) {
            return -1;
        }
        int known = first[slot];
        if (known != 0) {
            return known - 1;
        }
        int best = 0;
        long bestWeight = weight(seeds[0], slot);
        for (int m = 1; m < seeds.length; m++) {
            long w = weight(seeds[m], slot);
            if (Long.compareUnsigned(w, bestWeight) > 0) { // ties keep the earlier, smaller id
                best = m;
                bestWeight = w;
            }
        }
        first[slot] = best + 1;
        return best;
    }

    /** The slot's owners, first owner first: indexes in {@link #members()}. */
    public int[] owners(int slot) {
        Checks.checkInRange(slot, 0, SLOTS - 1, "slot");
        int r = replicas();
        if (r <= 1) {
            int o = firstOwner(slot);
            return o < 0 ? new int[0] : new int[] {o};
        }
        Integer[] order = new Integer[seeds.length];
        long[] w = new long[seeds.length];
        for (int m = 0; m < seeds.length; m++) {
            order[m] = m;
            w[m] = weight(seeds[m], slot);
        }
        Arrays.sort(order, (a, b) -> {
            int c = Long.compareUnsigned(w[b], w[a]);
            return c != 0 ? c : Integer.compare(a, b);
        });
        int[] out = new int[r];
        for (int i = 0; i < r; i++) {
            out[i] = order[i];
        }
        return out;
    }

    /** The first owner of a page; throws without members. */
    public ClusterMember ownerOf(PageHash hash) {
        Checks.requireState(!members.isEmpty(), "the cluster has no members");
        return members.get(firstOwner(slotOf(hash)));
    }

    /** Slots whose first owner each member is, by {@link #members()} index (computes every slot). */
    public int[] slotsPerMember() {
        int[] count = new int[members.size()];
        if (count.length > 0) {
            for (int s = 0; s < SLOTS; s++) {
                count[firstOwner(s)]++;
            }
        }
        return count;
    }
}
