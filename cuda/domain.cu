// Domain decomposition on the device (src/domain/gpu.rs): the Peano-Hilbert keys of a rank's
// particles in the global cube, a strided sample of them (with each particle's cost) for the
// splitters the host computes, each particle's owner under those splitters, and the particles
// that stay compacted into fresh arrays while the leaving ones are listed for packing.
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, u64, grid_cell,
// hilbert_key), IEEE arithmetic, so that keys and owners equal src/domain's bit for bit.

// Peano-Hilbert key of every particle's float64 position in the cube with lower corner o and
// `scale` = 2^21 / side (src/sfc `keys`).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_keys(const double *__restrict__ pos, int n, double ox, double oy, double oz,
                double scale, u64 *__restrict__ keys)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned c[3];
        grid_cell(pos[3ll * i], pos[3ll * i + 1], pos[3ll * i + 2], ox, oy, oz, scale, c);
        keys[i] = hilbert_key(c);
    }
}

// Sample j < m of the n particles: particle j n / m's key and weight (src/domain/splitters.rs
// `sample_keys`): by `use_cost` 1 its cost in the last force evaluation from its interaction
// counts, (p2p - 1) + m2p (the target itself taken off), by 2 its cost from `values`, else 1.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_samples(const u64 *__restrict__ keys, const uint2 *__restrict__ counts,
                   const double *__restrict__ values, int use_cost, int n, int m,
                   u64 *__restrict__ sample_keys, double *__restrict__ weights)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
        const long long i = (long long)((u64)j * (u64)n / (u64)m);
        sample_keys[j] = keys[i];
        if (use_cost == 1) {
            const uint2 c = counts[i];
            weights[j] = (double)((c.x > 0u ? c.x - 1u : 0u) + c.y);
        } else if (use_cost == 2) {
            weights[j] = values[i];
        } else {
            weights[j] = 1.0;
        }
    }
}

// The rank owning each particle, the number of splitters not above its key (src/domain
// `owner`), and leave[i] = 1 when that is not rank `me`; leave[n] = 0 for the scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_owners(const u64 *__restrict__ keys, int n, const u64 *__restrict__ splitters,
                  int nsplit, int me, unsigned *__restrict__ dest, unsigned *__restrict__ leave)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x) {
        if (i == n) {
            leave[n] = 0;
            continue;
        }
        const u64 key = keys[i];
        int lo = 0, hi = nsplit;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (splitters[mid] <= key) lo = mid + 1;
            else hi = mid;
        }
        dest[i] = (unsigned)lo;
        leave[i] = lo != me;
    }
}

// After the exclusive scan `before` of leave (the leaving particles before each one): each
// leaving particle i is listed at before[i], in order, with its owner.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_leaving(int n, const unsigned *__restrict__ dest, const unsigned *__restrict__ before,
                   unsigned *__restrict__ leaving, unsigned *__restrict__ leaving_dest)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned b = before[i];
        if (before[i + 1] > b) {
            leaving[b] = (unsigned)i;
            leaving_dest[b] = dest[i];
        }
    }
}

// Each staying particle i copied to slot i - before[i] of the fresh arrays, in order (with its
// integrator state when with_state).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    domain_keep(int n, const unsigned *__restrict__ before, int with_state,
                const double *__restrict__ pos, const double *__restrict__ vel,
                const double *__restrict__ mass, const u64 *__restrict__ id,
                const unsigned char *__restrict__ bin, const double *__restrict__ acc,
                const double *__restrict__ pot, const double *__restrict__ cost,
                double *__restrict__ kept_pos, double *__restrict__ kept_vel,
                double *__restrict__ kept_mass, u64 *__restrict__ kept_id,
                unsigned char *__restrict__ kept_bin, double *__restrict__ kept_acc,
                double *__restrict__ kept_pot, double *__restrict__ kept_cost)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned b = before[i];
        if (before[i + 1] > b) continue;
        const long long k = (long long)i - b;
        for (int d = 0; d < 3; d++) {
            kept_pos[3 * k + d] = pos[3ll * i + d];
            kept_vel[3 * k + d] = vel[3ll * i + d];
        }
        kept_mass[k] = mass[i];
        kept_id[k] = id[i];
        if (with_state) {
            kept_bin[k] = bin[i];
            for (int d = 0; d < 3; d++) kept_acc[3 * k + d] = acc[3ll * i + d];
            kept_pot[k] = pot[i];
            kept_cost[k] = cost[i];
        }
    }
}
