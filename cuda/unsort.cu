// Results of a walk back in the particles' input order: target k of the walk order is input
// particle order[k]. Its (ax, ay, az, phi) and its (p2p, m2p) counts move there, so that the
// host receives them in input order and only converts them (src/walk/gpu/mod.rs, `unsort`).

extern "C" __global__ void __launch_bounds__(256)
unsort_results(const float4 *__restrict__ walk_out, const uint2 *__restrict__ walk_counts,
               const unsigned *__restrict__ order, int n, float4 *__restrict__ out,
               uint2 *__restrict__ counts)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const unsigned i = order[k];
        out[i] = walk_out[k];
        counts[i] = walk_counts[k];
    }
}

// Zero results for the n targets: those of groups a block step does not walk.
extern "C" __global__ void __launch_bounds__(256)
clear_results(int n, float4 *__restrict__ out, uint2 *__restrict__ counts)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        out[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        counts[k] = make_uint2(0u, 0u);
    }
}

// Block steps: zero results for the n particles not flagged in `active` (one byte each, the
// results in the particles' order), whose groups may have walked for an active neighbour.
extern "C" __global__ void __launch_bounds__(256)
mask_inactive(int n, const unsigned char *__restrict__ active, float4 *__restrict__ out,
              uint2 *__restrict__ counts)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (!active[i]) {
            out[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            counts[i] = make_uint2(0u, 0u);
        }
    }
}
