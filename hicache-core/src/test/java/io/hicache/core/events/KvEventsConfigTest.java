package io.hicache.core.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class KvEventsConfigTest {
    @Test
    void blankTextAndTheNullPublisherTurnEventsOff() {
        assertFalse(KvEventsConfig.parse("").enabled());
        assertFalse(KvEventsConfig.parse("  ").enabled());
        assertFalse(KvEventsConfig.parse("{}").enabled());
        assertFalse(KvEventsConfig.parse("{\"publisher\": \"null\"}").enabled());
        assertEquals(KvEventsConfig.OFF, KvEventsConfig.parse(null));
    }

    @Test
    void missingKeysTakeSglangsDefaults() {
        KvEventsConfig c = KvEventsConfig.parse("{\"publisher\": \"zmq\"}");
        assertTrue(c.enabled());
        assertEquals("zmq", c.publisher());
        assertEquals("tcp://*:5557", c.endpoint());
        assertEquals(Optional.empty(), c.replayEndpoint());
        assertEquals(10_000, c.replayBufferBatches());
        assertEquals(100_000, c.sendHighWaterMarkMessages());
        assertEquals(100_000, c.maxQueueEvents());
        assertEquals("", c.topic());
        assertEquals(0, c.attnDpRank());
    }

    @Test
    void everySglangKeyIsRead() {
        KvEventsConfig c = KvEventsConfig.parse("""
                {"publisher": "zmq", "endpoint": "tcp://10.0.0.1:6000", "replay_endpoint": "tcp://*:6001",
                 "buffer_steps": 5, "hwm": 7, "max_queue_size": 9, "topic": "kv-\\u00e9vents", "attn_dp_rank": 2,
                 "bind_host": "127.0.0.1"}""");
        assertEquals(
                new KvEventsConfig(
                        "zmq",
                        "tcp://10.0.0.1:6000",
                        Optional.of("tcp://*:6001"),
                        5,
                        7,
                        9,
                        "kv-\u00e9vents",
                        2,
                        Optional.of("127.0.0.1")),
                c);
        assertEquals(c, KvEventsConfig.parse(c.toJson()), "toJson reads back");
        assertEquals(
                Optional.empty(),
                KvEventsConfig.parse("{\"publisher\": \"zmq\", \"replay_endpoint\": null}")
                        .replayEndpoint());
    }

    @Test
    void mistakesAreRefusedSayingWhat() {
        IllegalArgumentException unknown = assertThrows(
                IllegalArgumentException.class,
                () -> KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpiont\": \"tcp://*:1\"}"));
        assertTrue(unknown.getMessage().contains("endpiont"), unknown.getMessage());
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"hwm\": \"many\"}"));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"max_queue_size\": 0}"));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"buffer_steps\": -1}"));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"publisher\": \"zmq\""));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"publisher\": \"zmq\"} x"));
        assertThrows(
                IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"topic\": \"a\", \"topic\": \"b\"}"));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"hwm\": 1.5}"));
        assertThrows(IllegalArgumentException.class, () -> KvEventsConfig.parse("{\"bind_host\": \"tcp://x\"}"));
    }

    @Test
    void theSettingNamesItsKeyWhenTheValueIsBad() {
        var setting = KvEventsConfig.setting("kv-events-config", "test");
        Settings good = Settings.builder()
                .flag("kv-events-config", "{\"publisher\": \"zmq\", \"topic\": \"t\"}")
                .build();
        assertEquals("t", good.get(setting).topic());
        assertFalse(Settings.builder().build().get(setting).enabled(), "off by default");
        Settings bad = Settings.builder()
                .flag("kv-events-config", "{\"publisher\": 3}")
                .build();
        HiCacheException e = assertThrows(HiCacheException.class, () -> bad.get(setting));
        assertTrue(e.getMessage().contains("kv-events-config") && e.getMessage().contains("publisher"), e.getMessage());
    }

    @Test
    void aPublisherNoModuleProvidesIsNamedWithTheOnesAvailable() {
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> KvEventPublishers.open(KvEventsConfig.parse("{\"publisher\": \"carrier-pigeon\"}")));
        assertTrue(e.getMessage().contains("carrier-pigeon"), e.getMessage());
        assertThrows(HiCacheException.class, () -> KvEventPublishers.open(KvEventsConfig.OFF));
        assertFalse(KvEventSink.open("kv-events-test", KvEventsConfig.OFF).enabled());
    }
}
