// Domain decomposition on the device (src/domain/gpu.rs): the Peano-Hilbert keys of a rank's
// particles in the global cube, a strided sample of them (with each particle's cost) for the
// splitters the host computes, each particle's owner under those splitters, and the particles
// that stay compacted into fresh arrays while the leaving ones are listed for packing.
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, u64, grid_cell,
// hilbert_key), IEEE arithmetic, so that keys and owners equal src/domain's bit for bit.

struct RUST_TWIN DomainKeysArgs {
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Particles.
    int n;
    // The cube's lower corner, x (length units).
    double ox;
    // The cube's lower corner, y (length units).
    double oy;
    // The cube's lower corner, z (length units).
    double oz;
    // 2^21 / the cube's side (grid cells per length unit).
    double scale;
    // Per particle: its key.
    u64 *keys;
};

// Peano-Hilbert key of every particle's float64 position in the cube with lower corner o and
// `scale` = 2^21 / side (src/sfc `keys`).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) domain_keys(const DomainKeysArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        unsigned c[3];
        const double *x = a.pos + 3ll * i;
        grid_cell(x[0], x[1], x[2], a.ox, a.oy, a.oz, a.scale, c);
        a.keys[i] = hilbert_key(c);
    }
}

struct RUST_TWIN DomainSamplesArgs {
    // Per particle: its key (domain_keys).
    const u64 *keys;
    // For use_cost 1: per particle, its p2p and m2p counts of the last evaluation (p2p with the
    // particle itself); else unread.
    const uint2 *counts;
    // For use_cost 2: per particle, its cost; else unread.
    const double *values;
    // What a weight is: 1 the interaction counts, 2 the costs, else 1.
    int use_cost;
    // Particles.
    int n;
    // Samples.
    int m;
    // Per sample: its key.
    u64 *sample_keys;
    // Per sample: its weight.
    double *weights;
};

// Sample j < m of the n particles: particle j n / m's key and weight (src/domain/splitters.rs
// `sample_keys`): by `use_cost` 1 its cost in the last force evaluation from its interaction
// counts, (p2p - 1) + m2p (the target itself taken off), by 2 its cost from `values`, else 1.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_samples(const DomainSamplesArgs a)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.m; j += gridDim.x * blockDim.x) {
        const long long i = (long long)((u64)j * (u64)a.n / (u64)a.m);
        a.sample_keys[j] = a.keys[i];
        if (a.use_cost == 1) {
            const uint2 c = a.counts[i];
            a.weights[j] = (double)((c.x > 0u ? c.x - 1u : 0u) + c.y);
        } else if (a.use_cost == 2) {
            a.weights[j] = a.values[i];
        } else {
            a.weights[j] = 1.0;
        }
    }
}

struct RUST_TWIN DomainOwnersArgs {
    // Per particle: its key (domain_keys).
    const u64 *keys;
    // Particles.
    int n;
    // The splitters, ascending (nsplit keys).
    const u64 *splitters;
    // Splitters.
    int nsplit;
    // This rank.
    int me;
    // Per particle: its owner.
    unsigned *dest;
    // Per particle and one more: 1 when it leaves (0 for the last).
    unsigned *leave;
};

// The rank owning each particle, the number of splitters not above its key (src/domain
// `owner`), and leave[i] = 1 when that is not rank `me`; leave[n] = 0 for the scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) domain_owners(const DomainOwnersArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= a.n; i += gridDim.x * blockDim.x) {
        if (i == a.n) {
            a.leave[a.n] = 0;
            continue;
        }
        const u64 key = a.keys[i];
        int lo = 0, hi = a.nsplit;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (a.splitters[mid] <= key) lo = mid + 1;
            else hi = mid;
        }
        a.dest[i] = (unsigned)lo;
        a.leave[i] = lo != a.me;
    }
}

struct RUST_TWIN DomainLeavingArgs {
    // Particles.
    int n;
    // Per particle: its owner (domain_owners).
    const unsigned *dest;
    // Per particle and one more: the leaving particles before it (the scan of leave).
    const unsigned *before;
    // Per leaving particle: its index.
    unsigned *leaving;
    // Per leaving particle: its owner.
    unsigned *leaving_dest;
};

// After the exclusive scan `before` of leave (the leaving particles before each one): each
// leaving particle i is listed at before[i], in order, with its owner.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_leaving(const DomainLeavingArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const unsigned b = a.before[i];
        if (a.before[i + 1] > b) {
            a.leaving[b] = (unsigned)i;
            a.leaving_dest[b] = a.dest[i];
        }
    }
}

struct RUST_TWIN DomainKeepArgs {
    // Particles.
    int n;
    // 1: the particles have an integrator state (bin, acc, pot, cost), copied too.
    int with_state;
    // Per particle and one more: the leaving particles before it (the scan of leave).
    const unsigned *before;
    // The particles.
    ParticleSet from;
    // The fresh arrays, which the staying particles fill from the start.
    ParticleSet to;
};

// Each staying particle i copied to slot i - before[i] of the fresh arrays, in order (with its
// integrator state when with_state).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) domain_keep(const DomainKeepArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const unsigned b = a.before[i];
        if (a.before[i + 1] > b) continue;
        const long long k = (long long)i - b;
        const ParticleSet &from = a.from, &to = a.to;
        for (int d = 0; d < 3; d++) {
            to.pos[3 * k + d] = from.pos[3ll * i + d];
            to.vel[3 * k + d] = from.vel[3ll * i + d];
        }
        to.mass[k] = from.mass[i];
        to.id[k] = from.id[i];
        if (a.with_state) {
            to.bin[k] = from.bin[i];
            for (int d = 0; d < 3; d++) to.acc[3 * k + d] = from.acc[3ll * i + d];
            to.pot[k] = from.pot[i];
            to.cost[k] = from.cost[i];
        }
    }
}
