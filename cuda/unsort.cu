// Results of a walk back in the particles' input order: target k of the walk order is input
// particle order[k]. Its (ax, ay, az, phi) and its (p2p, m2p) counts move there, so that the
// host receives them in input order and only converts them (src/walk/gpu/mod.rs, `unsort`).
// Either may stay where it is (a null source): the counts move in a launch of their own when
// they go into the room the results left.

// A walk's results, per target or per particle.
struct RUST_TWIN Results {
    // Acceleration and potential.
    float4 *out;
    // p2p and m2p interaction counts.
    uint2 *counts;
};

struct RUST_TWIN UnsortArgs {
    // The results in walk order.
    Results walk;
    // Per target: its particle.
    const unsigned *order;
    // Targets (and particles).
    int n;
    // The results in the particles' order.
    Results input;
};

extern "C" __global__ void __launch_bounds__(256) unsort_results(const UnsortArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x) {
        const unsigned i = a.order[k];
        if (a.walk.out) a.input.out[i] = a.walk.out[k];
        if (a.walk.counts) a.input.counts[i] = a.walk.counts[k];
    }
}

struct RUST_TWIN ClearArgs {
    // Targets.
    int n;
    // Their results.
    Results results;
};

// Zero results for the n targets: those of groups a block step does not walk.
extern "C" __global__ void __launch_bounds__(256) clear_results(const ClearArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x) {
        a.results.out[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        a.results.counts[k] = make_uint2(0u, 0u);
    }
}

struct RUST_TWIN MaskArgs {
    // Particles.
    int n;
    // Per particle: 1 when active (one byte).
    const unsigned char *active;
    // Their results.
    Results results;
};

// Block steps: zero results for the n particles not flagged in `active` (one byte each, the
// results in the particles' order), whose groups may have walked for an active neighbour.
extern "C" __global__ void __launch_bounds__(256) mask_inactive(const MaskArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        if (!a.active[i]) {
            a.results.out[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            a.results.counts[i] = make_uint2(0u, 0u);
        }
    }
}

struct RUST_TWIN AddArgs {
    // The groups walked: first target, targets.
    const uint2 *groups;
    // Groups.
    int n_groups;
    // Results added (the forest's, walked alongside the local tree's).
    Results from;
    // Results they are added to (the local tree's), in the same walk order.
    Results to;
};

// The forest's results added to the local walk's for the targets of the groups walked (a warp
// a group): to + from, as a forest walked after the local tree adds its sums (`store_result`
// in gravity.cuh), so the same bits.
extern "C" __global__ void __launch_bounds__(256) add_results(const AddArgs a)
{
    const unsigned lane = threadIdx.x & 31u;
    const int warps = (gridDim.x * blockDim.x) >> 5;
    for (int g = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < a.n_groups; g += warps) {
        const uint2 r = a.groups[g];
        for (unsigned k = r.x + lane; k < r.x + r.y; k += 32u) {
            const float4 o = a.to.out[k], f = a.from.out[k];
            a.to.out[k] = make_float4(o.x + f.x, o.y + f.y, o.z + f.z, o.w + f.w);
            const uint2 c = a.to.counts[k], d = a.from.counts[k];
            a.to.counts[k] = make_uint2(c.x + d.x, c.y + d.y);
        }
    }
}
