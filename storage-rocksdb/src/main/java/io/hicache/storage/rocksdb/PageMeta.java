package io.hicache.storage.rocksdb;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * What the RocksDB store keeps beside each page, in its {@code meta} column family: when it was stored (an
 * increasing number, the order of oldest-first deletion), its length and its CRC-32C. 20 bytes, little-endian.
 * Immutable.
 */
record PageMeta(long sequence, long length, int crc) {
    static final int BYTES = 20;

    byte[] toBytes() {
        return ByteBuffer.allocate(BYTES)
                .order(ByteOrder.LITTLE_ENDIAN)
                .putLong(sequence)
                .putLong(length)
                .putInt(crc)
                .array();
    }

    static PageMeta fromBytes(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("a page's meta record is " + BYTES + " bytes, found " + bytes.length);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        return new PageMeta(b.getLong(), b.getLong(), b.getInt());
    }
}
