package io.hicache.transfer.spi;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A published segment: the engine's name and control address, the host it runs on, its transports and its regions.
 * Peers fetch it when they open the segment, and choose a transport from it. Immutable.
 *
 * @param name       the engine's name
 * @param address    {@code host:port} of its control listener (how peers open the segment)
 * @param hostId     identifies the host (boot id and host name): equal ids mean shared memory can be mapped
 * @param pid        the engine's process id, for diagnostics
 * @param transports names of the transports it serves
 * @param endpoints  what each transport that needs one published for peers to reach it ({@link Transport#endpoint},
 *                   e.g. {@code tcp -> host:port}), by transport name
 * @param regions    its registered regions at the time of the fetch
 */
public record SegmentDescriptor(
        String name,
        String address,
        String hostId,
        long pid,
        List<String> transports,
        Map<String, String> endpoints,
        List<RegionDescriptor> regions) {
    public SegmentDescriptor {
        transports = List.copyOf(transports);
        endpoints = Map.copyOf(endpoints);
        regions = List.copyOf(regions);
    }

    /** What the transport named {@code transport} published for peers to reach it, if anything. */
    public Optional<String> endpoint(String transport) {
        return Optional.ofNullable(endpoints.get(transport));
    }

    /** The region named {@code name}, if published. */
    public Optional<RegionDescriptor> region(String regionName) {
        for (RegionDescriptor r : regions) {
            if (r.name().equals(regionName)) {
                return Optional.of(r);
            }
        }
        return Optional.empty();
    }

    /** The binary form sent on the wire. */
    public byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeUTF(name);
            out.writeUTF(address);
            out.writeUTF(hostId);
            out.writeLong(pid);
            out.writeInt(transports.size());
            for (String t : transports) {
                out.writeUTF(t);
            }
            out.writeInt(endpoints.size());
            for (Map.Entry<String, String> e : endpoints.entrySet()) {
                out.writeUTF(e.getKey());
                out.writeUTF(e.getValue());
            }
            out.writeInt(regions.size());
            for (RegionDescriptor r : regions) {
                out.writeUTF(r.name());
                out.writeInt(r.id());
                out.writeLong(r.bytes());
                out.writeUTF(r.shmPath());
                out.writeByte(r.kind().ordinal());
                out.writeInt(r.keys().size());
                for (Map.Entry<String, String> e : r.keys().entrySet()) {
                    out.writeUTF(e.getKey());
                    out.writeUTF(e.getValue());
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    /**
     * Parses {@link #encode()}'s form.
     *
     * @throws IllegalArgumentException when the bytes are not a descriptor
     */
    public static SegmentDescriptor decode(byte[] encoded) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(encoded))) {
            String name = in.readUTF();
            String address = in.readUTF();
            String hostId = in.readUTF();
            long pid = in.readLong();
            List<String> transports = new ArrayList<>();
            for (int i = in.readInt(); i > 0; i--) {
                transports.add(in.readUTF());
            }
            Map<String, String> endpoints = new LinkedHashMap<>();
            for (int i = in.readInt(); i > 0; i--) {
                endpoints.put(in.readUTF(), in.readUTF());
            }
            List<RegionDescriptor> regions = new ArrayList<>();
            for (int i = in.readInt(); i > 0; i--) {
                String rn = in.readUTF();
                int id = in.readInt();
                long len = in.readLong();
                String shm = in.readUTF();
                int kind = in.readUnsignedByte();
                if (kind >= MemoryKind.values().length) {
                    throw new IOException("unknown memory kind " + kind + " of region " + rn);
                }
                Map<String, String> keys = new LinkedHashMap<>();
                for (int k = in.readInt(); k > 0; k--) {
                    keys.put(in.readUTF(), in.readUTF());
                }
                regions.add(new RegionDescriptor(rn, id, len, shm, keys, MemoryKind.values()[kind]));
            }
            return new SegmentDescriptor(name, address, hostId, pid, transports, endpoints, regions);
        } catch (IOException e) {
            throw new IllegalArgumentException("not a segment descriptor: " + e.getMessage(), e);
        }
    }
}
