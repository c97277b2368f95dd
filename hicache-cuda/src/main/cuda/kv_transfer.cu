// Copies of scattered KV pages between a pinned host slab and a device KV pool, one launch per batch (a backup)
// or per layer (a load). Compiled ahead of time to PTX by build-ptx.sh; loaded with cuModuleLoadData.
//
// Device pool (DeviceLayout.java): [layer][part][page][token][row]; a page's (layer, part) is one run of
// page_tokens rows. Host slab (HostSlab.java), by layout:
//   0 layer_first        [part][layer][slot][token][row]
//   1 page_first         [slot][part][token][layer][row]
//   2 page_first_direct  [slot][part][layer][token][row]
//
// The work is a flat range of 16-byte vectors: pair (outer), layer, part, then the run's vectors, so consecutive
// threads touch consecutive bytes of one run on both sides. With part_outer, pair, part, layer: a page_first_direct
// page is then one contiguous stretch of host memory, read or written in order. Each thread loads UNROLL vectors before it stores any,
// keeping several reads in flight (host reads cross PCIe). Needs row_bytes % 16 == 0 and 16-byte aligned bases.
// The entry points differ only in index arithmetic width and loads in flight; CudaDeviceRuntime picks one.
// hicache_address_copy is apart: it copies a list of (source, target, bytes) between any two device addresses (this
// device's memory, or a peer's mapped through CUDA IPC), for the cuda-ipc transport's batches of small requests.
#include <stdint.h>

// One 16-byte load. LOAD 0: a plain load. LOAD 1: with the L2::256B prefetch-size hint, which asks L2 to fetch the
// whole 256-byte block a miss falls in (one larger read of host memory across PCIe instead of two or more).
// LOAD 2: the same through the read-only (non-coherent) path; the kernel never writes what it reads.
template <int LOAD>
__device__ __forceinline__ uint4 load16(const uint4* p)
{
    uint4 v;
    if (LOAD == 0) {
        v = *p;
    } else if (LOAD == 1) {
        asm("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else {
        asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    }
    return v;
}

// Index arithmetic in I (32-bit when a launch has fewer than 2^32 vectors: far cheaper divisions), offsets in 64 bits.
template <int UNROLL, typename I, int LOAD>
__device__ __forceinline__ void copy_runs(char* __restrict__ device, char* __restrict__ host,
                                          const int* __restrict__ pairs_index, int pairs, int first_layer,
                                          int layer_count, int layers, int parts, int page_tokens, int row_bytes,
                                          int device_pages, int host_slots, int layout, int to_host, int part_outer)
{
    const long long run_bytes = (long long) page_tokens * row_bytes;
    const I run_vecs = (I) (run_bytes >> 4);
    const long long page_bytes = run_bytes * layers * parts;
    const I total = (I) pairs * (I) layer_count * (I) parts * run_vecs;
    const I stride = (I) gridDim.x * (I) blockDim.x;
    const int* device_index = pairs_index;
    const int* host_index = pairs_index + pairs;

    for (I first = (I) blockIdx.x * (I) blockDim.x + (I) threadIdx.x; first < total; first += stride * UNROLL) {
        uint4 data[UNROLL];
        uint4* target[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const I v = first + (I) u * stride;
            target[u] = 0;
            if (v < total) {
                const I run = v / run_vecs;
                const long long within = (long long) (v - run * run_vecs) << 4;
                int part, layer, pair;
                if (part_outer) {
                    layer = first_layer + (int) (run % (I) layer_count);
                    const I rest = run / (I) layer_count;
                    part = (int) (rest % (I) parts);
                    pair = (int) (rest / (I) parts);
                } else {
                    part = (int) (run % (I) parts);
                    const I rest = run / (I) parts;
                    layer = first_layer + (int) (rest % (I) layer_count);
                    pair = (int) (rest / (I) layer_count);
                }
                const long long d = device_index[pair];
                const long long h = host_index[pair];
                char* dev = device + (((long long) layer * parts + part) * device_pages + d) * run_bytes + within;
                long long host_offset;
                if (layout == 0) {
                    host_offset = (((long long) part * layers + layer) * host_slots + h) * run_bytes + within;
                } else if (layout == 2) {
                    host_offset = h * page_bytes + ((long long) part * layers + layer) * run_bytes + within;
                } else {
                    const long long token = within / row_bytes;
                    const long long in_row = within - token * row_bytes;
                    host_offset = h * page_bytes + (((long long) part * page_tokens + token) * layers + layer) * row_bytes
                            + in_row;
                }
                char* hst = host + host_offset;
                const uint4* source = (const uint4*) (to_host ? dev : hst);
                target[u] = (uint4*) (to_host ? hst : dev);
                data[u] = load16<LOAD>(source);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (target[u] != 0) {
                *target[u] = data[u];
            }
        }
    }
}

#define HICACHE_KV_COPY(NAME, UNROLL, I, LOAD) \
extern "C" __global__ void __launch_bounds__(256) \
NAME(char* __restrict__ device, char* __restrict__ host, const int* __restrict__ pairs_index, int pairs, \
     int first_layer, int layer_count, int layers, int parts, int page_tokens, int row_bytes, int device_pages, \
     int host_slots, int layout, int to_host, int part_outer) \
{ \
    copy_runs<UNROLL, I, LOAD>(device, host, pairs_index, pairs, first_layer, layer_count, layers, parts, page_tokens, \
                         row_bytes, device_pages, host_slots, layout, to_host, part_outer); \
}

// Any launch size: 64-bit index arithmetic.
HICACHE_KV_COPY(hicache_kv_copy, 4, long long, 0)
// Launches of fewer than 2^32 vectors (64 GiB): 32-bit index arithmetic.
HICACHE_KV_COPY(hicache_kv_copy_u32, 4, unsigned int, 0)
HICACHE_KV_COPY(hicache_kv_copy_u32_u8, 8, unsigned int, 0)
// The same with the 256-byte L2 prefetch hint, plain and read-only.
HICACHE_KV_COPY(hicache_kv_copy_u32_l2_256, 4, unsigned int, 1)
HICACHE_KV_COPY(hicache_kv_copy_u32_nc_l2_256, 4, unsigned int, 2)

// Copies entries[3c] -> entries[3c + 1], entries[3c + 2] bytes, for every c < count: one block per copy at a time,
// 16-byte vectors where both addresses and the length allow (each thread loads up to 4 before it stores), bytes
// otherwise. Copies in one launch must not overlap.
extern "C" __global__ void __launch_bounds__(256)
hicache_address_copy(const unsigned long long* __restrict__ entries, int count)
{
    for (int c = blockIdx.x; c < count; c += gridDim.x) {
        const unsigned long long source = entries[3 * c];
        const unsigned long long target = entries[3 * c + 1];
        const unsigned long long bytes = entries[3 * c + 2];
        if (((source | target | bytes) & 15) == 0) {
            const uint4* from = (const uint4*) source;
            uint4* to = (uint4*) target;
            const unsigned long long vectors = bytes >> 4;
            const unsigned long long stride = blockDim.x;
            for (unsigned long long v = threadIdx.x; v < vectors; v += 4 * stride) {
                uint4 data[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    if (v + u * stride < vectors) {
                        data[u] = from[v + u * stride];
                    }
                }
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    if (v + u * stride < vectors) {
                        to[v + u * stride] = data[u];
                    }
                }
            }
        } else {
            const char* from = (const char*) source;
            char* to = (char*) target;
            for (unsigned long long b = threadIdx.x; b < bytes; b += blockDim.x) {
                to[b] = from[b];
            }
        }
    }
}
