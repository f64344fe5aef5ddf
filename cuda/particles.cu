// A rank's particles on the device (src/particles_gpu.rs): positions and velocities as three
// doubles each, masses (double) and ids (u64), and in a run the integrator's state, kept there
// for the whole run. These kernels reduce their bounds and move the particles that leave or
// arrive in a domain decomposition (src/domain/gpu.rs).
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, u64), IEEE arithmetic.

#define DOUBLE_INF __longlong_as_double(0x7ff0000000000000ll)

struct RUST_TWIN ParticleBoundsArgs {
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // Particles.
    int n;
    // Per block: 6 doubles, the lowest corner, then the highest (length units).
    double *partial;
};

// Per-block bounds of the positions: partial[6 b + k] is the smallest coordinate k (k < 3) or
// the largest coordinate k - 3 of the particles block b visits (grid-stride), +-inf for none.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    particle_bounds(const ParticleBoundsArgs a)
{
    __shared__ double box[6][BUILD_BLOCK];
    double b[6] = {DOUBLE_INF, DOUBLE_INF, DOUBLE_INF, -DOUBLE_INF, -DOUBLE_INF, -DOUBLE_INF};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        for (int k = 0; k < 3; k++) {
            const double x = a.pos[3ll * i + k];
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
    if (threadIdx.x < 6) a.partial[6ll * blockIdx.x + threadIdx.x] = box[threadIdx.x][0];
}

// Doubles per record with the integrator's state too: its bin, acceleration, potential, cost.
#define STATE_RECORD_WORDS 14

// A rank's particle arrays on the device (src/particles_gpu.rs `ParticleArrays`): those of the
// integrator's state are only read or written with STATE_RECORD_WORDS.
struct RUST_TWIN ParticleSet {
    // Per particle: position (3 doubles, length units).
    double *pos;
    // Per particle: velocity (3 doubles, velocity units).
    double *vel;
    // Per particle: mass (mass units).
    double *mass;
    // Per particle: id.
    u64 *id;
    // Per particle: time-step bin (one byte).
    unsigned char *bin;
    // Per particle: acceleration of the last evaluation (3 doubles, G applied).
    double *acc;
    // Per particle: potential of the last evaluation (G applied).
    double *pot;
    // Per particle: interactions of the last evaluation (its cost).
    double *cost;
};

struct RUST_TWIN PackArgs {
    // Per record: the particle of the arrays it takes.
    const unsigned *order;
    // Records.
    int count;
    // Doubles per record: 8, or STATE_RECORD_WORDS with the integrator's state.
    int words;
    // The particles (read).
    ParticleSet from;
    // The records (`words` doubles each).
    double *records;
};

// Packs particle order[j] of the arrays (pos, vel, mass, id, and when `words` is
// STATE_RECORD_WORDS the state bin, acc, pot, cost) into record j of `records` (`words`
// doubles: position, velocity, mass, the id's bits, then bin, acceleration, potential, cost),
// for j < count.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) pack_particles(const PackArgs a)
{
    const ParticleSet &p = a.from;
    const int words = a.words;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.count; j += gridDim.x * blockDim.x) {
        const long long i = a.order[j];
        double *r = a.records + (long long)words * j;
        for (int k = 0; k < 3; k++) {
            r[k] = p.pos[3 * i + k];
            r[3 + k] = p.vel[3 * i + k];
        }
        r[6] = p.mass[i];
        r[7] = __longlong_as_double((long long)p.id[i]);
        if (words == STATE_RECORD_WORDS) {
            r[8] = (double)p.bin[i];
            for (int k = 0; k < 3; k++) r[9 + k] = p.acc[3 * i + k];
            r[12] = p.pot[i];
            r[13] = p.cost[i];
        }
    }
}

struct RUST_TWIN UnpackArgs {
    // The records (`words` doubles each).
    const double *records;
    // Records.
    int count;
    // Doubles per record: 8, or STATE_RECORD_WORDS with the integrator's state.
    int words;
    // The particle of the arrays the first record becomes.
    int at;
    // The particles (written).
    ParticleSet to;
};

// Unpacks `count` records of `words` doubles into particles at + j of the arrays (pack_particles
// in reverse).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) unpack_particles(const UnpackArgs a)
{
    const ParticleSet &p = a.to;
    const int words = a.words;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.count; j += gridDim.x * blockDim.x) {
        const long long i = (long long)a.at + j;
        const double *r = a.records + (long long)words * j;
        for (int k = 0; k < 3; k++) {
            p.pos[3 * i + k] = r[k];
            p.vel[3 * i + k] = r[3 + k];
        }
        p.mass[i] = r[6];
        p.id[i] = (u64)__double_as_longlong(r[7]);
        if (words == STATE_RECORD_WORDS) {
            p.bin[i] = (unsigned char)r[8];
            for (int k = 0; k < 3; k++) p.acc[3 * i + k] = r[9 + k];
            p.pot[i] = r[12];
            p.cost[i] = r[13];
        }
    }
}
