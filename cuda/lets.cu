// Locally Essential Trees on the device (src/lets/export_gpu.rs), the same as the host's
// (src/lets): the region a rank publishes (tight boxes around its particles), the LET of the
// local tree for every other rank packed in the wire format (src/lets/wire.rs), and the forest of
// received LETs unpacked into the walk's arrays.
//
// The host's export walks the tree from the root: an accepted cell is sent as a multipole and
// its subtree skipped, an opened leaf is sent with its particles, an opened inner cell is sent
// and its children visited. Here every (destination, cell) pair takes its own decision with the
// same test (`accepts`, in IEEE arithmetic: the host's decisions bit for bit), a cell is sent
// when every ancestor was opened, and scans of the sent cells and particles give each record its
// place: the records come out in preorder, exactly as the host writes them.
//
// Part of the stage program: compiled after cuda/gravity.cuh (accepts) and cuda/build.cu
// (BUILD_BLOCK, NO_PARENT), IEEE arithmetic.

#include "gravity.cuh"

// Words of a LET cell record, of a particle, of a buffer's header (src/lets/wire.rs), and the
// fields of a record.
#define LET_CELL_WORDS 20
#define LET_PARTICLE_WORDS 4
#define LET_HEADER_WORDS 2
#define LET_FIRST 16
#define LET_COUNT 17
#define LET_SUBTREE 18
#define LET_TAG 19
// A cell's fate in one destination's LET.
#define LET_SKIPPED 0u   // (a destination without a region)
#define LET_ACCEPTED 1u  // sent as a multipole, its subtree left out
#define LET_LEAF 2u      // an opened leaf, sent with its particles
#define LET_OPENED 3u    // an opened inner cell, sent, its children decided in turn

// The region of a rank's particles: flag[c] = 1 for the largest cells of at most `cut`
// particles (or leaves), the cells whose boxes Region::of_tree takes; flag[ncells] = 0 for the
// scan that follows. Holding at most `cut` particles passes from a cell to its children, so
// those are the qualifying cells whose parent does not qualify.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    region_cells(int ncells, const unsigned *__restrict__ count,
                 const unsigned char *__restrict__ nchild, const unsigned *__restrict__ parent,
                 unsigned cut, unsigned *__restrict__ flag)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= ncells; c += gridDim.x * blockDim.x) {
        if (c == ncells) {
            flag[c] = 0;
            continue;
        }
        const bool mine = count[c] <= cut || nchild[c] == 0;
        const unsigned up = parent[c];
        flag[c] = mine && (up == NO_PARENT || count[up] > cut);
    }
}

// The region cells in preorder: list[slot[c]] = c for the cells flagged by region_cells, at the
// positions of the exclusive scan `slot` of the flags.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    region_list(int ncells, const unsigned *__restrict__ slot, unsigned *__restrict__ list)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncells; c += gridDim.x * blockDim.x)
        if (slot[c + 1] > slot[c]) list[slot[c]] = (unsigned)c;
}

// The particle bounding box (centre, half-extents: region.rs tight_box) of each region cell
// `list[b]`, one block b per box.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    region_boxes(const unsigned *__restrict__ list, const unsigned *__restrict__ first,
                 const unsigned *__restrict__ count, const float4 *__restrict__ particles,
                 float *__restrict__ boxes)
{
    __shared__ float box[6][BUILD_BLOCK];
    const unsigned cell = list[blockIdx.x];
    const float inf = __int_as_float(0x7f800000);
    float b[6] = {inf, inf, inf, -inf, -inf, -inf};
    for (unsigned j = first[cell] + threadIdx.x; j < first[cell] + count[cell]; j += blockDim.x) {
        const float4 p = particles[j];
        const float x[3] = {p.x, p.y, p.z};
        for (int k = 0; k < 3; k++) {
            b[k] = fminf(b[k], x[k]);
            b[3 + k] = fmaxf(b[3 + k], x[k]);
        }
    }
    for (int k = 0; k < 6; k++) box[k][threadIdx.x] = b[k];
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            for (int k = 0; k < 3; k++) {
                box[k][threadIdx.x] = fminf(box[k][threadIdx.x], box[k][threadIdx.x + half]);
                box[3 + k][threadIdx.x] =
                    fmaxf(box[3 + k][threadIdx.x], box[3 + k][threadIdx.x + half]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 3) {
        const float lo = box[threadIdx.x][0], hi = box[3 + threadIdx.x][0];
        boxes[6ll * blockIdx.x + threadIdx.x] = 0.5f * (lo + hi);
        boxes[6ll * blockIdx.x + 3 + threadIdx.x] = 0.5f * (hi - lo);
    }
}

// Per-block smallest previous |a| of the targets (their w): the region's amin.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    targets_amin(const float4 *__restrict__ targets, int n, float *__restrict__ partial)
{
    __shared__ float m[BUILD_BLOCK];
    float a = __int_as_float(0x7f800000);
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        a = fminf(a, targets[k].w);
    m[threadIdx.x] = a;
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) m[threadIdx.x] = fminf(m[threadIdx.x], m[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = m[0];
}

// The fate of every cell in every destination's LET: fate[d ncells + c]. Destination d's
// region is box_count[d] boxes (centre, half-extents: 6 floats each) from box box_start[d] of
// `boxes`, its bound (the box around them) at box_start[d] - 1, all padded already, and its
// smallest previous |a| amin[d]; a destination without boxes gets nothing.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    let_fates(int ncells, int ndest, const float4 *__restrict__ cell_box,
              const float4 *__restrict__ cell_com_mass, const float *__restrict__ cell_s_eff,
              const unsigned char *__restrict__ nchild, const unsigned *__restrict__ box_start,
              const unsigned *__restrict__ box_count, const float *__restrict__ amin,
              const float *__restrict__ boxes, int accel_mac, float alpha, float grav,
              unsigned char *__restrict__ fate)
{
    const long long total = (long long)ncells * ndest;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / ncells), c = (int)(j % ncells);
        const unsigned nb = box_count[d];
        if (nb == 0) {
            fate[j] = LET_SKIPPED;
            continue;
        }
        const float4 box = cell_box[c], cm = cell_com_mass[c];
        const float s = cell_s_eff[c];
        auto accepted = [&](unsigned b) {
            const float *r = boxes + 6ll * b;
            return accepts(box, cm, s, make_float3(r[0], r[1], r[2]),
                           make_float3(r[3], r[4], r[5]), accel_mac, alpha, grav, amin[d]);
        };
        // Accepted for the bound means accepted for every box inside it; otherwise every box
        // must accept (export.rs).
        bool all = accepted(box_start[d] - 1);
        if (!all) {
            all = true;
            for (unsigned b = box_start[d]; b < box_start[d] + nb && all; b++) all = accepted(b);
        }
        fate[j] = all ? LET_ACCEPTED : nchild[c] == 0 ? LET_LEAF : LET_OPENED;
    }
}

// Which cells each LET holds, and their particles: sent[d (ncells + 1) + c] = 1 when cell c goes
// to destination d (it has a fate and every ancestor was opened), particles[...] = its particle
// count when it is an opened leaf; the entry after each destination's cells is 0, and so is the
// very last one, for the scans that follow.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    let_sent(int ncells, int ndest, const unsigned *__restrict__ parent,
             const unsigned *__restrict__ count, const unsigned char *__restrict__ fate,
             unsigned *__restrict__ sent, unsigned *__restrict__ particles)
{
    const long long stride = (long long)ncells + 1, total = stride * ndest + 1;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / stride), c = (int)(j % stride);
        unsigned in = 0, np = 0;
        if (d < ndest && c < ncells) {
            const unsigned char *f = fate + (long long)d * ncells;
            in = f[c] != LET_SKIPPED;
            for (unsigned up = parent[c]; in && up != NO_PARENT; up = parent[up])
                in = f[up] == LET_OPENED;
            np = in && f[c] == LET_LEAF ? count[c] : 0u;
        }
        sent[j] = in;
        particles[j] = np;
    }
}

// The scans of sent cells and particles at each destination's first cell (and after the last
// destination): edges[2 d] and edges[2 d + 1], for d <= ndest.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    let_edges(int ncells, int ndest, const unsigned *__restrict__ sent,
              const unsigned *__restrict__ particles, unsigned *__restrict__ edges)
{
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d <= ndest; d += gridDim.x * blockDim.x) {
        const long long j = (long long)d * (ncells + 1);
        edges[2 * d] = sent[j];
        edges[2 * d + 1] = particles[j];
    }
}

// Writes each destination's LET into `out`: buffer d starts at word at[d] (header, then
// ncell[d] records, then its particles); cell c of it goes to record sent[d (ncells + 1) + c] -
// sent[d (ncells + 1)] and its particles (an opened leaf's) to the particle slots the scan
// `particles` gives, relative to the buffer's first. Destinations without cells get nothing.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    let_pack(int ncells, int ndest, const float4 *__restrict__ cell_box,
             const float4 *__restrict__ cell_com_mass, const float *__restrict__ cell_quad,
             const float *__restrict__ cell_trace, const float *__restrict__ cell_s_eff,
             const unsigned *__restrict__ cell_first, const unsigned *__restrict__ cell_count,
             const unsigned *__restrict__ cell_subtree, const unsigned char *__restrict__ nchild,
             const unsigned char *__restrict__ level, const float4 *__restrict__ sorted,
             const unsigned char *__restrict__ fate, const unsigned *__restrict__ sent,
             const unsigned *__restrict__ particles, const unsigned *__restrict__ at,
             const unsigned *__restrict__ ncell, float *__restrict__ out)
{
    const long long stride = (long long)ncells + 1, total = stride * ndest;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / stride), c = (int)(j % stride);
        if (ncell[d] == 0) continue;
        const long long base = (long long)d * stride;
        float *buf = out + at[d];
        const unsigned cells_before = sent[base], parts_before = particles[base];
        if (c == ncells) {
            buf[0] = __uint_as_float(ncell[d]);
            buf[1] = __uint_as_float(particles[base + ncells] - parts_before);
            continue;
        }
        if (sent[j + 1] == sent[j]) continue;
        const unsigned f = fate[(long long)d * ncells + c];
        const unsigned first = particles[j] - parts_before;
        float *r = buf + LET_HEADER_WORDS + (long long)LET_CELL_WORDS * (sent[j] - cells_before);
        const float4 box = cell_box[c], cm = cell_com_mass[c];
        const unsigned end = c + cell_subtree[c];
        unsigned count = 0, subtree = 1, kids = 0;
        if (f == LET_LEAF) {
            count = cell_count[c];
        } else if (f == LET_OPENED) {
            count = particles[base + end] - particles[j];
            subtree = sent[base + end] - sent[j];
            kids = nchild[c];
        }
        // An accepted cell becomes an always-accepted multipole (wire.rs make_terminal): a box
        // of zero size at its centre of mass and S_eff = -1.
        const bool accepted = f == LET_ACCEPTED;
        r[0] = accepted ? cm.x : box.x;
        r[1] = accepted ? cm.y : box.y;
        r[2] = accepted ? cm.z : box.z;
        r[3] = accepted ? 0.0f : box.w;
        r[4] = cm.x;
        r[5] = cm.y;
        r[6] = cm.z;
        r[7] = cm.w;
        for (int k = 0; k < 6; k++) r[8 + k] = cell_quad[6ll * c + k];
        r[14] = cell_trace[c];
        r[15] = accepted ? -1.0f : cell_s_eff[c];
        r[LET_FIRST] = __uint_as_float(first);
        r[LET_COUNT] = __uint_as_float(count);
        r[LET_SUBTREE] = __uint_as_float(subtree);
        r[LET_TAG] = __uint_as_float(kids | (unsigned)level[c] << 8);
        if (f == LET_LEAF) {
            float *p = buf + LET_HEADER_WORDS + (long long)LET_CELL_WORDS * ncell[d] +
                       (long long)LET_PARTICLE_WORDS * first;
            for (unsigned k = 0; k < count; k++) {
                const float4 q = sorted[cell_first[c] + k];
                p[4 * k] = q.x;
                p[4 * k + 1] = q.y;
                p[4 * k + 2] = q.z;
                p[4 * k + 3] = q.w;
            }
        }
    }
}

// Neither infinite nor NaN (exponent bits not all set).
__device__ __forceinline__ bool finite(float x)
{
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

// Unpacks one received LET (src/lets/wire.rs unpack_forest): its `ncells` records from word
// `cells_at` of `data` and its `nparts` particles after them, into the forest's arrays at cell
// `cell0` and particle `part0` (first shifted by part0), checking each record as the host does.
// bad[0] gets the smallest malformed cell, bad[1] the smallest particle that is not finite
// (both start at 0xffffffff).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    let_unpack(const float *__restrict__ data, unsigned cells_at, int ncells, int nparts,
               int cell0, int part0, float4 *__restrict__ box, float4 *__restrict__ com_mass,
               float *__restrict__ quad, float *__restrict__ trace, float *__restrict__ s_eff,
               unsigned *__restrict__ first, unsigned *__restrict__ count,
               unsigned *__restrict__ subtree, unsigned char *__restrict__ nchild,
               float4 *__restrict__ particles, unsigned *__restrict__ bad)
{
    const long long total = (long long)ncells + nparts;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        if (j >= ncells) {
            const long long k = j - ncells;
            const float *p = data + cells_at + (long long)LET_CELL_WORDS * ncells + 4 * k;
            if (!finite(p[0]) || !finite(p[1]) || !finite(p[2]) || !finite(p[3]))
                atomicMin(&bad[1], (unsigned)k);
            particles[part0 + k] = make_float4(p[0], p[1], p[2], p[3]);
            continue;
        }
        const int c = (int)j;
        const float *r = data + cells_at + (long long)LET_CELL_WORDS * c;
        const unsigned f = __float_as_uint(r[LET_FIRST]), n = __float_as_uint(r[LET_COUNT]);
        const unsigned s = __float_as_uint(r[LET_SUBTREE]), tag = __float_as_uint(r[LET_TAG]);
        bool ok = s != 0 && (unsigned long long)c + s <= (unsigned long long)ncells &&
                  (unsigned long long)f + n <= (unsigned long long)nparts;
        for (int k = 0; k < LET_FIRST && ok; k++) ok = finite(r[k]);
        if (!ok) atomicMin(&bad[0], (unsigned)c);
        const long long o = (long long)cell0 + c;
        box[o] = make_float4(r[0], r[1], r[2], r[3]);
        com_mass[o] = make_float4(r[4], r[5], r[6], r[7]);
        for (int k = 0; k < 6; k++) quad[6 * o + k] = r[8 + k];
        trace[o] = r[14];
        s_eff[o] = r[15];
        first[o] = (unsigned)part0 + f;
        count[o] = n;
        subtree[o] = s;
        nchild[o] = (unsigned char)(tag & 0xffu);
    }
}
