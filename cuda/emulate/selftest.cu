// Kernels that exercise the CPU emulator's shim (cuda_emulate.h): warp exchanges and votes, over
// the whole warp and over parts of it with masks of their own, block barriers, shared memory,
// atomics on shared and global memory, threads that return early, grid-stride loops, arguments
// of every kind, and three broken kernels whose launches must fail rather than hang. The tests of
// src/gpu/emulator.rs run them and check every result. They are CUDA too, but not part of
// hinoki's GPU program. Threads past n take part with value 0 where a kernel says so.

constexpr unsigned selftest_full_mask = 0xffffffffu;

// Inclusive prefix sums of in[0, n) within each block's tile of blockDim.x elements: within each
// warp by __shfl_up_sync, then the warps' totals scanned by the first warp through shared memory.
extern "C" __global__ void selftest_block_scan(const unsigned *__restrict__ in, int n,
                                               unsigned *__restrict__ out)
{
    __shared__ unsigned warp_sums[32];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned x = i < (unsigned)n ? in[i] : 0;
    for (unsigned off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(selftest_full_mask, x, off);
        if (lane >= off) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        unsigned s = lane < blockDim.x / 32 ? warp_sums[lane] : 0;
        for (unsigned off = 1; off < 32; off <<= 1) {
            const unsigned y = __shfl_up_sync(selftest_full_mask, s, off);
            if (lane >= off) s += y;
        }
        warp_sums[lane] = s;
    }
    __syncthreads();
    if (warp > 0) x += warp_sums[warp - 1];
    if (i < (unsigned)n) out[i] = x;
}

// hist[b] += the number of keys[0, n) whose low byte is b: a grid-stride loop counts into shared
// memory with atomics, then each block adds its counts to hist.
extern "C" __global__ void selftest_histogram(const unsigned *__restrict__ keys, int n,
                                              unsigned *__restrict__ hist)
{
    __shared__ unsigned bins[256];
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)n;
         i += gridDim.x * blockDim.x)
        atomicAdd(&bins[keys[i] & 255u], 1u);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x)
        if (bins[b] != 0) atomicAdd(&hist[b], bins[b]);
}

// rank[i] = the number of lanes below i's in its warp with the same key (a stable rank within the
// warp), for i < n; the threads past n return first.
extern "C" __global__ void selftest_warp_rank(const unsigned *__restrict__ keys, int n,
                                              unsigned *__restrict__ rank)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (unsigned)n) return;
    const unsigned lane = threadIdx.x % 32;
    const unsigned peers = __match_any_sync(__activemask(), keys[i]);
    rank[i] = __popc(peers & ((1u << lane) - 1));
}

// For warp w of the grid (flags past n count as 0): votes[3 w] = the ballot of flags != 0,
// votes[3 w + 1] = whether any is, votes[3 w + 2] = whether all are.
extern "C" __global__ void selftest_vote(const int *__restrict__ flags, int n,
                                         unsigned *__restrict__ votes)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const int flag = i < (unsigned)n ? flags[i] != 0 : 0;
    const unsigned ballot = __ballot_sync(selftest_full_mask, flag);
    const int any = __any_sync(selftest_full_mask, flag);
    const int all = __all_sync(selftest_full_mask, flag);
    if (threadIdx.x % 32 == 0) {
        const unsigned w = i / 32;
        votes[3 * w] = ballot;
        votes[3 * w + 1] = any;
        votes[3 * w + 2] = all;
    }
}

// For every thread i of value v = values[i] (full warps: the grid covers values exactly):
// out[9 i + k] = k 0: the warp's sum by an xor butterfly; 1: its sum by a shuffle-down tree,
// broadcast from lane 0; 2: v of lane (lane + 5) mod 16 of its half-warp (width 16); 3: v of
// lane - 3 within groups of 8, else its own; 4: v of lane + 2 within groups of 8, else its own;
// 5, 6, 7: __reduce_add, min and max over the warp; 8: v of lane - 16 for the upper half-warp
// (xor 16, width 16), its own for the lower half. halves[i] = (v + 0.25) of lane ^ 1, a double.
extern "C" __global__ void selftest_warp_ops(const int *__restrict__ values,
                                             int *__restrict__ out, double *__restrict__ halves)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const int v = values[i];
    int xor_sum = v, down_sum = v;
    for (int off = 16; off > 0; off /= 2) {
        xor_sum += __shfl_xor_sync(selftest_full_mask, xor_sum, off);
        down_sum += __shfl_down_sync(selftest_full_mask, down_sum, off);
    }
    int *o = out + 9 * i;
    o[0] = xor_sum;
    o[1] = __shfl_sync(selftest_full_mask, down_sum, 0);
    o[2] = __shfl_sync(selftest_full_mask, v, threadIdx.x % 32 + 5, 16);
    o[3] = __shfl_up_sync(selftest_full_mask, v, 3, 8);
    o[4] = __shfl_down_sync(selftest_full_mask, v, 2, 8);
    o[5] = __reduce_add_sync(selftest_full_mask, v);
    o[6] = __reduce_min_sync(selftest_full_mask, v);
    o[7] = __reduce_max_sync(selftest_full_mask, v);
    o[8] = __shfl_xor_sync(selftest_full_mask, v, 16, 16);
    halves[i] = __shfl_xor_sync(selftest_full_mask, v + 0.25, 1);
}

// Threads i >= n return before block barriers and warp operations, which the others then pass
// among themselves: out[4 i] = the threads left in i's block (__syncthreads_count), out[4 i + 1]
// = the ballot of the lanes left in its warp, out[4 i + 2] = i of its warp's lane 0,
// out[4 i + 3] = 2 __syncthreads_or(i == n - 1) + __syncthreads_and(i + 1 < n).
extern "C" __global__ void selftest_early_exit(int n, unsigned *__restrict__ out)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (unsigned)n) return;
    const int left = __syncthreads_count(1);
    const unsigned lanes = __ballot_sync(__activemask(), 1);
    const unsigned first = __shfl_sync(__activemask(), i, 0);
    const int last_here = __syncthreads_or(i == (unsigned)n - 1);
    const int not_last = __syncthreads_and(i + 1 < (unsigned)n);
    __syncwarp(__activemask());
    __syncthreads();
    out[4 * i] = left;
    out[4 * i + 1] = lanes;
    out[4 * i + 2] = first;
    out[4 * i + 3] = 2 * last_here + not_last;
}

// Every thread of the grid applies atomics to the arrays (initial values set by the test):
// adds, subtractions, minima, maxima, or, and, exchanges, a counter by atomicCAS loops, and a
// counter incremented without atomics under a spin lock (atomicCAS, __threadfence, atomicExch).
extern "C" __global__ void selftest_atomics(int *si, unsigned *ui, unsigned long long *ul,
                                            long long *sl, float *f, double *d)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&si[0], 1);
    atomicSub(&si[1], 2);
    atomicMin(&si[2], (int)i - 100);
    atomicMax(&si[3], (int)i);
    int seen = si[4], assumed;
    do {
        assumed = seen;
        seen = atomicCAS(&si[4], assumed, assumed + 1);
    } while (seen != assumed);
    atomicExch(&si[5], 7);
    atomicAdd(&ui[0], 3u);
    atomicSub(&ui[1], 1u);
    atomicMin(&ui[2], i + 7);
    atomicMax(&ui[3], i);
    atomicOr(&ui[4], 1u << (i % 32));
    atomicAnd(&ui[5], ~(1u << (i % 32)));
    while (atomicCAS(&ui[6], 0u, 1u) != 0u) {
    }
    ui[7] += 1;
    __threadfence();
    atomicExch(&ui[6], 0u);
    atomicAdd(&ul[0], 1ull << 33);
    atomicMin(&ul[1], (unsigned long long)i << 40);
    atomicMax(&ul[2], (unsigned long long)i << 40);
    atomicOr(&ul[3], 1ull << (i % 64));
    atomicCAS(&ul[4], 0ull, 5ull);
    atomicMin(&sl[0], -((long long)i << 35));
    atomicMax(&sl[1], (long long)i << 35);
    atomicAdd(&f[0], 0.5f);
    atomicExch(&f[1], 2.0f);
    atomicAdd(&d[0], 0.25);
}

// out[0..6] = the bits of each argument, in order, and out's own address (one thread writes).
extern "C" __global__ void selftest_args(double d, int i, float f, unsigned long long wide,
                                         unsigned u, unsigned long long *out)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] = __double_as_longlong(d);
    out[1] = (unsigned)i;
    out[2] = __float_as_uint(f);
    out[3] = wide;
    out[4] = u;
    out[5] = (unsigned long long)out;
}

// y[i] = a x[i] + y[i] for i < n (a multiply, then an add), grid-stride.
extern "C" __global__ void selftest_axpy(float a, int n, const float *__restrict__ x,
                                         float *__restrict__ y)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)n;
         i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

// Broken: even threads wait at __syncthreads, odd ones at __syncwarp, so neither barrier can
// complete (a GPU would hang).
extern "C" __global__ void selftest_divergent_barrier()
{
    if (threadIdx.x % 2 == 0)
        __syncthreads();
    else
        __syncwarp();
}

// Broken: lanes of one warp reach different warp operations.
extern "C" __global__ void selftest_mixed_warp_ops(unsigned *__restrict__ out)
{
    if (threadIdx.x % 2 == 0)
        out[threadIdx.x] = __ballot_sync(selftest_full_mask, 1);
    else
        out[threadIdx.x] = __any_sync(selftest_full_mask, 1);
}

// The two half-warps of each warp synchronize apart (masks 0x0000ffff and 0xffff0000) and do
// different numbers of different warp operations, so that each half waits at one while the
// other is at another; then the whole warp meets again. For thread i of value v = values[i]
// (full warps), lane l:
//   - lower half: out[5 i] = the ballot of v > 0 over the half, out[5 i + 1] = the half's sum (an
//     xor butterfly), out[5 i + 2] = v of lane 15 - l, out[5 i + 3] = the ballot of even v over
//     the half, after a __syncwarp of the half;
//   - upper half: out[5 i] = the inclusive prefix sum of v over the half (__shfl_up_sync: lane 16
//     reads its own value from outside the mask), out[5 i + 1] = the ballot of v > 0 over the
//     half, out[5 i + 2] = v of lane l + 3, or its own for l + 3 > 31, out[5 i + 3] = the half's
//     largest v;
//   - out[5 i + 4] = the ballot of v > 0 over the whole warp.
extern "C" __global__ void selftest_half_warps(const int *__restrict__ values,
                                               int *__restrict__ out)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32;
    const int v = values[i];
    int *o = out + 5 * i;
    if (lane < 16) {
        const unsigned mask = 0x0000ffffu;
        o[0] = __ballot_sync(mask, v > 0);
        int sum = v;
        for (int off = 8; off > 0; off /= 2) sum += __shfl_xor_sync(mask, sum, off);
        o[1] = sum;
        o[2] = __shfl_sync(mask, v, 15 - lane);
        __syncwarp(mask);
        o[3] = __ballot_sync(mask, v % 2 == 0);
    } else {
        const unsigned mask = 0xffff0000u;
        int scan = v;
        for (unsigned off = 1; off < 16; off *= 2) {
            const int y = __shfl_up_sync(mask, scan, off);
            if (lane - 16 >= off) scan += y;
        }
        o[0] = scan;
        o[1] = __ballot_sync(mask, v > 0);
        o[2] = __shfl_down_sync(mask, v, 3);
        o[3] = __reduce_max_sync(mask, v);
    }
    o[4] = __ballot_sync(selftest_full_mask, v > 0);
}

// Groups of g lanes (g = 2, 4, 8 or 16), each synchronizing with its own g-lane mask, as walk.cu's
// groups of G < 32 do: group k of a warp (lanes k g to k g + g - 1) first rotates its values k
// times by one lane (__shfl_sync with width g), so the groups reach the reduction at different
// times, then sums over the group by an xor butterfly of width g. For thread i of value
// v = values[i] (full warps), lane j of its group: out[3 i] = the group's sum, out[3 i + 1] = the
// ballot of v > 0 over the group (bits at the warp's lanes), out[3 i + 2] = v of lane
// (j + k) mod g of the group.
extern "C" __global__ void selftest_group_ops(const int *__restrict__ values, int g,
                                              int *__restrict__ out)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32;
    const unsigned mask = ((1u << g) - 1u) << (lane & ~(unsigned)(g - 1));
    const int v = values[i];
    int rotated = v;
    for (unsigned k = 0; k < lane / g; k++) rotated = __shfl_sync(mask, rotated, lane + 1, g);
    int sum = v;
    for (int off = g / 2; off > 0; off /= 2) sum += __shfl_xor_sync(mask, sum, off, g);
    out[3 * i] = sum;
    out[3 * i + 1] = __ballot_sync(mask, v > 0);
    out[3 * i + 2] = rotated;
}

// Broken: lane 0 waits at __syncwarp for lanes 0 and 1, lane 1 at __syncwarp for the whole warp:
// each waits for the other at an operation with another mask.
extern "C" __global__ void selftest_mismatched_masks()
{
    __syncwarp(threadIdx.x % 32 == 0 ? 0x3u : selftest_full_mask);
}
