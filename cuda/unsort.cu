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
