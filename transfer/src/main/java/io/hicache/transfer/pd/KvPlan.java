package io.hicache.transfer.pd;

import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.page.AttentionKind;
import io.hicache.core.page.PageFormat;
import io.hicache.transfer.TransferRequest;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Turns "prefill pages {@code src[i]} go to decode pages {@code dst[i]}" into write requests, in as few as the two
 * layouts allow. Both pools are layer-first ({@code [layer][part][page][token][heads*dim]}).
 *
 * <ul>
 *   <li>Same heads on both sides (equal tensor parallelism, or MLA, whose latent is not split): one request per layer
 *       and part for every run of pages that are consecutive on both sides.
 *   <li>Different heads (MHA with different TP sizes): the rows differ in width, so each token row's shared head
 *       slice is one request (per layer, part, page and token), as SGLang's {@code send_kvcache_slice} does.
 * </ul>
 * Stateless.
 */
final class KvPlan {
    private KvPlan() {}

    static List<TransferRequest> writes(
            RankSpec prefill, MemorySegment prefillKv, RankSpec decode, int[] src, int[] dst) {
        PageFormat pf = prefill.format();
        PageFormat df = decode.format();
        int layers = pf.geometry().layers();
        int parts = pf.geometry().attention().parts();
        long chunk = DeviceLayout.chunkBytes(pf);
        List<TransferRequest> out = new ArrayList<>();
        boolean mla = pf.geometry().attention() == AttentionKind.MLA;
        int lo = Math.max(prefill.firstHead(), decode.firstHead());
        int hi = Math.min(prefill.firstHead() + prefill.heads(), decode.firstHead() + decode.heads());
        if (!mla && hi <= lo) {
            return out;
        }
        boolean wholeRows = mla
                || lo == prefill.firstHead()
                        && hi - lo == prefill.heads()
                        && lo == decode.firstHead()
                        && hi - lo == decode.heads();
        for (int layer = 0; layer < layers; layer++) {
            for (int part = 0; part < parts; part++) {
                if (wholeRows) {
                    for (int i = 0; i < src.length; ) {
                        int run = 1;
                        while (i + run < src.length && src[i + run] == src[i] + run && dst[i + run] == dst[i] + run) {
                            run++;
                        }
                        long from = DeviceLayout.chunkOffset(pf, prefill.kvPages(), src[i], layer, part);
                        long to = DeviceLayout.chunkOffset(df, decode.kvPages(), dst[i], layer, part);
                        out.add(TransferRequest.write(prefillKv.asSlice(from, run * chunk), RankSpec.KV_REGION, to));
                        i += run;
                    }
                } else {
                    long headBytes = pf.rowBytes() / prefill.heads();
                    long length = (hi - lo) * headBytes;
                    long srcSkip = (lo - prefill.firstHead()) * headBytes;
                    long dstSkip = (lo - decode.firstHead()) * headBytes;
                    for (int i = 0; i < src.length; i++) {
                        long from = DeviceLayout.chunkOffset(pf, prefill.kvPages(), src[i], layer, part);
                        long to = DeviceLayout.chunkOffset(df, decode.kvPages(), dst[i], layer, part);
                        for (int t = 0; t < pf.pageSizeTokens(); t++) {
                            out.add(TransferRequest.write(
                                    prefillKv.asSlice(from + t * pf.rowBytes() + srcSkip, length),
                                    RankSpec.KV_REGION,
                                    to + t * df.rowBytes() + dstSkip));
                        }
                    }
                }
            }
        }
        return out;
    }

    /** The prefill ranks decode rank {@code decode} takes KV from, as SGLang maps them. */
    static int[] prefillRanksFor(RankSpec decode, int prefillTp) {
        int dTp = decode.tpSize();
        if (dTp >= prefillTp) {
            requireMultiple(dTp, prefillTp);
            return new int[] {decode.tpRank() / (dTp / prefillTp)};
        }
        requireMultiple(prefillTp, dTp);
        int ratio = prefillTp / dTp;
        int[] ranks = new int[ratio];
        for (int i = 0; i < ratio; i++) {
            ranks[i] = decode.tpRank() * ratio + i;
        }
        return ranks;
    }

    /** How many decode ranks a prefill rank must hear from for one room. */
    static int decodeRanksPerPrefillRank(int decodeTp, int prefillTp) {
        return decodeTp > prefillTp ? decodeTp / prefillTp : 1;
    }

    private static void requireMultiple(int big, int small) {
        if (big % small != 0) {
            throw new IllegalArgumentException("tensor-parallel sizes " + big + " and " + small
                    + " do not divide: one side's size must be a multiple of the other's");
        }
    }
}
