package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The PD messages survive their wire form, and a malformed one is refused with the reason. */
class PdMessageTest {
    private static final RankSpec DECODE =
            new RankSpec(PdHandoffTest.MODEL, 4, 2, 1, 32, 8, 64, "127.0.0.1:9").withStaging(6);

    @Test
    void everyKindSurvivesItsWireForm() {
        PdMessage.Destination destination = new PdMessage.Destination(new int[] {7, 3, 4, 5}, 2, 1);
        PdMessage.Info info =
                new PdMessage.Info(41, DECODE, destination, true, DeliveryPath.Kind.STAGED, new int[] {0, 1, 5});
        PdMessage.Info back = (PdMessage.Info) PdMessage.decode(info.encode());
        assertEquals(41, back.room());
        assertEquals(DECODE, back.decode());
        assertEquals(destination, back.destination());
        assertTrue(back.dummy());
        assertEquals(DeliveryPath.Kind.STAGED, back.path());
        assertArrayEquals(new int[] {0, 1, 5}, back.stagingSlots());

        PdMessage.Info direct = new PdMessage.Info(
                1, DECODE, new PdMessage.Destination(new int[0], 0, 0), false, DeliveryPath.Kind.DEVICE, new int[0]);
        PdMessage.Info directBack = (PdMessage.Info) PdMessage.decode(direct.encode());
        assertEquals(0, directBack.destination().positions());
        assertEquals(0, directBack.stagingSlots().length);
        assertEquals(DeliveryPath.Kind.DEVICE, directBack.path());

        for (PdMessage m : new PdMessage[] {
            new PdMessage.Layer(5, 1, 2, 3, 11),
            new PdMessage.Status(5, 0, KvPoll.SUCCESS, ""),
            new PdMessage.Abort(5, "127.0.0.1:4000"),
            new PdMessage.AbortAck(Long.MAX_VALUE, 3)
        }) {
            assertEquals(m, PdMessage.decode(m.encode()));
        }
    }

    @Test
    void aReasonStaysOnOneLine() {
        PdMessage.Status failed = new PdMessage.Status(9, 0, KvPoll.FAILED, "two\nlines");
        assertEquals(new PdMessage.Status(9, 0, KvPoll.FAILED, "two lines"), PdMessage.decode(failed.encode()));
    }

    @Test
    void malformedMessagesAreRefusedWithTheReason() {
        IllegalArgumentException unknown = assertThrows(
                IllegalArgumentException.class,
                () -> PdMessage.decode("HELLO\nroom=1".getBytes(StandardCharsets.UTF_8)));
        assertTrue(unknown.getMessage().contains("unknown PD message kind 'HELLO'"), unknown.getMessage());
        IllegalArgumentException missing = assertThrows(
                IllegalArgumentException.class,
                () -> PdMessage.decode("ABORT_ACK\nroom=1".getBytes(StandardCharsets.UTF_8)));
        assertTrue(missing.getMessage().contains("ABORT_ACK message without rank"), missing.getMessage());
        IllegalArgumentException bad = assertThrows(
                IllegalArgumentException.class,
                () -> PdMessage.decode("LAYER\nroom=x".getBytes(StandardCharsets.UTF_8)));
        assertTrue(bad.getMessage().contains("malformed LAYER"), bad.getMessage());
        assertThrows(IllegalArgumentException.class, () -> DeliveryPath.Kind.named("carrier-pigeon"));
    }

    @Test
    void aDestinationIsCopiedAndChecked() {
        int[] pages = {1, 2, 3};
        PdMessage.Destination d = new PdMessage.Destination(pages, 0, 1);
        pages[0] = 99;
        assertArrayEquals(new int[] {1, 2, 3}, d.pages());
        assertEquals(2, d.wanted());
        assertArrayEquals(new int[] {2, 3}, d.pages(1, 2));
        IllegalArgumentException prefix =
                assertThrows(IllegalArgumentException.class, () -> new PdMessage.Destination(new int[] {1}, 0, 2));
        assertTrue(prefix.getMessage().contains("prefix of 2 pages for 1 pages"), prefix.getMessage());
    }
}
