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

// One flag per particle: 1 when it ends its step at tick ti.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    synchronised_flags(int n, const unsigned char *__restrict__ bin, u64 ti, int depth,
                       unsigned char *__restrict__ flag)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        flag[i] = synchronised(bin[i], ti, depth);
}

// Half kick of the particles that end their step at tick ti: v <- v + a dt_bin / 2
// (IntegratorState::half_kick).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    half_kick(int n, const unsigned char *__restrict__ bin, u64 ti, int depth, double dt_top,
              const double *__restrict__ acc, double *__restrict__ vel)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (!synchronised(bin[i], ti, depth)) continue;
        const double h = 0.5 * bin_dt(dt_top, bin[i]);
        for (int d = 0; d < 3; d++) vel[3ll * i + d] += acc[3ll * i + d] * h;
    }
}

// Drift of every particle: x <- x + v dt (leapfrog::drift).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    drift(int n, double dt, const double *__restrict__ vel, double *__restrict__ pos)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        for (int d = 0; d < 3; d++) pos[3ll * i + d] += vel[3ll * i + d] * dt;
}

// The walk's results (acceleration and potential with G = 1, interaction counts with the
// particle itself, in the particles' order) taken into the state, as the host converts them
// (WalkOutput::scaled, others): acceleration times acc_unit, potential times pot_unit (G / L^2,
// G / L for the frame of a cube of side L), the cost p2p - 1 + m2p.
// Only the particles flagged in `active` when has_active.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    keep_forces(int n, const float4 *__restrict__ out, const uint2 *__restrict__ counts,
                double acc_unit, double pot_unit, const unsigned char *__restrict__ active,
                int has_active, double *__restrict__ acc, double *__restrict__ pot,
                double *__restrict__ cost)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (has_active && !active[i]) continue;
        const float4 f = out[i];
        acc[3ll * i] = (double)f.x * acc_unit;
        acc[3ll * i + 1] = (double)f.y * acc_unit;
        acc[3ll * i + 2] = (double)f.z * acc_unit;
        pot[i] = (double)f.w * pot_unit;
        const uint2 c = counts[i];
        cost[i] = (double)((c.x > 0u ? c.x - 1u : 0u) + c.y);
    }
}

// Each particle's |a| of the state times `scale` (L^2: in the frame of a cube of side L) in
// float32: the acceleration criterion's previous |a|.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    acc_magnitudes(int n, const double *__restrict__ acc, double scale, float *__restrict__ amag)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double *a = acc + 3ll * i;
        amag[i] = (float)(sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]) * scale);
    }
}

// New bins of the particles that end their step at tick ti (IntegratorState::assign_bins): the
// bin of dt = eta sqrt(eps / |a|) (Timeline::bin_for), moved to a larger step only where ti lies
// on that step's boundary (Timeline::allowed_bin).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    assign_bins(int n, u64 ti, int depth, double dt_top, double eta, double eps,
                const double *__restrict__ acc, unsigned char *__restrict__ bin)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned char old = bin[i];
        if (!synchronised(old, ti, depth)) continue;
        const double *a = acc + 3ll * i;
        const double dt = eta * sqrt(eps / sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]));
        int want = depth;
        for (int k = 0; k < depth; k++) {
            if (bin_dt(dt_top, k) <= dt) {
                want = k;
                break;
            }
        }
        int b = want;
        if (want < old) {
            b = old;
            for (int k = want; k < old; k++) {
                if (synchronised((unsigned char)k, ti, depth)) {
                    b = k;
                    break;
                }
            }
        }
        bin[i] = (unsigned char)b;
    }
}

// Per block: the lowest and the highest bin, and the particles that end their step at tick
// ti, of the particles it visits (grid-stride): partial[3 b .. 3 b + 2].
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    bin_summary(int n, const unsigned char *__restrict__ bin, u64 ti, int depth,
                unsigned *__restrict__ partial)
{
    __shared__ unsigned lo[BUILD_BLOCK], hi[BUILD_BLOCK], due[BUILD_BLOCK];
    unsigned l = 255u, h = 0u, k = 0u;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned b = bin[i];
        l = min(l, b);
        h = max(h, b);
        k += synchronised((unsigned char)b, ti, depth);
    }
    lo[threadIdx.x] = l;
    hi[threadIdx.x] = h;
    due[threadIdx.x] = k;
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + half]);
            hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + half]);
            due[threadIdx.x] += due[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[3 * blockIdx.x] = lo[0];
        partial[3 * blockIdx.x + 1] = hi[0];
        partial[3 * blockIdx.x + 2] = due[0];
    }
}

// The conserved quantities' sums (Conserved::sums: kinetic, potential, momentum, angular
// momentum) over chunk b of CONSERVED_CHUNK particles, one block per chunk: each thread sums
// its strided share in order, then the block adds the threads' sums in a fixed tree, so the
// result does not depend on anything but the particles. partial[8 b + k].
#define CONSERVED_CHUNK 16384
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    conserved_sums(int n, const double *__restrict__ pos, const double *__restrict__ vel,
                   const double *__restrict__ mass, const double *__restrict__ pot,
                   double *__restrict__ partial)
{
    __shared__ double sums[8][BUILD_BLOCK];
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const long long first = (long long)blockIdx.x * CONSERVED_CHUNK;
    const long long end = min(first + CONSERVED_CHUNK, (long long)n);
    for (long long i = first + threadIdx.x; i < end; i += blockDim.x) {
        const double *x = pos + 3 * i, *v = vel + 3 * i;
        const double m = mass[i];
        s[0] += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        s[1] += 0.5 * m * pot[i];
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
    if (threadIdx.x < 8) partial[8ll * blockIdx.x + threadIdx.x] = sums[threadIdx.x][0];
}

// The first particle whose state holds a non-finite acceleration or potential: *first (set to
// 0xffffffff before) becomes the lowest such index.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    first_non_finite(int n, const double *__restrict__ acc, const double *__restrict__ pot,
                     unsigned *__restrict__ first)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double *a = acc + 3ll * i;
        const double v[4] = {a[0], a[1], a[2], pot[i]};
        bool bad = false;
        for (int k = 0; k < 4; k++)
            bad = bad || ((__double_as_longlong(v[k]) >> 52) & 0x7ff) == 0x7ff;
        if (bad) atomicMin(first, (unsigned)i);
    }
}

// Particle i's id (its bits), position, acceleration and potential into out[0..8].
extern "C" __global__ void particle_record(int i, const u64 *__restrict__ id,
                                           const double *__restrict__ pos,
                                           const double *__restrict__ acc,
                                           const double *__restrict__ pot,
                                           double *__restrict__ out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = __longlong_as_double((long long)id[i]);
        for (int d = 0; d < 3; d++) {
            out[1 + d] = pos[3ll * i + d];
            out[4 + d] = acc[3ll * i + d];
        }
        out[7] = pot[i];
    }
}
