// A rank's particles on the device (src/particles_gpu.rs): positions and velocities as three
// doubles each, masses (double) and ids (u64), and in a run the integrator's state, kept there
// for the whole run. These kernels reduce their bounds and move the particles that leave or
// arrive in a domain decomposition (src/domain/gpu.rs).
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, u64), IEEE arithmetic.

#define DOUBLE_INF __longlong_as_double(0x7ff0000000000000ll)

// Per-block bounds of the positions: partial[6 b + k] is the smallest coordinate k (k < 3) or
// the largest coordinate k - 3 of the particles block b visits (grid-stride), +-inf for none.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    particle_bounds(const double *__restrict__ pos, int n, double *__restrict__ partial)
{
    __shared__ double box[6][BUILD_BLOCK];
    double b[6] = {DOUBLE_INF, DOUBLE_INF, DOUBLE_INF, -DOUBLE_INF, -DOUBLE_INF, -DOUBLE_INF};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        for (int k = 0; k < 3; k++) {
            const double x = pos[3ll * i + k];
            b[k] = fmin(b[k], x);
            b[3 + k] = fmax(b[3 + k], x);
        }
    }
    for (int k = 0; k < 6; k++) box[k][threadIdx.x] = b[k];
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            for (int k = 0; k < 3; k++) {
                box[k][threadIdx.x] = fmin(box[k][threadIdx.x], box[k][threadIdx.x + half]);
                box[3 + k][threadIdx.x] =
                    fmax(box[3 + k][threadIdx.x], box[3 + k][threadIdx.x + half]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 6) partial[6ll * blockIdx.x + threadIdx.x] = box[threadIdx.x][0];
}

// Doubles per record with the integrator's state too: its bin, acceleration, potential, cost.
#define STATE_RECORD_WORDS 14

// Packs particle order[j] of the arrays (pos, vel, mass, id, and when `words` is
// STATE_RECORD_WORDS the state bin, acc, pot, cost) into record j of `records` (`words`
// doubles: position, velocity, mass, the id's bits, then bin, acceleration, potential, cost),
// for j < count.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    pack_particles(const unsigned *__restrict__ order, int count, int words,
                   const double *__restrict__ pos, const double *__restrict__ vel,
                   const double *__restrict__ mass, const u64 *__restrict__ id,
                   const unsigned char *__restrict__ bin, const double *__restrict__ acc,
                   const double *__restrict__ pot, const double *__restrict__ cost,
                   double *__restrict__ records)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
        const long long i = order[j];
        double *r = records + (long long)words * j;
        for (int k = 0; k < 3; k++) {
            r[k] = pos[3 * i + k];
            r[3 + k] = vel[3 * i + k];
        }
        r[6] = mass[i];
        r[7] = __longlong_as_double((long long)id[i]);
        if (words == STATE_RECORD_WORDS) {
            r[8] = (double)bin[i];
            for (int k = 0; k < 3; k++) r[9 + k] = acc[3 * i + k];
            r[12] = pot[i];
            r[13] = cost[i];
        }
    }
}

// Unpacks `count` records of `words` doubles into particles at + j of the arrays (pack_particles
// in reverse).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    unpack_particles(const double *__restrict__ records, int count, int words, int at,
                     double *__restrict__ pos, double *__restrict__ vel,
                     double *__restrict__ mass, u64 *__restrict__ id,
                     unsigned char *__restrict__ bin, double *__restrict__ acc,
                     double *__restrict__ pot, double *__restrict__ cost)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
        const long long i = (long long)at + j;
        const double *r = records + (long long)words * j;
        for (int k = 0; k < 3; k++) {
            pos[3 * i + k] = r[k];
            vel[3 * i + k] = r[3 + k];
        }
        mass[i] = r[6];
        id[i] = (u64)__double_as_longlong(r[7]);
        if (words == STATE_RECORD_WORDS) {
            bin[i] = (unsigned char)r[8];
            for (int k = 0; k < 3; k++) acc[3 * i + k] = r[9 + k];
            pot[i] = r[12];
            cost[i] = r[13];
        }
    }
}
