package io.hicache.storage.nixl.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** How a post of parallel parts ends: once, with the error that explains it. */
class FanInCompletionTest {
    private final List<String> ended = new ArrayList<>();
    private final NixlBackend.Completion done = (status, detail) -> ended.add(status + ":" + detail);

    @Test
    void noPartsIsASuccessAtOnceAndTheLastPartCompletesOnce() {
        new FanInCompletion(done, 0);
        assertEquals(List.of("SUCCESS:null"), ended);
        ended.clear();
        FanInCompletion post = new FanInCompletion(done, 2);
        post.partEnded();
        assertTrue(ended.isEmpty());
        post.partEnded();
        assertEquals(List.of("SUCCESS:null"), ended);
    }

    @Test
    void theFirstRealErrorWinsOverCancelsAndCancelsTheOtherParts() {
        FanInCompletion post = new FanInCompletion(done, 3);
        AtomicInteger abandoned = new AtomicInteger();
        post.onCancel(abandoned::incrementAndGet);
        post.fail(NixlStatus.ERR_CANCELED, "a: abandoned");
        post.partEnded();
        assertTrue(post.isCancelled());
        assertEquals(1, abandoned.get());
        post.fail(NixlStatus.ERR_NOT_FOUND, "b: missing");
        post.partEnded();
        post.fail(NixlStatus.ERR_BACKEND, "c: later");
        post.onCancel(abandoned::incrementAndGet);
        assertEquals(2, abandoned.get(), "a part tracked after the cancel is stopped at once");
        post.partEnded();
        assertEquals(List.of("ERR_NOT_FOUND:b: missing"), ended);
    }

    @Test
    void aCancelThatStoppedAPartEndsAsCancelledAndOneThatStoppedNothingAsSuccess() {
        FanInCompletion stoppedOne = new FanInCompletion(done, 2);
        stoppedOne.cancel();
        stoppedOne.stopped();
        stoppedOne.partEnded();
        stoppedOne.partEnded();
        FanInCompletion tooLate = new FanInCompletion(done, 1);
        tooLate.cancel();
        tooLate.partEnded();
        assertEquals(List.of("ERR_CANCELED:cancelled", "SUCCESS:null"), ended);
        assertFalse(new FanInCompletion(done, 1).isCancelled());
    }
}
