// Direct summation on the GPU (seed 002, Fig. 2-4): every target against every source, float32.
// Each thread owns DIRECT_I targets (the i-loop unrolled in registers); the block stages BLOCK
// sources at a time in shared memory and every thread sweeps that tile (the j-loop unrolled).
// Output per target: (ax, ay, az, phi) with G = 1; the target itself contributes nothing (by
// index, as in the walk).

#include "gravity.cuh"

#define DIRECT_BLOCK 256
#define DIRECT_I 2

struct RUST_TWIN DirectArgs {
    // Per particle: position, mass (the sources and the targets).
    const float4 *pos_mass;
    // Particles.
    int n;
    // Softening squared.
    float eps2;
    // Per particle: acceleration, potential.
    float4 *out;
};

extern "C" __global__ void __launch_bounds__(DIRECT_BLOCK) direct(const DirectArgs a)
{
    const float4 *__restrict__ pos_mass = a.pos_mass;
    const int n = a.n;
    __shared__ float4 tile[DIRECT_BLOCK];
    const int base = blockIdx.x * (DIRECT_BLOCK * DIRECT_I) + threadIdx.x;
    float3 x[DIRECT_I];
    float4 acc[DIRECT_I];
#pragma unroll
    for (int u = 0; u < DIRECT_I; u++) {
        const float4 p = pos_mass[min(base + u * DIRECT_BLOCK, n - 1)];
        x[u] = make_float3(p.x, p.y, p.z);
        acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int j0 = 0; j0 < n; j0 += DIRECT_BLOCK) {
        const int j = j0 + threadIdx.x;
        // Padding sources are massless and add nothing.
        tile[threadIdx.x] = j < n ? pos_mass[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
#pragma unroll 16
        for (int k = 0; k < DIRECT_BLOCK; k++) {
            const float4 s = tile[k];
#pragma unroll
            for (int u = 0; u < DIRECT_I; u++)
                p2p(x[u], s, a.eps2, j0 + k != base + u * DIRECT_BLOCK, acc[u]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < DIRECT_I; u++) {
        const int i = base + u * DIRECT_BLOCK;
        if (i < n) a.out[i] = acc[u];
    }
}
