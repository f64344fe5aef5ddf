// The tree build on the GPU: Peano-Hilbert (or Morton) keys, a stable LSD radix sort of
// (key, index) pairs, the octree topology level by level, the cells' preorder, and the upward
// pass of moments, and the refit of a kept tree. src/tree/build_gpu.rs launches these kernels
// in sequence.
//
// This is its own NVRTC program, compiled with IEEE arithmetic (no fast math, no contraction of
// multiply-adds): every kernel computes the formulas of src/sfc and src/tree in the same order
// and precision, so the tree equals Tree::build's bit for bit on the same float32 particles.
// It is also compiled as C++ by the CPU emulator (cuda/emulate/), which runs it in CI.
//
// Every kernel runs with blocks of BUILD_BLOCK threads and takes one argument block (a
// `struct RUST_TWIN` defined above it, see cells.cuh).

#define BUILD_BLOCK 256
#define BUILD_WARPS (BUILD_BLOCK / 32)
#define FULL_MASK 0xffffffffu
// Keys per thread, and per block, of one radix-sort pass; elements per block of a scan.
#define RADIX_ITEMS 8
#define RADIX_TILE (BUILD_BLOCK * RADIX_ITEMS)
#define SCAN_ITEMS 8
#define SCAN_TILE (BUILD_BLOCK * SCAN_ITEMS)
// Deepest tree level and grid cells per axis (src/tree MAX_LEVEL, src/sfc GRID).
#define TREE_MAX_LEVEL 21
#define GRID_CELLS (1u << 21)
// Float64 moments per cell: mass, centre of mass (3), traceless quadrupole (6), trace.
#define MOMENT_WORDS 11

typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------------
// Keys (src/sfc): grid cell of a point, Morton bit spreading, Skilling's Hilbert transform.

// Grid cell of point (x, y, z) in the cube with lower corner o and `scale` = 2^21 / side,
// clamped into the grid (GridBox::cell_of).
__device__ __forceinline__ void grid_cell(double x, double y, double z, double ox, double oy,
                                          double oz, double scale, unsigned c[3])
{
    const double q[3] = {(x - ox) * scale, (y - oy) * scale, (z - oz) * scale};
    for (int k = 0; k < 3; k++) {
        const unsigned v = (unsigned)fmax(q[k], 0.0);
        c[k] = v < GRID_CELLS - 1 ? v : GRID_CELLS - 1;
    }
}

// Spreads the low 21 bits of v so that bit k moves to bit 3k (morton::spread).
__device__ __forceinline__ u64 spread_bits(unsigned v)
{
    u64 x = (u64)v & 0x1fffffull;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

// Peano-Hilbert key of grid cell c (hilbert::encode).
__device__ u64 hilbert_key(unsigned c[3])
{
    unsigned x[3] = {c[0], c[1], c[2]};
    for (unsigned q = 1u << 20; q > 1; q >>= 1) {
        const unsigned p = q - 1;
        for (int i = 0; i < 3; i++) {
            const unsigned set = (x[i] & q) ? 0xffffffffu : 0u;
            const unsigned t = (x[0] ^ x[i]) & p & ~set;
            x[0] ^= (p & set) ^ t;
            x[i] ^= t;
        }
    }
    const unsigned x0 = x[0], x1 = x[1] ^ x0, x2 = x[2] ^ x1;
    unsigned y = x2 & ~1u;
    y ^= y >> 1;
    y ^= y >> 2;
    y ^= y >> 4;
    y ^= y >> 8;
    y ^= y >> 16;
    const unsigned t = y >> 1;
    return (spread_bits(x0 ^ t) << 2) | (spread_bits(x1 ^ t) << 1) | spread_bits(x2 ^ t);
}

// A coordinate x in the frame f centred at c (one of its centre's coordinates; Frame::to_frame):
// r = (x - c) * scale in float64, in a periodic frame folded to r - floor(r + 1/2), rounded to
// float32.
__device__ __forceinline__ float frame_coord(double x, double c, const FrameMap &f)
{
    const double r = (x - c) * f.scale;
    return (float)(f.periodic ? r - floor(r + 0.5) : r);
}

// The arguments of sample_positions.
struct RUST_TWIN SamplePositionsArgs {
    // Particles.
    int n;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Take every stride-th particle.
    int stride;
    // Per sample: position (3 doubles, length units).
    double *out;
};

// Every stride-th of the n positions (3 doubles each) from the first, into out: the sample the
// frame's centre is chosen from (src/sfc/frame.rs strided).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    sample_positions(const SamplePositionsArgs a)
{
    const int m = (a.n + a.stride - 1) / a.stride;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
        for (int d = 0; d < 3; d++) a.out[3ll * j + d] = a.pos[3ll * j * a.stride + d];
}

struct RUST_TWIN ToFrameArgs {
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Per particle: mass (mass units).
    const double *mass;
    // Particles.
    int n;
    // The frame.
    FrameMap frame;
    // Per particle: frame position and mass (float32).
    float4 *pos_mass;
};

// The particles as float32 records (x, y, z, m) in the frame, as the host takes them
// (Tree::build_in).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) to_frame(const ToFrameArgs a)
{
    const FrameMap f = a.frame;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        a.pos_mass[i] = make_float4(frame_coord(a.pos[3ll * i], f.cx, f),
                                    frame_coord(a.pos[3ll * i + 1], f.cy, f),
                                    frame_coord(a.pos[3ll * i + 2], f.cz, f),
                                    (float)a.mass[i]);
}

// The arguments of tree_keys.
struct RUST_TWIN TreeKeysArgs {
    // Per particle: frame position and mass (float32).
    const float4 *pos_mass;
    // Particles.
    int n;
    // Lower corner of the key grid's cube, x (frame units).
    double ox;
    // Lower corner of the key grid's cube, y (frame units).
    double oy;
    // Lower corner of the key grid's cube, z (frame units).
    double oz;
    // Grid cells per frame unit: 2^21 / the cube's side.
    double scale;
    // 1: Peano-Hilbert keys, 0: Morton keys.
    int hilbert;
    // Per particle: its key.
    u64 *keys;
    // Per particle: its index (the identity order).
    unsigned *index;
};

// Key of every particle (frame positions, in the frame's own cube) and the identity order.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) tree_keys(const TreeKeysArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        unsigned c[3];
        const float4 p = a.pos_mass[i];
        grid_cell(p.x, p.y, p.z, a.ox, a.oy, a.oz, a.scale, c);
        a.keys[i] = a.hilbert ? hilbert_key(c)
                          : (spread_bits(c[0]) << 2) | (spread_bits(c[1]) << 1) | spread_bits(c[2]);
        a.index[i] = (unsigned)i;
    }
}

// ---------------------------------------------------------------------------------------------
// Exclusive prefix sums of unsigned arrays in one launch, a chained scan with decoupled
// look-back (Merrill and Garland 2016): each block takes the next tile of SCAN_TILE elements in
// the order the blocks start, scans it, publishes its total, and adds the totals of the tiles
// before it, which its first warp reads back, 32 tiles a round, from the nearest tile that has
// published its inclusive prefix; as a block only waits for tiles taken before its own, by
// blocks already running, it never waits for a block that cannot run.

// Inclusive prefix of v over the lanes of the (whole) warp.
__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v, unsigned lane)
{
    for (unsigned o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(FULL_MASK, v, o);
        if (lane >= o) v += y;
    }
    return v;
}

// Exclusive prefix of v over the block's threads in order; *total gets the block's sum.
__device__ unsigned block_exclusive_scan(unsigned v, unsigned *total)
{
    __shared__ unsigned warp_sums[BUILD_WARPS];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned inclusive = warp_inclusive_scan(v, lane);
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const unsigned w = warp_inclusive_scan(lane < BUILD_WARPS ? warp_sums[lane] : 0u, lane);
        if (lane < BUILD_WARPS) warp_sums[lane] = w;
    }
    __syncthreads();
    const unsigned before = warp > 0 ? warp_sums[warp - 1] : 0u;
    *total = warp_sums[BUILD_WARPS - 1];
    __syncthreads();
    return before + inclusive - v;
}

// A tile's published state: the status in the high word, the sum in the low one.
#define TILE_TOTAL 1ull  // the low word is the tile's own total
#define TILE_PREFIX 2ull // the low word is the sum of every element up to the tile's end

// The sum of the counts of every tile before `tile` (at least 1), read back from the published
// states by the first warp, 32 tiles a round: it waits until the 32 tiles before the window's end
// have published, adds the totals after the nearest inclusive prefix and that prefix, and moves
// the window back by 32 tiles while none is a prefix. Tiles before the first count as a prefix of
// nothing.
__device__ unsigned tiles_before_by_look_back(u64 *tiles, unsigned tile)
{
    const unsigned lane = threadIdx.x & 31;
    unsigned before = 0;
    for (long long end = tile;;) {
        const long long t = end - 32 + lane;
        // An atomic read: the state is written whole, status and sum together.
        const u64 state = t >= 0 ? atomicAdd(&tiles[t], 0ull) : TILE_PREFIX << 32;
        const u64 status = state >> 32;
        if (__any_sync(FULL_MASK, status == 0)) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
            __nanosleep(32);
#endif
            continue;
        }
        const unsigned prefixes = __ballot_sync(FULL_MASK, status == TILE_PREFIX);
        const unsigned nearest = prefixes ? 31u - (unsigned)__clz((int)prefixes) : 0u;
        const unsigned sum = warp_inclusive_scan(lane >= nearest ? (unsigned)state : 0u, lane);
        before += __shfl_sync(FULL_MASK, sum, 31);
        if (prefixes) return before;
        end -= 32;
    }
}

// Called by the first warp: publishes `tile`'s own `total` in `tiles`, reads the sum of the
// tiles before it back (tiles_before_by_look_back), publishes its inclusive prefix, and returns
// that sum (0 for the first tile).
__device__ unsigned publish_tile_prefix(u64 *tiles, unsigned tile, unsigned total)
{
    unsigned before = 0;
    if (tile > 0) {
        if (threadIdx.x == 0) atomicExch(&tiles[tile], (TILE_TOTAL << 32) | total);
        before = tiles_before_by_look_back(tiles, tile);
    }
    if (threadIdx.x == 0) atomicExch(&tiles[tile], (TILE_PREFIX << 32) | (before + total));
    return before;
}

// Called by every thread of a block once its tile is done: counts the tile in `*done`, and the
// block of the last of `ntiles` tiles (every look-back over by then) zeroes the first `ntiles`
// states of each of `arrays` state arrays `stride` words apart and the count, so that the next
// launch finds them zero.
__device__ void clear_states_after_last_tile(
    u64 *states, unsigned arrays, unsigned stride, unsigned ntiles, unsigned *done)
{
    __shared__ unsigned last_done;
    if (threadIdx.x == 0) {
        __threadfence();
        last_done = atomicAdd(done, 1u) == ntiles - 1;
    }
    __syncthreads();
    if (last_done) {
        for (unsigned k = 0; k < arrays; k++)
            for (unsigned t = threadIdx.x; t < ntiles; t += BUILD_BLOCK)
                states[k * stride + t] = 0ull;
        if (threadIdx.x == 0) atomicExch(done, 0u);
    }
    __syncthreads();
}

// The arguments of scan_chained.
struct RUST_TWIN ScanArgs {
    // The counts to scan in place.
    unsigned *data;
    // Their number (at least 1); the launch has one block per SCAN_TILE of them.
    int m;
    // Per tile, its published state: all zero before the launch, which leaves them so.
    u64 *tiles;
    // Two words, zero before the launch, which leaves them so: the next tile to take, and the
    // tiles done.
    unsigned *counters;
    // The entry whose scanned value goes to *out (-1: none).
    int word;
    // Where that value goes.
    unsigned *out;
};

// In-place exclusive scan of data[0..m) (see above); *out = the scanned data[word].
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) scan_chained(const ScanArgs a)
{
    __shared__ unsigned tile_taken, tiles_before;
    const unsigned ntiles = gridDim.x;
    if (threadIdx.x == 0) {
        tile_taken = atomicAdd(&a.counters[0], 1u);
        // Every block has taken its tile once the last one is taken: the counter starts again.
        if (tile_taken == ntiles - 1) atomicExch(&a.counters[0], 0u);
    }
    __syncthreads();
    const unsigned tile = tile_taken;
    const long long base = (long long)tile * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
    unsigned v[SCAN_ITEMS], sum = 0;
    for (int k = 0; k < SCAN_ITEMS; k++) {
        v[k] = base + k < a.m ? a.data[base + k] : 0u;
        sum += v[k];
    }
    unsigned total;
    unsigned run = block_exclusive_scan(sum, &total);
    if (threadIdx.x < 32) {
        const unsigned before = publish_tile_prefix(a.tiles, tile, total);
        if (threadIdx.x == 0) tiles_before = before;
    }
    __syncthreads();
    run += tiles_before;
    for (int k = 0; k < SCAN_ITEMS; k++) {
        if (base + k < a.m) a.data[base + k] = run;
        if (base + k == a.word) *a.out = run;
        run += v[k];
    }
    // The last block done clears the states for the next launch.
    clear_states_after_last_tile(a.tiles, 1, 0, ntiles, &a.counters[1]);
}

// ---------------------------------------------------------------------------------------------
// Stable least-significant-digit radix sort of (key, index), 8 bits per pass, one launch a pass
// (Onesweep: Adinets and Merrill 2022). radix_digit_counts first counts all eight digits of
// every key, so that a pass knows where each digit value starts, and passes whose digit is the
// same for every key are skipped. A pass's blocks take tiles of RADIX_TILE keys in the order
// they start, count their digits, publish them per digit value, add the counts of the tiles
// before theirs by decoupled look-back (as scan_chained does, one thread per digit value), and
// scatter their keys.

// The arguments of radix_digit_counts.
struct RUST_TWIN RadixDigitCountsArgs {
    // The keys.
    const u64 *keys;
    // Their number.
    int n;
    // 8 * 256 digit counts (digit-major), zero on entry.
    unsigned *counts;
};

// Counts of all eight 8-bit digits of every key: counts[d * 256 + v] += keys with digit d = v.
// `counts` must be zero on entry.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    radix_digit_counts(const RadixDigitCountsArgs a)
{
    __shared__ unsigned h[8 * 256];
    for (int j = threadIdx.x; j < 8 * 256; j += blockDim.x) h[j] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const u64 k = a.keys[i];
        for (int d = 0; d < 8; d++) atomicAdd(&h[d * 256 + (unsigned)((k >> (8 * d)) & 255)], 1u);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < 8 * 256; j += blockDim.x)
        if (h[j]) atomicAdd(&a.counts[j], h[j]);
}

// The arguments of one radix-sort pass (radix_onesweep).
struct RUST_TWIN RadixPassArgs {
    // The keys, in the order of the previous pass.
    const u64 *keys_in;
    // Their particles' indices, in the same order.
    const unsigned *index_in;
    // Keys.
    int n;
    // Bit shift of the pass's 8-bit digit: 8 times its number.
    int shift;
    // Tiles of RADIX_TILE keys (the launch's blocks).
    int ntiles;
    // The 256 counts of the pass's digit values over all keys (radix_digit_counts).
    const unsigned *digit_counts;
    // Per tile and digit value (tile-major), its published state: the pass number (epoch) in
    // the top 30 bits, the status (TILE_TOTAL, TILE_PREFIX) in the next 2, the count in the low
    // 32. A state of another pass is not yet published in this one.
    u64 *states;
    // The next tile to take: zero before the launch, which leaves it so.
    unsigned *counter;
    // This pass's number, 1 to 2^30 - 1, different from the last pass's that used the states.
    unsigned epoch;
    // The keys, sorted by the pass's digit (stable).
    u64 *keys_out;
    // Their particles' indices, in the same order.
    unsigned *index_out;
};

// The parameters are the fields of RadixPassArgs, restrict-qualified (NVVM honours __restrict__
// only on kernel parameters; build.rs checks them against the struct).
#define RADIX_PASS_PARAMETERS                  \
    const u64 *__restrict__ keys_in,           \
    const unsigned *__restrict__ index_in,     \
    int n,                                     \
    int shift,                                 \
    int ntiles,                                \
    const unsigned *__restrict__ digit_counts, \
    u64 *__restrict__ states,                  \
    unsigned *__restrict__ counter,            \
    unsigned epoch,                            \
    u64 *__restrict__ keys_out,                \
    unsigned *__restrict__ index_out

// One pass: each key of a tile goes to where its digit value starts, plus the keys of that
// value in the tiles before, plus those before it in its tile (rounds of one key per thread, in
// order; within a round, lanes with equal digits found with __match_any_sync, warps in order).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) radix_onesweep(RADIX_PASS_PARAMETERS)
{
    __shared__ unsigned tile_taken;
    __shared__ unsigned next[256];
    __shared__ unsigned warp_counts[BUILD_WARPS][256];
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (t == 0) {
        tile_taken = atomicAdd(counter, 1u);
        // Every block has taken its tile once the last one is taken: the counter starts again.
        if (tile_taken == (unsigned)ntiles - 1) atomicExch(counter, 0u);
    }
    next[t] = 0;
    __syncthreads();
    const unsigned tile = tile_taken;
    const long long base = (long long)tile * RADIX_TILE;
    u64 key[RADIX_ITEMS];
    for (int r = 0; r < RADIX_ITEMS; r++) {
        const long long i = base + r * BUILD_BLOCK + t;
        key[r] = i < n ? keys_in[i] : 0ull;
        if (i < n) atomicAdd(&next[(unsigned)((key[r] >> shift) & 255)], 1u);
    }
    __syncthreads();
    // Thread t: digit value t, its keys in this tile, where the value starts over all keys.
    const unsigned own = next[t];
    unsigned all;
    const unsigned start = block_exclusive_scan(digit_counts[t], &all);
    const u64 tag = (u64)epoch << 34;
    unsigned before = 0;
    if (tile > 0) {
        atomicExch(&states[(long long)tile * 256 + t], tag | (TILE_TOTAL << 32) | own);
        for (long long p = (long long)tile - 1;;) {
            // An atomic read: the state is written whole, epoch, status and count together.
            const u64 state = atomicAdd(&states[p * 256 + t], 0ull);
            const u64 status = (state >> 32) & 3ull;
            if ((state >> 34) != epoch || status == 0) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
                __nanosleep(32);
#endif
                continue;
            }
            before += (unsigned)state;
            if (status == TILE_PREFIX) break;
            p--;
        }
    }
    atomicExch(&states[(long long)tile * 256 + t], tag | (TILE_PREFIX << 32) | (before + own));
    next[t] = start + before;
    for (int r = 0; r < RADIX_ITEMS; r++) {
        const long long i = base + r * BUILD_BLOCK + t;
        const bool valid = i < n;
        const unsigned digit = valid ? (unsigned)((key[r] >> shift) & 255) : 256u;
        for (int w = 0; w < BUILD_WARPS; w++) warp_counts[w][t] = 0;
        __syncthreads();
        const unsigned peers = __match_any_sync(FULL_MASK, digit);
        const unsigned rank = __popc(peers & ((1u << lane) - 1u));
        if (valid && rank == 0) warp_counts[warp][digit] = __popc(peers);
        __syncthreads();
        unsigned run = next[t];
        for (int w = 0; w < BUILD_WARPS; w++) {
            const unsigned c = warp_counts[w][t];
            warp_counts[w][t] = run;
            run += c;
        }
        next[t] = run;
        __syncthreads();
        if (valid) {
            const unsigned at = warp_counts[warp][digit] + rank;
            keys_out[at] = key[r];
            index_out[at] = index_in[i];
        }
        __syncthreads();
    }
}

// The arguments of gather_particles.
struct RUST_TWIN GatherParticlesArgs {
    // Per particle: frame position and mass (float32).
    const float4 *pos_mass;
    // Per sorted slot: its particle.
    const unsigned *index;
    // Particles.
    int n;
    // Per sorted slot: its particle's frame position and mass.
    float4 *sorted;
};

// The particles in key order.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    gather_particles(const GatherParticlesArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        a.sorted[i] = a.pos_mass[a.index[i]];
}

// ---------------------------------------------------------------------------------------------
// The pair of particles within PAIR_WINDOW of each other in the tree's order that the float32
// frame resolves worst (src/tree/close.rs): how finely the job must be resolved.

// Particles that follow it each particle is compared with (close.rs WINDOW).
#define PAIR_WINDOW 8

// The pair of sorted slots k, k + j with q = (max(s, eps) / m)^2 as a word whose minimum over
// all pairs is the worst resolved one (close.rs pair_key).
__device__ __forceinline__ u64 pair_key(double q, unsigned k, unsigned j)
{
    return ((u64)__double_as_longlong(q) >> 36 << 36) | ((u64)(j - 1) << 32) | k;
}

// The distance, in the maximum norm, of the particle at a from c, at least `near` (close.rs
// distance, and NEAR times the side).
__device__ __forceinline__ double centre_distance(const double *a, const double c[3], double near)
{
    return fmax(fmax(fmax(fabs(a[0] - c[0]), fabs(a[1] - c[1])), fabs(a[2] - c[2])), near);
}

// The arguments of closest_pair.
struct RUST_TWIN ClosestPairArgs {
    // Particles.
    int n;
    // Per sorted slot: its particle (the tree's order).
    const unsigned *index;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // The frame's centre, x (length units).
    double cx;
    // The frame's centre, y (length units).
    double cy;
    // The frame's centre, z (length units).
    double cz;
    // The least distance from the centre counted (length units): NEAR times the frame's side.
    double near;
    // Squared softening length (length units squared).
    double eps2;
    // The least pair_key (all ones on entry).
    u64 *best;
};

// *best (all ones on entry) gets the smallest pair_key of the pairs of the n particles within
// PAIR_WINDOW of each other in the tree's order `index` (positions pos, 3 doubles each; the
// frame's centre (cx, cy, cz), the least distance from it `near`, squared softening eps2; with
// eps2 0 coincident pairs count too, src/tree/close.rs): each block reduces its pairs, then one
// atomic minimum.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) closest_pair(const ClosestPairArgs a)
{
    __shared__ u64 least[BUILD_BLOCK];
    const double c[3] = {a.cx, a.cy, a.cz};
    u64 least_key = ~0ull;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n - 1; k += gridDim.x * blockDim.x) {
        const double *p = a.pos + 3ll * a.index[k];
        const double mp = centre_distance(p, c, a.near);
        for (int j = 1; j <= PAIR_WINDOW && k + j < a.n; j++) {
            const double *b = a.pos + 3ll * a.index[k + j];
            const double dx = b[0] - p[0], dy = b[1] - p[1], dz = b[2] - p[2];
            const double s2 = dx * dx + dy * dy + dz * dz;
            if (s2 > 0.0 || a.eps2 == 0.0) {
                const double m = fmax(mp, centre_distance(b, c, a.near));
                const u64 key = pair_key(fmax(s2, a.eps2) / (m * m), (unsigned)k, (unsigned)j);
                least_key = key < least_key ? key : least_key;
            }
        }
    }
    least[threadIdx.x] = least_key;
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half && least[threadIdx.x + half] < least[threadIdx.x])
            least[threadIdx.x] = least[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0 && least[0] != ~0ull) atomicMin(a.best, least[0]);
}

// The arguments of pair_record.
struct RUST_TWIN PairRecordArgs {
    // The closest pair's key (pair_key; all ones: no pair).
    const u64 *best;
    // The most particles at distinct positions in one deepest leaf (crowded_leaves).
    const unsigned *most;
    // Per sorted slot: its particle (the tree's order).
    const unsigned *index;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Per particle: its id; not read unless has_id.
    const u64 *id;
    // 1 when the rank holds ids.
    int has_id;
    // The record (eleven doubles).
    double *rec;
};

// The closeness of a tree's particles as eleven doubles, brought down in one copy: the pair of
// sorted slots k, l of the key `best` (close.rs pair_slots, then pair_at: the two particles'
// indices, -1 for the first without a pair, their positions, their ids' bits where has_id), and
// the crowded count `most`.
extern "C" __global__ void pair_record(const PairRecordArgs a)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    a.rec[10] = (double)*a.most;
    const u64 key = *a.best;
    if (key == ~0ull) {
        a.rec[0] = -1.0;
        return;
    }
    const unsigned k = (unsigned)(key & 0xffffffffu), l = k + 1 + (unsigned)((key >> 32) & 0xf);
    for (int j = 0; j < 2; j++) {
        const long long i = a.index[j == 0 ? k : l];
        a.rec[j] = (double)i;
        for (int d = 0; d < 3; d++) a.rec[2 + 3 * j + d] = a.pos[3 * i + d];
        a.rec[8 + j] = a.has_id ? __longlong_as_double((long long)a.id[i]) : 0.0;
    }
}

// The arguments of crowded_leaves.
struct RUST_TWIN CrowdedLeavesArgs {
    // Cells of the tree.
    int nc;
    // The tree (first, count, level, nchild read).
    TreeArrays tree;
    // Per sorted slot: its particle (the tree's order).
    const unsigned *index;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // The largest count found (0 on entry).
    unsigned *most;
};

// *most gets the largest count of the nc cells' deepest leaves (level TREE_MAX_LEVEL) whose
// first and last particles in the tree's order `index` lie apart (positions pos, 3 doubles
// each): particles at distinct positions the tree cannot separate (src/tree/close.rs crowded).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) crowded_leaves(const CrowdedLeavesArgs a)
{
    const TreeArrays t = a.tree;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.nc; c += gridDim.x * blockDim.x) {
        if (t.nchild[c] != 0 || t.level[c] != TREE_MAX_LEVEL || t.count[c] < 2) continue;
        const double *p = a.pos + 3ll * a.index[t.first[c]];
        const double *q = a.pos + 3ll * a.index[t.first[c] + t.count[c] - 1];
        if (p[0] != q[0] || p[1] != q[1] || p[2] != q[2]) atomicMax(a.most, t.count[c]);
    }
}

// ---------------------------------------------------------------------------------------------
// Topology, one level at a time (src/tree/build.rs): the cells of a level are listed in key
// order in a breadth-first array; a cell with more than ncrit particles above TREE_MAX_LEVEL
// splits into its non-empty octants, which are appended as the next level. Children of one
// cell are therefore consecutive, which the subtree sizes, the preorder and the upward pass use.
//
// The levels follow one another on the device: each launch of split_level reads where its level
// lies and how many of its cells split from the build's level record (LEVEL_RECORD_WORDS words),
// which the level before wrote, and writes the next level's, so that the host launches several
// levels before it reads the record back (src/tree/build_gpu.rs).

// Words of the level record: where each level's cells start (TREE_MAX_LEVEL + 3 words: levels
// 0 ..= TREE_MAX_LEVEL + 1, then the end), each level's cells that split and the cells that
// split in it and above it (TREE_MAX_LEVEL + 3 words each), and what the arrays were short of
// (two words: the cells and the splitting cells of one level they had to hold; 0 when enough).
#define LEVEL_SLOTS (TREE_MAX_LEVEL + 3)
#define LEVEL_RECORD_WORDS (3 * LEVEL_SLOTS + 2)
// Octants per tile of split_level: one per thread, the 8 of a splitting cell in one tile.
#define SPLIT_TILE BUILD_BLOCK

// The arguments of tree_root.
struct RUST_TWIN TreeRootArgs {
    // Particles.
    int n;
    // Most particles of a leaf.
    int ncrit;
    // Per breadth-first cell: first particle.
    unsigned *first;
    // Per breadth-first cell: number of particles.
    unsigned *count;
    // Per breadth-first cell: tree level.
    unsigned char *level;
    // Per breadth-first cell: number of children.
    unsigned char *nchild;
    // The root level's cells that split (the root, where it does).
    unsigned *split;
    // Per breadth-first cell that splits: its place among them (their moments' slot).
    unsigned *inner;
    // The level record (LEVEL_RECORD_WORDS).
    unsigned *record;
};

// Whether a cell of `level` holding n particles splits: more than a leaf holds, above the
// deepest level.
__device__ __forceinline__ bool cell_splits(unsigned n, int ncrit, int level)
{
    return n > (unsigned)ncrit && level < TREE_MAX_LEVEL;
}

// The root: all n particles, no children yet, first in the list of cells that split (where it
// does); the level record of level 0 alone, nothing short.
extern "C" __global__ void tree_root(const TreeRootArgs a)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.first[0] = 0;
        a.count[0] = (unsigned)a.n;
        a.level[0] = 0;
        a.nchild[0] = 0;
        a.split[0] = 0;
        a.inner[0] = 0;
        const unsigned splits = cell_splits((unsigned)a.n, a.ncrit, 0) ? 1u : 0u;
        for (int k = 0; k < LEVEL_RECORD_WORDS; k++) a.record[k] = 0;
        a.record[1] = 1;
        a.record[LEVEL_SLOTS] = splits;
        a.record[2 * LEVEL_SLOTS] = splits;
    }
}

// The arguments of split_level.
struct RUST_TWIN SplitLevelArgs {
    // The sorted keys.
    const u64 *keys;
    // The level whose splitting cells are split.
    int level;
    // Most particles of a leaf.
    int ncrit;
    // Cells the breadth-first arrays hold.
    int capacity;
    // Entries the lists of splitting cells hold.
    int split_capacity;
    // The level's cells that split, ascending.
    const unsigned *split;
    // The next level's cells that split, ascending (written).
    unsigned *next_split;
    // Per breadth-first cell: first particle.
    unsigned *first;
    // Per breadth-first cell: number of particles.
    unsigned *count;
    // Per breadth-first cell: tree level.
    unsigned char *levels;
    // Per breadth-first cell: its first child.
    unsigned *child;
    // Per breadth-first cell: number of children.
    unsigned char *nchild;
    // Per breadth-first cell that splits: its place among them (their moments' slot).
    unsigned *inner;
    // The level record (LEVEL_RECORD_WORDS): this level's is read, the next one's written.
    unsigned *record;
    // Per tile of octants, the published states of its new cells and of its new splitting
    // cells (two arrays of `tiles` words one after the other): zero before the launch, which
    // leaves them so.
    u64 *tile_states;
    // Tiles each array of tile_states holds.
    int tiles;
    // Two words, zero before the launch, which leaves them so: the next tile to take, and the
    // tiles done.
    unsigned *counters;
};

// Splits the level's splitting cells (as the level record gives them; nothing when there are
// none, which is also the record of a level after one whose arrays were short) into their
// octants, octant o of splitting cell i being number 8 i + o: each octant's key range by
// bisection; the non-empty ones appended as the next level in their order (their places the
// exclusive prefix sums of the non-empty flags, by a chained scan over tiles of octants as
// scan_chained's), each without children until it splits; each
// splitting cell's first child and number of children; and the next level's splitting cells
// listed (their places the prefix sums of their flags, scanned alongside). The block holding
// the last octant writes the next level's record, and what the arrays were short of (the next
// level then has no splitting cells in the record, so that the levels after it stop): cells
// beyond `capacity` and list entries beyond `split_capacity` are not written, so that the host
// can grow the arrays and build again. Blocks take tiles in turn until none is left.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) split_level(const SplitLevelArgs a)
{
    __shared__ unsigned octant_count[SPLIT_TILE];
    __shared__ unsigned tile_taken, cells_before, splits_before;
    unsigned *const start = a.record, *const nsplit = a.record + LEVEL_SLOTS;
    unsigned *const inner = a.record + 2 * LEVEL_SLOTS;
    unsigned *const short_of = a.record + 3 * LEVEL_SLOTS;
    const int level = a.level;
    // Only the level before wrote these (a level after an array was short has none).
    const unsigned m = 8u * nsplit[level];
    if (m == 0) return;
    const unsigned ntiles = (m + SPLIT_TILE - 1) / SPLIT_TILE;
    const unsigned next_lo = start[level + 1], inner_base = inner[level];
    const int shift = 3 * (TREE_MAX_LEVEL - 1 - level);
    u64 *const cell_states = a.tile_states, *const split_states = a.tile_states + a.tiles;
    for (;;) {
        if (threadIdx.x == 0) {
            tile_taken = atomicAdd(&a.counters[0], 1u);
            // Each block takes one tile past the last before it stops: the last such take
            // leaves the counter for the next launch.
            if (tile_taken == ntiles + gridDim.x - 1) atomicExch(&a.counters[0], 0u);
        }
        __syncthreads();
        const unsigned tile = tile_taken;
        if (tile >= ntiles) return;
        const unsigned j = tile * SPLIT_TILE + threadIdx.x;
        unsigned f = 0, n = 0;
        if (j < m) {
            const unsigned c = a.split[j >> 3];
            const unsigned o = j & 7;
            const unsigned cf = a.first[c], cn = a.count[c];
            // First key of the range with octant digit >= d, by bisection.
            unsigned bounds[2];
            for (int b = 0; b < 2; b++) {
                const unsigned d = o + b;
                unsigned l = cf, r = cf + cn;
                while (l < r) {
                    const unsigned mid = l + (r - l) / 2;
                    if (((a.keys[mid] >> shift) & 7) < d) l = mid + 1;
                    else r = mid;
                }
                bounds[b] = l;
            }
            f = bounds[0];
            n = bounds[1] - bounds[0];
        }
        const bool splits = j < m && cell_splits(n, a.ncrit, level + 1);
        octant_count[threadIdx.x] = n;
        unsigned cells_total, splits_total;
        unsigned slot = block_exclusive_scan(n > 0 ? 1u : 0u, &cells_total);
        unsigned split_slot = block_exclusive_scan(splits ? 1u : 0u, &splits_total);
        if (threadIdx.x < 32) {
            const unsigned cells = publish_tile_prefix(cell_states, tile, cells_total);
            const unsigned splits_so_far = publish_tile_prefix(split_states, tile, splits_total);
            if (threadIdx.x == 0) {
                cells_before = cells;
                splits_before = splits_so_far;
            }
        }
        __syncthreads();
        slot += cells_before;
        split_slot += splits_before;
        if (j < m) {
            if ((j & 7) == 0) {
                const unsigned c = a.split[j >> 3];
                unsigned kids = 0;
                for (int k = 0; k < 8; k++) kids += octant_count[threadIdx.x + k] > 0;
                a.nchild[c] = (unsigned char)kids;
                a.child[c] = next_lo + slot;
            }
            if (n > 0) {
                const long long d = (long long)next_lo + slot;
                if (d < a.capacity) {
                    a.first[d] = f;
                    a.count[d] = n;
                    a.levels[d] = (unsigned char)(level + 1);
                    a.nchild[d] = 0;
                    a.child[d] = 0;
                    if (splits) a.inner[d] = inner_base + split_slot;
                    if (splits && split_slot < (unsigned)a.split_capacity)
                        a.next_split[split_slot] = (unsigned)d;
                }
            }
            if (j == m - 1) {
                const unsigned cells = slot + (n > 0), next_splits = split_slot + splits;
                const unsigned long long end = (unsigned long long)next_lo + cells;
                const bool cells_short = end > (unsigned long long)a.capacity;
                const bool splits_short = next_splits > (unsigned)a.split_capacity;
                if (cells_short) short_of[0] = (unsigned)end;
                if (splits_short) short_of[1] = next_splits;
                start[level + 2] = (unsigned)end;
                nsplit[level + 1] = cells_short || splits_short ? 0u : next_splits;
                inner[level + 1] = inner_base + next_splits;
            }
        }
        // The last tile done clears both arrays' states for the next launch.
        clear_states_after_last_tile(a.tile_states, 2, a.tiles, ntiles, &a.counters[1]);
    }
}

// The arguments of subtree_sizes and preorder_children.
struct RUST_TWIN CellOrderArgs {
    // The level's first cell.
    int lo;
    // One past the level's last cell.
    int hi;
    // Per breadth-first cell: its first child.
    const unsigned *child;
    // Per breadth-first cell: number of children.
    const unsigned char *nchild;
    // Per breadth-first cell: cells in its subtree (written by subtree_sizes).
    unsigned *subtree;
    // Per breadth-first cell: its preorder position (written by preorder_children).
    unsigned *preorder;
};

// Subtree sizes of the cells in [lo, hi), whose children's are known (deepest level first).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) subtree_sizes(const CellOrderArgs a)
{
    for (int c = a.lo + blockIdx.x * blockDim.x + threadIdx.x; c < a.hi;
         c += gridDim.x * blockDim.x) {
        unsigned s = 1;
        for (int k = 0; k < a.nchild[c]; k++) s += a.subtree[a.child[c] + k];
        a.subtree[c] = s;
    }
}

// Preorder positions of the children of the cells in [lo, hi), whose own are known (root
// first): a cell's first child follows it, each next child follows its elder sibling's subtree.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    preorder_children(const CellOrderArgs a)
{
    for (int c = a.lo + blockIdx.x * blockDim.x + threadIdx.x; c < a.hi;
         c += gridDim.x * blockDim.x) {
        unsigned p = a.preorder[c] + 1;
        for (int k = 0; k < a.nchild[c]; k++) {
            a.preorder[a.child[c] + k] = p;
            p += a.subtree[a.child[c] + k];
        }
    }
}

// The arguments of cell_parents.
struct RUST_TWIN CellParentsArgs {
    // Cells of the tree.
    int ncells;
    // The tree (nchild, subtree read; parent written).
    TreeArrays tree;
};

// The parent of every cell (NO_PARENT for the root), from the children each cell lists.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) cell_parents(const CellParentsArgs a)
{
    const TreeArrays t = a.tree;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.ncells; c += gridDim.x * blockDim.x) {
        if (c == 0) t.parent[0] = NO_PARENT;
        unsigned kid = c + 1;
        for (int j = 0; j < t.nchild[c]; j++) {
            t.parent[kid] = c;
            kid += t.subtree[kid];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Upward pass (src/tree/moments.rs), float64, one level at a time from the deepest.

// m (3 y y^T - |y|^2 I) added to q (xx, yy, zz, xy, xz, yz) as the CPU's point_quad forms it.
__device__ __forceinline__ void point_quad(double m, const double y[3], double q[6])
{
    const double r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
    q[0] = m * (3.0 * y[0] * y[0] - r2);
    q[1] = m * (3.0 * y[1] * y[1] - r2);
    q[2] = m * (3.0 * y[2] * y[2] - r2);
    q[3] = m * 3.0 * y[0] * y[1];
    q[4] = m * 3.0 * y[0] * y[2];
    q[5] = m * 3.0 * y[1] * y[2];
}

// The float64 moments (MOMENT_WORDS: mass, centre of mass, quadrupole, trace) of k points,
// point(j, y) giving the j-th's position y and weight; `sub(j)`, for points that are cells, their
// own moments (null for particles), whose quadrupoles and traces are carried over (parallel-axis
// theorem). The CPU's order (src/tree/moments.rs).
template <typename Point, typename Sub>
__device__ __forceinline__ void moments_of(unsigned k, Point point, Sub sub, double *out)
{
    double m = 0.0, n = 0.0, sum[3] = {0.0, 0.0, 0.0}, mean[3] = {0.0, 0.0, 0.0};
    for (unsigned j = 0; j < k; j++) {
        double y[3];
        const double w = point(j, y);
        m += w;
        n += 1.0;
        for (int d = 0; d < 3; d++) {
            sum[d] += w * y[d];
            mean[d] += y[d];
        }
    }
    double com[3];
    for (int d = 0; d < 3; d++) com[d] = m > 0.0 ? sum[d] / m : mean[d] / n;
    const double mass = m > 0.0 ? m : 0.0;
    double quad[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, trace = 0.0;
    for (unsigned j = 0; j < k; j++) {
        double y[3], q[6];
        const double w = point(j, y);
        for (int d = 0; d < 3; d++) y[d] -= com[d];
        point_quad(w, y, q);
        const double r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
        const double *s = sub(j);
        if (s == nullptr) {
            for (int d = 0; d < 6; d++) quad[d] += q[d];
            trace += w * r2;
        } else {
            for (int d = 0; d < 6; d++) quad[d] += s[4 + d] + q[d];
            trace += s[10] + w * r2;
        }
    }
    out[0] = mass;
    for (int d = 0; d < 3; d++) out[1 + d] = com[d];
    for (int d = 0; d < 6; d++) out[4 + d] = quad[d];
    out[10] = trace;
}

// The moments of a leaf: its k particles from `first` of the sorted particles.
__device__ __forceinline__ void leaf_moments(const float4 *particles, unsigned first, unsigned k,
                                             double *out)
{
    moments_of(
        k,
        [&](unsigned j, double y[3]) -> double {
            const float4 p = particles[first + j];
            y[0] = p.x;
            y[1] = p.y;
            y[2] = p.z;
            return p.w;
        },
        [](unsigned) -> const double * { return nullptr; }, out);
}

// The arguments of cell_moments and cell_bounds: one level of the breadth-first cells, each
// summed from its particles (a leaf) or from its children.
struct RUST_TWIN UpwardArgs {
    // The level's first cell.
    int lo;
    // One past the level's last cell.
    int hi;
    // Sorted particles: frame position and mass.
    const float4 *particles;
    // Per breadth-first cell: first particle.
    const unsigned *first;
    // Per breadth-first cell: number of particles.
    const unsigned *count;
    // Per breadth-first cell: its first child.
    const unsigned *child;
    // Per breadth-first cell: number of children.
    const unsigned char *nchild;
    // Per breadth-first cell that splits: its slot in `mom`.
    const unsigned *inner;
    // cell_moments: per cell that splits, MOMENT_WORDS float64 moments (a leaf's are
    // recomputed from its particles where they are needed).
    double *mom;
    // cell_bounds: per breadth-first cell, the bounds of its particles (6 floats, frame units).
    float *bounds;
};

// The moments (MOMENT_WORDS float64) into out of a cell from those of its k children, kids[j]
// each (mass, centre of mass, quadrupole), in the CPU's order.
__device__ __forceinline__ void moments_of_children(unsigned k, const double (*kids)[MOMENT_WORDS],
                                                    double *out)
{
    moments_of(
        k,
        [&](unsigned j, double y[3]) -> double {
            y[0] = kids[j][1];
            y[1] = kids[j][2];
            y[2] = kids[j][3];
            return kids[j][0];
        },
        [&](unsigned j) -> const double * { return kids[j]; }, out);
}

// Moments of the cells in [lo, hi) that split into their slots of mom (MOMENT_WORDS doubles
// each), from their children's (a leaf child's from its particles, parallel-axis theorem), in
// the CPU's order. Leaves keep none: their moments are their particles'.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) cell_moments(const UpwardArgs a)
{
    for (int c = a.lo + blockIdx.x * blockDim.x + threadIdx.x; c < a.hi;
         c += gridDim.x * blockDim.x) {
        const unsigned k = a.nchild[c];
        if (k == 0) continue;
        const unsigned f = a.child[c];
        // Each child's moments once: a leaf's recomputed, the others' from their slots.
        double kids[8][MOMENT_WORDS];
        for (unsigned j = 0; j < k; j++) {
            const unsigned kid = f + j;
            if (a.nchild[kid] == 0) {
                leaf_moments(a.particles, a.first[kid], a.count[kid], kids[j]);
            } else {
                const double *s = a.mom + (long long)a.inner[kid] * MOMENT_WORDS;
                for (int w = 0; w < MOMENT_WORDS; w++) kids[j][w] = s[w];
            }
        }
        moments_of_children(k, kids, a.mom + (long long)a.inner[c] * MOMENT_WORDS);
    }
}

// cell_moments a warp a cell, for the levels of few cells (WARP_LEVEL_CELLS in
// src/tree/build_gpu.rs; launched with 32 threads per cell): lane j sums leaf child j from its
// particles, the lanes together bring the other children's moments, all at once, and lane 0
// combines them as cell_moments does, to the same bits. A thread a cell fetches the up to 88
// words one after another: the upper levels, a few hundred to a few thousand cells, took tens
// of µs each, as long as levels of a hundred thousand.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) cell_moments_warp(const UpwardArgs a)
{
    __shared__ double kids[BUILD_WARPS][8][MOMENT_WORDS];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long warps = (long long)gridDim.x * BUILD_WARPS;
    for (long long c = a.lo + (long long)blockIdx.x * BUILD_WARPS + warp; c < a.hi; c += warps) {
        const unsigned k = a.nchild[c];
        if (k == 0) continue;
        const unsigned f = a.child[c];
        if (lane < k && a.nchild[f + lane] == 0)
            leaf_moments(a.particles, a.first[f + lane], a.count[f + lane], kids[warp][lane]);
        for (unsigned i = lane; i < k * MOMENT_WORDS; i += 32) {
            const unsigned j = i / MOMENT_WORDS, w = i % MOMENT_WORDS;
            if (a.nchild[f + j] != 0)
                kids[warp][j][w] = a.mom[(long long)a.inner[f + j] * MOMENT_WORDS + w];
        }
        __syncwarp();
        if (lane == 0)
            moments_of_children(k, kids[warp], a.mom + (long long)a.inner[c] * MOMENT_WORDS);
        __syncwarp();
    }
}

// Cell c's float64 moments (MOMENT_WORDS) into s: its slot of mom where it splits, else from
// its particles.
__device__ __forceinline__ void cell_moments_of(unsigned nchild, unsigned inner, const double *mom,
                                                const float4 *particles, unsigned first,
                                                unsigned count, double *s)
{
    if (nchild == 0) {
        leaf_moments(particles, first, count, s);
    } else {
        for (int w = 0; w < MOMENT_WORDS; w++) s[w] = mom[(long long)inner * MOMENT_WORDS + w];
    }
}

// Cell p's float64 moments s (MOMENT_WORDS) stored in float32 at its preorder position p.
__device__ __forceinline__ float4 store_moments(unsigned p, const double *s,
                                                float4 *__restrict__ com_mass,
                                                float *__restrict__ quad, float *__restrict__ trace)
{
    const float4 cm = make_float4((float)s[1], (float)s[2], (float)s[3], (float)s[0]);
    com_mass[p] = cm;
    for (int d = 0; d < 6; d++) quad[6ll * p + d] = (float)s[4 + d];
    trace[p] = (float)s[10];
    return cm;
}

// S_eff of a cell with box `box` and centre of mass cm (update_s_eff): mac 0 Barnes-Hut,
// otherwise the modified criterion's (l/theta + s)^2.
__device__ __forceinline__ float cell_s_eff(float4 box, float4 cm, int mac, float theta)
{
    const float dx = box.x - cm.x, dy = box.y - cm.y, dz = box.z - cm.z;
    const float off = sqrtf(dx * dx + dy * dy + dz * dz);
    const float l = 2.0f * box.w;
    const float r = mac == 0 ? l / theta : l / theta + off;
    return r * r;
}

// The arguments of store_cells.
struct RUST_TWIN StoreCellsArgs {
    // Cells.
    int ncells;
    // Per breadth-first cell: its preorder position.
    const unsigned *preorder;
    // Per breadth-first cell: first particle.
    const unsigned *bfs_first;
    // Per breadth-first cell: number of particles.
    const unsigned *bfs_count;
    // Per breadth-first cell: tree level.
    const unsigned char *bfs_level;
    // Per breadth-first cell: number of children.
    const unsigned char *bfs_nchild;
    // Per breadth-first cell: cells in its subtree.
    const unsigned *bfs_subtree;
    // Per breadth-first cell that splits: its slot in `mom`.
    const unsigned *bfs_inner;
    // Per cell that splits: MOMENT_WORDS float64 moments.
    const double *mom;
    // Lower corner of the key grid's cube, x (frame units).
    double ox;
    // Lower corner of the key grid's cube, y (frame units).
    double oy;
    // Lower corner of the key grid's cube, z (frame units).
    double oz;
    // Side of the key grid's cube (frame units).
    double side;
    // The opening criterion: 0 Barnes-Hut, otherwise the modified criterion.
    int mac;
    // Opening angle.
    float theta;
    // The tree in preorder: its sorted particles read, its cells' arrays (but parent) written.
    TreeArrays tree;
    // Per preorder cell: its box again (the boxes a refit starts from).
    float4 *built;
};

// The parameters are the fields of StoreCellsArgs, restrict-qualified (NVVM honours __restrict__
// only on kernel parameters; build.rs checks them against the struct).
#define STORE_CELLS_PARAMETERS                    \
    int ncells,                                   \
    const unsigned *__restrict__ preorder,        \
    const unsigned *__restrict__ bfs_first,       \
    const unsigned *__restrict__ bfs_count,       \
    const unsigned char *__restrict__ bfs_level,  \
    const unsigned char *__restrict__ bfs_nchild, \
    const unsigned *__restrict__ bfs_subtree,     \
    const unsigned *__restrict__ bfs_inner,       \
    const double *__restrict__ mom,               \
    double ox,                                    \
    double oy,                                    \
    double oz,                                    \
    double side,                                  \
    int mac,                                      \
    float theta,                                  \
    float4 *__restrict__ tree_particles,          \
    unsigned *__restrict__ tree_first,            \
    unsigned *__restrict__ tree_count,            \
    unsigned char *__restrict__ tree_level,       \
    unsigned char *__restrict__ tree_nchild,      \
    unsigned *__restrict__ tree_subtree,          \
    float4 *__restrict__ tree_boxes,              \
    float4 *__restrict__ tree_com_mass,           \
    float *__restrict__ tree_quad,                \
    float *__restrict__ tree_trace,               \
    float *__restrict__ tree_s_eff,               \
    unsigned *__restrict__ tree_parent,           \
    float4 *__restrict__ built

// Writes every cell at its preorder position in the walk's arrays: topology, box (from the grid
// cell of its first particle, truncated to its level; also into `built`, the boxes a refit
// starts from), float32 moments and S_eff for the criterion (mac: 0 Barnes-Hut, otherwise the
// modified criterion).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) store_cells(STORE_CELLS_PARAMETERS)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncells; c += gridDim.x * blockDim.x) {
        const unsigned p = preorder[c];
        const unsigned lev = bfs_level[c];
        tree_first[p] = bfs_first[c];
        tree_count[p] = bfs_count[c];
        tree_level[p] = (unsigned char)lev;
        tree_nchild[p] = bfs_nchild[c];
        tree_subtree[p] = bfs_subtree[c];
        double s[MOMENT_WORDS];
        cell_moments_of(bfs_nchild[c], bfs_inner[c], mom, tree_particles, bfs_first[c],
                        bfs_count[c], s);
        const float4 cm = store_moments(p, s, tree_com_mass, tree_quad, tree_trace);
        unsigned g[3];
        const double cell = side / (double)(1ull << lev);
        const float4 q = tree_particles[bfs_first[c]];
        grid_cell(q.x, q.y, q.z, ox, oy, oz, (double)GRID_CELLS / side, g);
        const unsigned shift = TREE_MAX_LEVEL - lev;
        const float4 box = make_float4((float)(ox + ((double)(g[0] >> shift) + 0.5) * cell),
                                       (float)(oy + ((double)(g[1] >> shift) + 0.5) * cell),
                                       (float)(oz + ((double)(g[2] >> shift) + 0.5) * cell),
                                       (float)(0.5 * cell));
        tree_boxes[p] = box;
        built[p] = box;
        tree_s_eff[p] = cell_s_eff(box, cm, mac, theta);
    }
}

// ---------------------------------------------------------------------------------------------
// Refit (src/tree/refit.rs): the cells of the last rebuild kept, their particles gathered again
// in the tree's order from the current positions, moments and particle bounds recomputed level
// by level (cell_moments, cell_bounds), and every box grown where its particles left it.

// The arguments of refit_particles.
struct RUST_TWIN RefitParticlesArgs {
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Per particle: mass (mass units).
    const double *mass;
    // Per sorted slot: its particle (the tree's order).
    const unsigned *index;
    // Particles.
    int n;
    // The frame of the tree's build.
    FrameMap frame;
    // Per sorted slot: its particle's frame position and mass (float32).
    float4 *sorted;
};

// The particles in the tree's order (index[k]: the particle of sorted slot k), in the frame of
// the build's cube (to_frame) from the float64 positions, masses rounded to float32.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    refit_particles(const RefitParticlesArgs a)
{
    const FrameMap f = a.frame;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x) {
        const long long i = a.index[k];
        a.sorted[k] = make_float4(frame_coord(a.pos[3 * i], f.cx, f),
                                  frame_coord(a.pos[3 * i + 1], f.cy, f),
                                  frame_coord(a.pos[3 * i + 2], f.cz, f), (float)a.mass[i]);
    }
}

// Bounds of the particles of the cells in [lo, hi) (6 floats per cell: lowest x, y, z, then
// highest): leaves from their particles, the others from their children's.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) cell_bounds(const UpwardArgs a)
{
    const float inf = __int_as_float(0x7f800000);
    for (int c = a.lo + blockIdx.x * blockDim.x + threadIdx.x; c < a.hi;
         c += gridDim.x * blockDim.x) {
        float b[6] = {inf, inf, inf, -inf, -inf, -inf};
        if (a.nchild[c] == 0) {
            for (unsigned j = a.first[c]; j < a.first[c] + a.count[c]; j++) {
                const float4 p = a.particles[j];
                const float x[3] = {p.x, p.y, p.z};
                for (int k = 0; k < 3; k++) {
                    b[k] = fminf(b[k], x[k]);
                    b[3 + k] = fmaxf(b[3 + k], x[k]);
                }
            }
        } else {
            for (unsigned j = 0; j < a.nchild[c]; j++) {
                const float *s = a.bounds + 6ll * (a.child[c] + j);
                for (int k = 0; k < 3; k++) {
                    b[k] = fminf(b[k], s[k]);
                    b[3 + k] = fmaxf(b[3 + k], s[3 + k]);
                }
            }
        }
        for (int k = 0; k < 6; k++) a.bounds[6ll * c + k] = b[k];
    }
}

// The smallest float32 value >= x, for x >= 0 (refit.rs round_up).
__device__ __forceinline__ float round_up(double x)
{
    const float f = (float)x;
    return (double)f < x ? __int_as_float(__float_as_int(f) + 1) : f;
}

// The float32 cube (centre, half side) that holds the box from lo to hi (refit.rs
// bounding_cube): its centre rounded to float32, its half side measured from that centre and
// rounded up.
__device__ __forceinline__ float4 bounding_cube(const double lo[3], const double hi[3])
{
    float centre[3];
    double half = 0.0;
    for (int k = 0; k < 3; k++) centre[k] = (float)(0.5 * (lo[k] + hi[k]));
    for (int k = 0; k < 3; k++)
        half = fmax(half, fmax(hi[k] - (double)centre[k], (double)centre[k] - lo[k]));
    return make_float4(centre[0], centre[1], centre[2], round_up(half));
}

// The box of a refitted cell (refit.rs cube): the rebuild's box `built` while it holds the
// particle bounds b, else the bounding cube of both, centred on their common box and rounded
// outwards.
__device__ __forceinline__ float4 refit_box(float4 built, const float *b)
{
    const double h = built.w;
    const double c[3] = {built.x, built.y, built.z};
    double lo[3], hi[3];
    bool inside = true;
    for (int k = 0; k < 3; k++) {
        lo[k] = c[k] - h;
        hi[k] = c[k] + h;
        inside = inside && (double)b[k] >= lo[k] && (double)b[3 + k] <= hi[k];
    }
    if (inside) return built;
    for (int k = 0; k < 3; k++) {
        lo[k] = fmin(lo[k], (double)b[k]);
        hi[k] = fmax(hi[k], (double)b[3 + k]);
    }
    return bounding_cube(lo, hi);
}

// The arguments of refit_cells.
struct RUST_TWIN RefitCellsArgs {
    // Cells.
    int ncells;
    // Per breadth-first cell: its preorder position.
    const unsigned *preorder;
    // Per breadth-first cell that splits: its slot in `mom`.
    const unsigned *inner;
    // Per cell that splits: MOMENT_WORDS float64 moments.
    const double *mom;
    // Per breadth-first cell: the bounds of its particles (6 floats, frame units).
    const float *bounds;
    // Per preorder cell: its box at the last rebuild.
    const float4 *built;
    // The opening criterion: 0 Barnes-Hut, otherwise the modified criterion.
    int mac;
    // Opening angle.
    float theta;
    // The tree in preorder: boxes, com_mass, quad, trace and s_eff written.
    TreeArrays tree;
};

// Every refitted cell at its preorder position: float32 moments, its box (refit_box of the
// rebuild's box `built`) and S_eff.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) refit_cells(const RefitCellsArgs a)
{
    const TreeArrays t = a.tree;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.ncells; c += gridDim.x * blockDim.x) {
        const unsigned p = a.preorder[c];
        double s[MOMENT_WORDS];
        cell_moments_of(t.nchild[p], a.inner[c], a.mom, t.particles, t.first[p], t.count[p], s);
        const float4 cm = store_moments(p, s, t.com_mass, t.quad, t.trace);
        const float4 box = refit_box(a.built[p], a.bounds + 6ll * c);
        t.boxes[p] = box;
        t.s_eff[p] = cell_s_eff(box, cm, a.mac, a.theta);
    }
}
