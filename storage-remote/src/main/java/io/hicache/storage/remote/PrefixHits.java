package io.hicache.storage.remote;

/**
 * A daemon's answer to PREFIX_HITS (docs/protocol.md §3): for a chain of pages, the longest leading run its host slab
 * holds, L3 holds, and either holds (what a GET could serve). Immutable.
 *
 * @param slab    leading pages in the host slab
 * @param l3      leading pages in L3 (0 unless {@code l3State} is {@link L3State#ANSWERED})
 * @param any     leading pages in either tier (the slab's alone when L3 did not answer)
 * @param l3State what became of L3's part
 */
public record PrefixHits(int slab, int l3, int any, L3State l3State) {
    /** What the daemon's L3 said. */
    public enum L3State {
        /** The daemon has no L3 store attached. */
        NO_L3,
        /** L3 answered. */
        ANSWERED,
        /** L3 did not answer before the request's deadline. */
        LATE,
        /** L3 failed to answer. */
        FAILED;

        static L3State of(int code) {
            return switch (code) {
                case 0 -> NO_L3;
                case 1 -> ANSWERED;
                case 2 -> LATE;
                case 3 -> FAILED;
                default -> throw new io.hicache.storage.remote.protocol.ProtocolException("l3_state " + code);
            };
        }
    }
}
