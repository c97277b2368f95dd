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
// threads touch consecutive bytes of one run on both sides. Each thread loads UNROLL vectors before it stores any,
// keeping several reads in flight (host reads cross PCIe). Needs row_bytes % 16 == 0 and 16-byte aligned bases.
#include <stdint.h>

#define UNROLL 4

extern "C" __global__ void __launch_bounds__(256)
hicache_kv_copy(char* __restrict__ device, char* __restrict__ host, const int* __restrict__ pairs_index, int pairs,
                int first_layer, int layer_count, int layers, int parts, int page_tokens, int row_bytes,
                int device_pages, int host_slots, int layout, int to_host)
{
    const long long run_bytes = (long long) page_tokens * row_bytes;
    const long long run_vecs = run_bytes >> 4;
    const long long page_bytes = run_bytes * layers * parts;
    const long long total = (long long) pairs * layer_count * parts * run_vecs;
    const long long stride = (long long) gridDim.x * blockDim.x;
    const int* device_index = pairs_index;
    const int* host_index = pairs_index + pairs;

    for (long long first = (long long) blockIdx.x * blockDim.x + threadIdx.x; first < total; first += stride * UNROLL) {
        uint4 data[UNROLL];
        uint4* target[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const long long v = first + u * stride;
            target[u] = 0;
            if (v < total) {
                const long long run = v / run_vecs;
                const long long within = (v - run * run_vecs) << 4;
                const int part = (int) (run % parts);
                const long long rest = run / parts;
                const int layer = first_layer + (int) (rest % layer_count);
                const int pair = (int) (rest / layer_count);
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
                data[u] = *source;
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
