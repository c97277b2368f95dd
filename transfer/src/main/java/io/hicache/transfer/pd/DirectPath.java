package io.hicache.transfer.pd;

import io.hicache.transfer.LocalRegion;

/**
 * Host-visible pools on both sides: each chunk is one-sided writes from the prefill's pool region straight into the
 * decode's region {@link RankSpec#KV_REGION}, as {@link KvPlan} plans them (heads split for any pair of TP sizes). The
 * decode has nothing to reserve or settle: the pages are in place when the writes are acknowledged.
 *
 * @param pool the rank's pool, registered as {@link RankSpec#KV_REGION} (the source of a prefill's writes)
 */
record DirectPath(LocalRegion pool) implements DeliveryPath {
    @Override
    public Kind kind() {
        return Kind.DIRECT;
    }

    @Override
    public void send(PrefillRank rank, PrefillRoom room, Recipient recipient, int[] src, int position) {
        rank.writePages(room, recipient, pool, src, position);
    }
}
