package io.hicache.server.daemon;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * The index a graceful stop with {@code server.host-keep} leaves beside its slab: the magic {@code HCSLIDX1}, the
 * slab's size, the page count, per page its namespace (as the protocol writes one), hash, block offset and order,
 * length and CRC-32C, and a CRC-32C of everything before it. Written to a temporary file and moved into place, so a
 * half-written index is never read. Stateless.
 */
final class SlabIndexFile {
    /** "HCSLIDX2": namespaces as protocol version 3 writes them, whole (docs/keys.md). */
    private static final long MAGIC = 0x4843534C49445832L;
    /** "HCSLIDX1", of releases before key format 2: its pages were named by another key format, so none is kept. */
    private static final long MAGIC_FORMAT_1 = 0x4843534C49445831L;

    private SlabIndexFile() {}

    static void write(Path index, long slabBytes, List<SlabPage> pages) throws IOException {
        ByteBuf out = Unpooled.buffer(64 + pages.size() * 96);
        try {
            out.writeLong(MAGIC).writeLong(slabBytes);
            int countAt = out.writerIndex();
            out.writeInt(0);
            int count = 0;
            byte[] hash = new byte[PageHash.BYTES];
            for (SlabPage p : pages) {
                if (!p.inSlab() || p.removed) {
                    continue;
                }
                Codec.writeNamespace(out, p.key.namespace(), Wire.VERSION_3);
                p.key.hash().writeTo(hash, 0);
                out.writeBytes(hash)
                        .writeLong(p.offset)
                        .writeInt(p.order)
                        .writeInt(p.length)
                        .writeInt(p.crc);
                count++;
            }
            out.setInt(countAt, count);
            CRC32C crc = new CRC32C();
            crc.update(out.nioBuffer(0, out.writerIndex()));
            out.writeInt((int) crc.getValue());
            Path tmp = index.resolveSibling(index.getFileName() + ".tmp");
            byte[] bytes = new byte[out.readableBytes()];
            out.getBytes(0, bytes);
            Files.write(tmp, bytes);
            Files.move(tmp, index, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            out.release();
        }
    }

    /**
     * The pages of an index written for a slab of {@code slabBytes}.
     *
     * @throws IOException when it is not such an index (wrong magic or size, a bad checksum, cut short)
     */
    static List<SlabSpace.KeptPage> read(Path index, long slabBytes) throws IOException {
        byte[] bytes = Files.readAllBytes(index);
        if (bytes.length < 24) {
            throw new IOException("cut short");
        }
        CRC32C crc = new CRC32C();
        crc.update(bytes, 0, bytes.length - 4);
        ByteBuf in = Unpooled.wrappedBuffer(bytes);
        if (in.getInt(bytes.length - 4) != (int) crc.getValue()) {
            throw new IOException("its checksum does not match");
        }
        in.writerIndex(bytes.length - 4);
        long magic = in.readLong();
        if (magic == MAGIC_FORMAT_1) {
            throw new IOException("written by a release of key format 1 (its pages would be misnamed now)");
        }
        if (magic != MAGIC || in.readLong() != slabBytes) {
            throw new IOException("not an index of this slab");
        }
        int count = in.readInt();
        List<SlabSpace.KeptPage> pages = new ArrayList<>(count);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < count; i++) {
            Namespace ns = Codec.readNamespace(in, Wire.VERSION_3);
            in.readBytes(hash);
            pages.add(new SlabSpace.KeptPage(
                    ns.key(PageHash.fromBytes(hash, 0)), in.readLong(), in.readInt(), in.readInt(), in.readInt()));
        }
        return pages;
    }
}
