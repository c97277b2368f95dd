package io.hicache.cluster;

import io.hicache.cluster.etcd.Json;
import java.nio.charset.StandardCharsets;

/** A member's record in etcd: a small JSON object. Stateless. */
final class MemberRecords {
    private MemberRecords() {}

    static byte[] encode(ClusterMember m) {
        return ("{\"id\":" + Json.quote(m.id()) + ",\"host\":" + Json.quote(m.host()) + ",\"port\":" + m.port()
                        + ",\"capacity_bytes\":" + m.capacityBytes() + ",\"epoch_ms\":" + m.epochMillis() + "}")
                .getBytes(StandardCharsets.UTF_8);
    }

    /** The member a record describes; IllegalArgumentException for one that is not such a record. */
    static ClusterMember decode(byte[] record) {
        Object o = Json.parse(new String(record, StandardCharsets.UTF_8));
        String id = Json.string(o, "id", "");
        String host = Json.string(o, "host", "");
        return new ClusterMember(
                id,
                host,
                (int) Json.number(o, "port", 0),
                Json.number(o, "capacity_bytes", 0),
                Json.number(o, "epoch_ms", 0));
    }
}
