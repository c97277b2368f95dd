package io.hicache.storage.nixl.obj;

import io.hicache.core.util.Checks;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/**
 * An OBJ backend: serves DRAM and OBJ, one request per object per transfer: a WRITE is one PUT whose body gathers the
 * object's local pieces (they must cover the whole object: S3 has no partial writes), a READ is one GET (ranged when
 * the pieces cover part of the object) scattered into them. Thread-safe. The agent closes it, which closes the S3
 * client.
 */
final class ObjBackend implements NixlBackend {
    private final S3AsyncClient s3;
    private final String bucket;
    private final Duration requestBound;

    /** @param requestBound the most one request may take, retries included */
    ObjBackend(S3AsyncClient s3, String bucket, Duration requestBound) {
        this.s3 = s3;
        this.bucket = bucket;
        this.requestBound = requestBound;
    }

    @Override
    public String name() {
        return ObjPlugin.NAME;
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return Set.of(MemoryType.DRAM, MemoryType.OBJ);
    }

    @Override
    public @Nullable Object register(MemoryRegion region) {
        return null; // an object is its key; DRAM needs nothing
    }

    @Override
    public void deregister(MemoryRegion region, @Nullable Object state) {
        // nothing was made
    }

    @Override
    public CompletableFuture<List<Boolean>> query(List<MemoryRegion> regions) {
        List<CompletableFuture<Boolean>> heads = new ArrayList<>(regions.size());
        for (MemoryRegion r : regions) {
            if (!(r instanceof MemoryRegion.Obj o)) {
                heads.add(CompletableFuture.completedFuture(false));
                continue;
            }
            heads.add(s3.headObject(b -> b.bucket(bucket).key(o.key()))
                    .orTimeout(requestBound.toNanos(), TimeUnit.NANOSECONDS)
                    .handle((head, error) -> error == null));
        }
        return CompletableFuture.allOf(heads.toArray(CompletableFuture[]::new))
                .thenApply(v -> heads.stream().map(CompletableFuture::join).toList());
    }

    @Override
    public Request prepare(XferOp op, List<Piece> local, List<Piece> remote) {
        Map<MemoryRegion.Obj, List<Piece[]>> byObject = new IdentityHashMap<>();
        List<MemoryRegion.Obj> order = new ArrayList<>();
        for (int i = 0; i < local.size(); i++) {
            Piece l = local.get(i);
            Piece r = remote.get(i);
            if (l.region().type() != MemoryType.DRAM) {
                throw new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED,
                        "OBJ moves host memory only; got " + l.region().type());
            }
            if (!(r.region() instanceof MemoryRegion.Obj o)) {
                throw new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED,
                        "OBJ moves to and from objects; got " + r.region().type());
            }
            byObject.computeIfAbsent(o, k -> {
                        order.add(k);
                        return new ArrayList<>();
                    })
                    .add(new Piece[] {l, r});
        }
        List<ObjRequest.ObjectTask> tasks = new ArrayList<>(order.size());
        for (MemoryRegion.Obj o : order) {
            List<Piece[]> pairs = Checks.checkNotNull(byObject.get(o), "an object's pieces");
            pairs.sort(Comparator.comparingLong(p -> p[1].offset()));
            long covered = 0;
            boolean tiles = true;
            for (Piece[] p : pairs) {
                if (p[1].offset() < covered) {
                    throw new NixlException(
                            NixlStatus.ERR_INVALID_PARAM,
                            "descriptors of object " + o.key() + " overlap at " + p[1].offset());
                }
                tiles &= p[1].offset() == covered;
                covered = p[1].offset() + p[1].length();
            }
            tiles &= covered == o.length();
            if (op == XferOp.WRITE && !tiles) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM,
                        "a WRITE of object " + o.key() + " must cover " + "all of it, [0, " + o.length()
                                + "), without gaps: S3 has no partial writes");
            }
            tasks.add(new ObjRequest.ObjectTask(o, pairs, tiles));
        }
        return new ObjRequest(s3, bucket, op, tasks);
    }

    @Override
    public void close() {
        s3.close();
    }
}
