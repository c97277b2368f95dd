package io.hicache.storage.remote.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.store.PageStatus;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Pins every code the protocol puts on the wire to the value docs/protocol.md gives it. A failure here means the
 * protocol changed: clients built against the document would misread the daemon.
 */
class WireCodesTest {
    @Test
    void pageStatusesHaveTheDocumentedCodes() {
        Map<PageStatus, Integer> documented = Map.of(
                PageStatus.OK,
                0,
                PageStatus.EXISTS,
                1,
                PageStatus.MISS,
                2,
                PageStatus.CORRUPT,
                3,
                PageStatus.SIZE_MISMATCH,
                4,
                PageStatus.REJECTED,
                5,
                PageStatus.TIMED_OUT,
                6,
                PageStatus.CANCELLED,
                7,
                PageStatus.FAILED,
                8);
        assertEquals(
                EnumSet.allOf(PageStatus.class),
                Set.copyOf(documented.keySet()),
                "a new PageStatus needs a code in docs/protocol.md and in Wire");
        documented.forEach((status, code) -> {
            assertEquals(code.byteValue(), Wire.status(status), status.name());
            assertEquals(status, Wire.status(code.byteValue()), "code " + code);
        });
    }

    @Test
    void undefinedStatusCodesAreRefused() {
        for (int code : new int[] {9, 42, 127, -1, -128}) {
            assertThrows(ProtocolException.class, () -> Wire.status((byte) code), "code " + code);
        }
    }

    @Test
    void operationAndErrorCodesHaveTheDocumentedValues() {
        assertEquals(0x48435750, Wire.MAGIC);
        assertEquals(1, Wire.VERSION);
        assertEquals(16, Wire.HEADER_BYTES);
        assertEquals(0x01, Wire.HELLO);
        assertEquals(0x10, Wire.LEADING_HITS);
        assertEquals(0x11, Wire.GET);
        assertEquals(0x12, Wire.PUT);
        assertEquals(0x13, Wire.DELETE);
        assertEquals(0x14, Wire.CLEAR);
        assertEquals(0x15, Wire.CLEAR_ALL);
        assertEquals(0x16, Wire.STATS);
        assertEquals(0x17, Wire.HEALTH);
        assertEquals(0x18, Wire.LEASE);
        assertEquals(0x19, Wire.RELEASE);
        assertEquals(0x1A, Wire.RESERVE);
        assertEquals(0x1B, Wire.COMMIT);
        assertEquals(0x1C, Wire.FLUSH);
        assertEquals(0x1D, Wire.STORE);
        assertEquals(0, Wire.STORE_SHOW);
        assertEquals(1, Wire.STORE_DETACH);
        assertEquals(2, Wire.STORE_ATTACH);
        assertEquals(0x80, Wire.RESPONSE);
        assertEquals((byte) 0xFF, Wire.ERROR);
        short[] errors = {
            Wire.E_MALFORMED,
            Wire.E_VERSION,
            Wire.E_AUTH,
            Wire.E_UNKNOWN_OP,
            Wire.E_TOO_LARGE,
            Wire.E_BUSY,
            Wire.E_SHUTTING_DOWN,
            Wire.E_INTERNAL,
            Wire.E_TIMED_OUT,
            Wire.E_REFUSED
        };
        for (int i = 0; i < errors.length; i++) {
            assertEquals(i + 1, errors[i]);
        }
    }
}
