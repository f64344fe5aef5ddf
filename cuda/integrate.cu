// The time step on the device (src/integrate/state_gpu.rs): the integrator's state per particle
// (time-step bin, acceleration and potential of the last evaluation with G applied, its cost)
// kept beside the particles, the half kicks and drifts of the leapfrog, the walk's results
// taken into that state, the bins of block steps, and the sums of the conserved quantities.
// Every formula is src/integrate's, in the same float64 operations, so that the device steps
// the host's trajectory bit for bit from the same forces.
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, u64), IEEE arithmetic.

// Whether a particle of bin `b` ends its step at tick `ti` (ti is a multiple of its ticks,
// 2^(depth - b)).
__device__ __forceinline__ bool synchronised(unsigned char b, u64 ti, int depth)
{
    return (ti & ((1ull << (depth - b)) - 1ull)) == 0ull;
}

// The step of bin b (Timeline::dt).
__device__ __forceinline__ double bin_dt(double dt_top, int b)
{
    return dt_top / (double)(1ull << b);
}

struct RUST_TWIN SynchronisedFlagsArgs {
    // Particles.
    int n;
    // Per particle: time-step bin.
    const unsigned char *bin;
    // The tick (in ticks of the deepest bin).
    unsigned long long ti;
    // The deepest bin (the timeline's depth).
    int depth;
    // Per particle: 1 when it ends its step at ti.
    unsigned char *flag;
};

// One flag per particle: 1 when it ends its step at tick ti.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    synchronised_flags(const SynchronisedFlagsArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        a.flag[i] = synchronised(a.bin[i], a.ti, a.depth);
}

struct RUST_TWIN HalfKickArgs {
    // Particles.
    int n;
    // Per particle: time-step bin.
    const unsigned char *bin;
    // The tick (in ticks of the deepest bin).
    unsigned long long ti;
    // The deepest bin (the timeline's depth).
    int depth;
    // Per bin 0 ..= depth: the half kick's factor (dt_bin / 2 in time units for Newtonian
    // steps, the comoving kick factor of the half step otherwise).
    const double *kick;
    // Per particle: acceleration (3 doubles, G applied).
    const double *acc;
    // Per particle: velocity (3 doubles), kicked in place.
    double *vel;
};

// Half kick of the particles that end their step at tick ti: v <- v + a kick[bin]
// (IntegratorState::half_kick).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) half_kick(const HalfKickArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        if (!synchronised(a.bin[i], a.ti, a.depth)) continue;
        const double h = a.kick[a.bin[i]];
        for (int d = 0; d < 3; d++) a.vel[3ll * i + d] += a.acc[3ll * i + d] * h;
    }
}

struct RUST_TWIN DriftArgs {
    // Particles.
    int n;
    // The drift's time (time units), or the comoving drift factor.
    double dt;
    // Side of the periodic box (length units) the positions are wrapped into; 0: none.
    double period;
    // Per particle: velocity (3 doubles).
    const double *vel;
    // Per particle: position (3 doubles, length units), drifted in place.
    double *pos;
};

// Drift of every particle: x <- x + v dt (leapfrog::drift), then with a box of side L > 0
// x <- x - L floor(x / L), 0 where that rounds up to L (leapfrog::wrap).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) drift(const DriftArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        for (int d = 0; d < 3; d++) {
            double x = a.pos[3ll * i + d] + a.vel[3ll * i + d] * a.dt;
            if (a.period > 0.0) {
                x = x - a.period * floor(x / a.period);
                if (x >= a.period) x = 0.0;
            }
            a.pos[3ll * i + d] = x;
        }
}

struct RUST_TWIN AddBackgroundArgs {
    // Particles.
    int n;
    // Per particle: time-step bin.
    const unsigned char *bin;
    // The tick (in ticks of the deepest bin).
    unsigned long long ti;
    // The deepest bin (the timeline's depth).
    int depth;
    // The coefficient c (time^-2): 1/2 Omega_m H0^2 of a comoving run with vacuum boundaries.
    double c;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Per particle: acceleration (3 doubles, G applied), added to in place.
    double *acc;
};

// a <- a + c x for the particles that end their step at tick ti: the background term of a
// comoving run with vacuum boundaries (IntegratorState::add_background).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) add_background(const AddBackgroundArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        if (!synchronised(a.bin[i], a.ti, a.depth)) continue;
        for (int d = 0; d < 3; d++) a.acc[3ll * i + d] += a.pos[3ll * i + d] * a.c;
    }
}

struct RUST_TWIN KeepForcesArgs {
    // Particles.
    int n;
    // Per particle: the walk's acceleration (x, y, z) and potential, G = 1, in the frame.
    const float4 *out;
    // Per particle: the walk's p2p (with the particle itself) and m2p counts.
    const uint2 *counts;
    // Acceleration unit: G / L^2 for the frame of a cube of side L.
    double acc_unit;
    // Potential unit: G / L.
    double pot_unit;
    // For has_active: per particle, 1 when its results are taken; else unread.
    const unsigned char *active;
    // 1: only the particles flagged in active; 0: all.
    int has_active;
    // Per particle: acceleration (3 doubles).
    double *acc;
    // Per particle: potential.
    double *pot;
    // Per particle: cost (interactions).
    double *cost;
};

// The walk's results (acceleration and potential with G = 1, interaction counts with the
// particle itself, in the particles' order) taken into the state, as the host converts them
// (WalkOutput::scaled, others): acceleration times acc_unit, potential times pot_unit (G / L^2,
// G / L for the frame of a cube of side L), the cost p2p - 1 + m2p.
// Only the particles flagged in `active` when has_active.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) keep_forces(const KeepForcesArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        if (a.has_active && !a.active[i]) continue;
        const float4 f = a.out[i];
        a.acc[3ll * i] = (double)f.x * a.acc_unit;
        a.acc[3ll * i + 1] = (double)f.y * a.acc_unit;
        a.acc[3ll * i + 2] = (double)f.z * a.acc_unit;
        a.pot[i] = (double)f.w * a.pot_unit;
        const uint2 c = a.counts[i];
        a.cost[i] = (double)((c.x > 0u ? c.x - 1u : 0u) + c.y);
    }
}

struct RUST_TWIN AccMagnitudesArgs {
    // Particles.
    int n;
    // Per particle: acceleration (3 doubles, G applied).
    const double *acc;
    // The factor taking |a| into the frame (L^2 for a cube of side L).
    double scale;
    // Per particle: |a| times scale, float32.
    float *amag;
};

// Each particle's |a| of the state times `scale` (L^2: in the frame of a cube of side L) in
// float32: the acceleration criterion's previous |a|.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) acc_magnitudes(const AccMagnitudesArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const double *g = a.acc + 3ll * i;
        a.amag[i] = (float)(sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]) * a.scale);
    }
}

struct RUST_TWIN AssignBinsArgs {
    // Particles.
    int n;
    // The tick (in ticks of the deepest bin).
    unsigned long long ti;
    // The deepest bin (the timeline's depth).
    int depth;
    // The step of bin 0 (time units).
    double dt_top;
    // The time-step parameter eta.
    double eta;
    // The softening length eps (length units).
    double eps;
    // Per particle: acceleration (3 doubles, G applied).
    const double *acc;
    // Per particle: time-step bin, reassigned in place where due.
    unsigned char *bin;
};

// New bins of the particles that end their step at tick ti (IntegratorState::assign_bins): the
// bin of dt = eta sqrt(eps / |a|) (Timeline::bin_for), moved to a larger step only where ti lies
// on that step's boundary (Timeline::allowed_bin).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) assign_bins(const AssignBinsArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const unsigned char old = a.bin[i];
        if (!synchronised(old, a.ti, a.depth)) continue;
        const double *g = a.acc + 3ll * i;
        const double dt = a.eta * sqrt(a.eps / sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]));
        int want = a.depth;
        for (int k = 0; k < a.depth; k++) {
            if (bin_dt(a.dt_top, k) <= dt) {
                want = k;
                break;
            }
        }
        int b = want;
        if (want < old) {
            b = old;
            for (int k = want; k < old; k++) {
                if (synchronised((unsigned char)k, a.ti, a.depth)) {
                    b = k;
                    break;
                }
            }
        }
        a.bin[i] = (unsigned char)b;
    }
}

struct RUST_TWIN BinSummaryArgs {
    // Particles.
    int n;
    // Per particle: time-step bin.
    const unsigned char *bin;
    // The tick (in ticks of the deepest bin).
    unsigned long long ti;
    // The deepest bin (the timeline's depth).
    int depth;
    // Per particle: cost (interactions of its last evaluation, a whole number).
    const double *cost;
    // Per block: lowest bin, highest bin, particles due, and the low and high words of the
    // summed cost (5 words).
    unsigned *partial;
};

// Per block: the lowest and the highest bin, the particles that end their step at tick ti,
// and the sum of the costs (whole numbers, summed as integers: the same in any order), of the
// particles it visits (grid-stride): partial[5 b .. 5 b + 4].
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) bin_summary(const BinSummaryArgs a)
{
    __shared__ unsigned lo[BUILD_BLOCK], hi[BUILD_BLOCK], due[BUILD_BLOCK];
    __shared__ unsigned long long work[BUILD_BLOCK];
    unsigned l = 255u, h = 0u, k = 0u;
    unsigned long long w = 0ull;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const unsigned b = a.bin[i];
        l = min(l, b);
        h = max(h, b);
        k += synchronised((unsigned char)b, a.ti, a.depth);
        w += (unsigned long long)a.cost[i];
    }
    lo[threadIdx.x] = l;
    hi[threadIdx.x] = h;
    due[threadIdx.x] = k;
    work[threadIdx.x] = w;
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + half]);
            hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + half]);
            due[threadIdx.x] += due[threadIdx.x + half];
            work[threadIdx.x] += work[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        a.partial[5 * blockIdx.x] = lo[0];
        a.partial[5 * blockIdx.x + 1] = hi[0];
        a.partial[5 * blockIdx.x + 2] = due[0];
        a.partial[5 * blockIdx.x + 3] = (unsigned)(work[0] & 0xffffffffull);
        a.partial[5 * blockIdx.x + 4] = (unsigned)(work[0] >> 32);
    }
}

struct RUST_TWIN ConservedSumsArgs {
    // Particles.
    int n;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Per particle: velocity (3 doubles).
    const double *vel;
    // Per particle: mass.
    const double *mass;
    // Per particle: potential (G applied).
    const double *pot;
    // Per chunk: its 8 sums.
    double *partial;
};

// The conserved quantities' sums (Conserved::sums: kinetic, potential, momentum, angular
// momentum) over chunk b of CONSERVED_CHUNK particles, one block per chunk: each thread sums
// its strided share in order, then the block adds the threads' sums in a fixed tree, so the
// result does not depend on anything but the particles. partial[8 b + k].
#define CONSERVED_CHUNK 16384
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) conserved_sums(const ConservedSumsArgs a)
{
    __shared__ double sums[8][BUILD_BLOCK];
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const long long first = (long long)blockIdx.x * CONSERVED_CHUNK;
    const long long end = min(first + CONSERVED_CHUNK, (long long)a.n);
    for (long long i = first + threadIdx.x; i < end; i += blockDim.x) {
        const double *x = a.pos + 3 * i, *v = a.vel + 3 * i;
        const double m = a.mass[i];
        s[0] += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        s[1] += 0.5 * m * a.pot[i];
        for (int d = 0; d < 3; d++) s[2 + d] += m * v[d];
        s[5] += m * (x[1] * v[2] - x[2] * v[1]);
        s[6] += m * (x[2] * v[0] - x[0] * v[2]);
        s[7] += m * (x[0] * v[1] - x[1] * v[0]);
    }
    for (int k = 0; k < 8; k++) sums[k][threadIdx.x] = s[k];
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half)
            for (int k = 0; k < 8; k++) sums[k][threadIdx.x] += sums[k][threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x < 8) a.partial[8ll * blockIdx.x + threadIdx.x] = sums[threadIdx.x][0];
}

struct RUST_TWIN FirstNonFiniteArgs {
    // Particles.
    int n;
    // Per particle: acceleration (3 doubles).
    const double *acc;
    // Per particle: potential.
    const double *pot;
    // One word: the lowest bad index (0xffffffff before).
    unsigned *first;
};

// The first particle whose state holds a non-finite acceleration or potential: *first (set to
// 0xffffffff before) becomes the lowest such index.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    first_non_finite(const FirstNonFiniteArgs a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const double *g = a.acc + 3ll * i;
        const double v[4] = {g[0], g[1], g[2], a.pot[i]};
        bool bad = false;
        for (int k = 0; k < 4; k++)
            bad = bad || ((__double_as_longlong(v[k]) >> 52) & 0x7ff) == 0x7ff;
        if (bad) atomicMin(a.first, (unsigned)i);
    }
}

struct RUST_TWIN ParticleRecordArgs {
    // The particle.
    int i;
    // Per particle: id.
    const u64 *id;
    // Per particle: position (3 doubles).
    const double *pos;
    // Per particle: acceleration (3 doubles).
    const double *acc;
    // Per particle: potential.
    const double *pot;
    // Its record: id bits, position, acceleration, potential (8 doubles).
    double *out;
};

// Particle i's id (its bits), position, acceleration and potential into out[0..8].
extern "C" __global__ void particle_record(const ParticleRecordArgs a)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.out[0] = __longlong_as_double((long long)a.id[a.i]);
        for (int d = 0; d < 3; d++) {
            a.out[1 + d] = a.pos[3ll * a.i + d];
            a.out[4 + d] = a.acc[3ll * a.i + d];
        }
        a.out[7] = a.pot[a.i];
    }
}
