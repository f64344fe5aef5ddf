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
#define LET_CELL_WORDS 22
#define LET_PARTICLE_WORDS 4
#define LET_HEADER_WORDS 2
#define LET_FIRST 16
#define LET_COUNT 17
#define LET_SUBTREE 18
#define LET_TAG 19
#define LET_KEY 20
// The deepest tree level (src/tree/mod.rs MAX_LEVEL).
#define KEY_MAX_LEVEL 21

// The key cell of a cell of level `level` whose box at the rebuild is `built`, in the tree whose
// root's box at the rebuild is `root` (src/tree/key.rs key_cell, the same arithmetic): the
// locational code 1 << 3 level | Morton(ix, iy, iz).
__device__ __forceinline__ unsigned long long cell_key(float4 root, float4 built, unsigned level)
{
    level = level < KEY_MAX_LEVEL ? level : KEY_MAX_LEVEL;
    const double cells = (double)(1ull << level), side = 2.0 * (double)root.w;
    const double b[3] = {built.x, built.y, built.z}, r[3] = {root.x, root.y, root.z};
    unsigned long long code = 1ull << (3 * level);
    for (int k = 0; k < 3; k++) {
        const double lo = r[k] - (double)root.w;
        const double at = fmin(fmax(floor((b[k] - lo) / side * cells), 0.0), cells - 1.0);
        const unsigned long long i = (unsigned long long)at;
        for (unsigned j = 0; j < level; j++) code |= ((i >> j) & 1ull) << (3 * j + k);
    }
    return code;
}

// The level of key cell `key` (src/tree/key.rs key_level).
__device__ __forceinline__ unsigned key_level(unsigned long long key)
{
    return (63u - (unsigned)__clzll((long long)key)) / 3u;
}

// The box of key cell `key` in the tree whose root's box at the rebuild is `root`: its lower
// and upper corners (src/tree/key.rs key_box, the same arithmetic).
__device__ __forceinline__ void key_box(float4 root, unsigned long long key, double lo[3],
                                        double hi[3])
{
    const unsigned level = key_level(key);
    const double side = 2.0 * (double)root.w / (double)(1ull << level);
    const double r[3] = {root.x, root.y, root.z};
    for (int k = 0; k < 3; k++) {
        unsigned long long i = 0;
        for (unsigned b = 0; b < level; b++) i |= ((key >> (3 * b + k)) & 1ull) << b;
        const double c = r[k] - (double)root.w + ((double)i + 0.5) * side;
        lo[k] = c - 0.5 * side;
        hi[k] = c + 0.5 * side;
    }
}
// A cell's fate in one destination's LET.
#define LET_SKIPPED 0u   // (a destination without a region)
#define LET_ACCEPTED 1u  // sent as a multipole, its subtree left out
#define LET_LEAF 2u      // an opened leaf, sent with its particles
#define LET_OPENED 3u    // an opened inner cell, sent, its children decided in turn

struct RUST_TWIN RegionCellsArgs {
    // The rank's tree (count, nchild and parent are read).
    TreeArrays tree;
    // Its cells.
    int ncells;
    // The most particles of a region cell.
    unsigned cut;
    // Per cell and one more: 1 for a region cell, else 0.
    unsigned *flag;
};

// The region of a rank's particles: flag[c] = 1 for the largest cells of at most `cut`
// particles (or leaves), the cells whose boxes Region::of_tree takes; flag[ncells] = 0 for the
// scan that follows. Holding at most `cut` particles passes from a cell to its children, so
// those are the qualifying cells whose parent does not qualify.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) region_cells(const RegionCellsArgs a)
{
    const unsigned *count = a.tree.count;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= a.ncells;
         c += gridDim.x * blockDim.x) {
        if (c == a.ncells) {
            a.flag[c] = 0;
            continue;
        }
        const bool mine = count[c] <= a.cut || a.tree.nchild[c] == 0;
        const unsigned up = a.tree.parent[c];
        a.flag[c] = mine && (up == NO_PARENT || count[up] > a.cut);
    }
}

struct RUST_TWIN RegionListArgs {
    // The tree's cells.
    int ncells;
    // Per cell and one more: the exclusive scan of region_cells' flags.
    const unsigned *slot;
    // Per region cell: its index, in preorder.
    unsigned *list;
};

// The region cells in preorder: list[slot[c]] = c for the cells flagged by region_cells, at the
// positions of the exclusive scan `slot` of the flags.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) region_list(const RegionListArgs a)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.ncells; c += gridDim.x * blockDim.x)
        if (a.slot[c + 1] > a.slot[c]) a.list[a.slot[c]] = (unsigned)c;
}

struct RUST_TWIN RegionBoxesArgs {
    // The rank's tree (particles, first and count are read).
    TreeArrays tree;
    // Per region cell: its index (region_list).
    const unsigned *list;
    // Per region cell: its particles' box, centre (x, y, z) and half-extents (6 floats, frame
    // units).
    float *boxes;
};

// The particle bounding box (centre, half-extents: region.rs tight_box) of each region cell
// `list[b]`, one block b per box.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) region_boxes(const RegionBoxesArgs a)
{
    __shared__ float box[6][BUILD_BLOCK];
    const unsigned cell = a.list[blockIdx.x];
    const unsigned first = a.tree.first[cell], end = first + a.tree.count[cell];
    const float inf = __int_as_float(0x7f800000);
    float b[6] = {inf, inf, inf, -inf, -inf, -inf};
    for (unsigned j = first + threadIdx.x; j < end; j += blockDim.x) {
        const float4 p = a.tree.particles[j];
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
        a.boxes[6ll * blockIdx.x + threadIdx.x] = 0.5f * (lo + hi);
        a.boxes[6ll * blockIdx.x + 3 + threadIdx.x] = 0.5f * (hi - lo);
    }
}

struct RUST_TWIN TargetsAminArgs {
    // Per target: position (x, y, z, frame units) and previous |a| (w).
    const float4 *targets;
    // Targets.
    int n;
    // Per block: the smallest |a| of the targets it visits.
    float *partial;
};

// Per-block smallest previous |a| of the targets (their w): the region's amin.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) targets_amin(const TargetsAminArgs a)
{
    __shared__ float m[BUILD_BLOCK];
    float least = __int_as_float(0x7f800000);
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x)
        least = fminf(least, a.targets[k].w);
    m[threadIdx.x] = least;
    __syncthreads();
    for (unsigned half = BUILD_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) m[threadIdx.x] = fminf(m[threadIdx.x], m[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) a.partial[blockIdx.x] = m[0];
}

struct RUST_TWIN LetFatesArgs {
    // The exporting tree (boxes, com_mass, s_eff and nchild are read).
    TreeArrays tree;
    // Its cells.
    int ncells;
    // Destinations (ranks).
    int ndest;
    // Per destination: the first of its groups' boxes in dest_boxes (its bound is the one
    // before, its boxes follow its groups').
    const unsigned *box_start;
    // Per destination: its number of boxes (0: it gets nothing).
    const unsigned *box_count;
    // Boxes per group (src/lets/region.rs GROUP_BOXES; the last group holds the rest).
    unsigned group_boxes;
    // Per destination: the smallest previous |a| of its targets (frame units).
    const float *amin;
    // The destinations' boxes, padded: centre (x, y, z) and half-extents, 6 floats each (frame
    // units).
    const float *dest_boxes;
    // 1: the acceleration criterion; 0: S_eff.
    int accel_mac;
    // The acceleration criterion's alpha.
    float alpha;
    // The gravitational constant the acceleration criterion uses.
    float grav;
    // 1: the frame is a periodic box of side 1 (accepts_periodic, gravity.cuh); 0: open boundaries.
    int periodic;
    // Per destination and cell (d ncells + c): the cell's fate (LET_SKIPPED ... LET_OPENED).
    unsigned char *fate;
};

// The fate of every cell in every destination's LET: fate[d ncells + c]. Destination d's
// region is its bound (the box around all its boxes) at box start[d] - 1 of `dest_boxes`
// (centre, half-extents: 6 floats each), its groups' boxes from box_start[d] (each around
// group_boxes boxes in a row), then its box_count[d] boxes, all padded already, and its
// smallest previous |a| amin[d]; a destination without boxes gets nothing.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) let_fates(const LetFatesArgs a)
{
    const int ncells = a.ncells;
    const long long total = (long long)ncells * a.ndest;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / ncells), c = (int)(j % ncells);
        const unsigned nb = a.box_count[d];
        if (nb == 0) {
            a.fate[j] = LET_SKIPPED;
            continue;
        }
        const float4 box = a.tree.boxes[c], cm = a.tree.com_mass[c];
        const float s = a.tree.s_eff[c];
        auto accepted = [&](unsigned b) {
            const float *r = a.dest_boxes + 6ll * b;
            const float3 bc = make_float3(r[0], r[1], r[2]), bh = make_float3(r[3], r[4], r[5]);
            return a.periodic ? accepts_periodic(box, cm, s, bc, bh, a.accel_mac, a.alpha, a.grav,
                                                 a.amin[d])
                              : accepts(box, cm, s, bc, bh, a.accel_mac, a.alpha, a.grav,
                                        a.amin[d]);
        };
        // Accepted for a bound means accepted for every box inside it; otherwise every group
        // must accept, by its bound or by each of its boxes (export.rs).
        const unsigned start = a.box_start[d], g = a.group_boxes;
        const unsigned groups = (nb + g - 1) / g, boxes = start + groups;
        bool all = accepted(start - 1);
        if (!all) {
            all = true;
            for (unsigned k = 0; k < groups && all; k++) {
                if (accepted(start + k)) continue;
                const unsigned end = min(nb, g * (k + 1));
                for (unsigned b = g * k; b < end && all; b++) all = accepted(boxes + b);
            }
        }
        a.fate[j] = all ? LET_ACCEPTED : a.tree.nchild[c] == 0 ? LET_LEAF : LET_OPENED;
    }
}

struct RUST_TWIN LetSentArgs {
    // The exporting tree (parent and count are read).
    TreeArrays tree;
    // Its cells.
    int ncells;
    // Destinations.
    int ndest;
    // Per destination and cell: its fate (let_fates).
    const unsigned char *fate;
    // Per destination, cell and one more, and one more: 1 when the cell is sent.
    unsigned *sent;
    // Per destination, cell and one more, and one more: the particles sent with the cell.
    unsigned *particles;
};

// Which cells each LET holds, and their particles: sent[d (ncells + 1) + c] = 1 when cell c goes
// to destination d (it has a fate and every ancestor was opened), particles[...] = its particle
// count when it is an opened leaf; the entry after each destination's cells is 0, and so is the
// very last one, for the scans that follow.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) let_sent(const LetSentArgs a)
{
    const int ncells = a.ncells, ndest = a.ndest;
    const unsigned *parent = a.tree.parent;
    const long long stride = (long long)ncells + 1, total = stride * ndest + 1;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / stride), c = (int)(j % stride);
        unsigned in = 0, np = 0;
        if (d < ndest && c < ncells) {
            const unsigned char *f = a.fate + (long long)d * ncells;
            in = f[c] != LET_SKIPPED;
            for (unsigned up = parent[c]; in && up != NO_PARENT; up = parent[up])
                in = f[up] == LET_OPENED;
            np = in && f[c] == LET_LEAF ? a.tree.count[c] : 0u;
        }
        a.sent[j] = in;
        a.particles[j] = np;
    }
}

struct RUST_TWIN LetEdgesArgs {
    // The exporting tree's cells.
    int ncells;
    // Destinations.
    int ndest;
    // The exclusive scan of let_sent's sent.
    const unsigned *sent;
    // The exclusive scan of let_sent's particles.
    const unsigned *particles;
    // Per destination and one more: both scans at its first cell (2 words).
    unsigned *edges;
};

// The scans of sent cells and particles at each destination's first cell (and after the last
// destination): edges[2 d] and edges[2 d + 1], for d <= ndest.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) let_edges(const LetEdgesArgs a)
{
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d <= a.ndest;
         d += gridDim.x * blockDim.x) {
        const long long j = (long long)d * (a.ncells + 1);
        a.edges[2 * d] = a.sent[j];
        a.edges[2 * d + 1] = a.particles[j];
    }
}

struct RUST_TWIN LetPackArgs {
    // The exporting tree (all but its parent are read).
    TreeArrays tree;
    // Its cells' boxes at the rebuild, whence their key cells.
    const float4 *built;
    // Its cells.
    int ncells;
    // Destinations.
    int ndest;
    // Per destination and cell: its fate (let_fates).
    const unsigned char *fate;
    // The exclusive scan of let_sent's sent.
    const unsigned *sent;
    // The exclusive scan of let_sent's particles.
    const unsigned *particles;
    // Per destination: the first word of its buffer in out.
    const unsigned *at;
    // Per destination: its cells (0: no buffer).
    const unsigned *ncell;
    // The LETs in the wire format (src/lets/wire.rs), one buffer per destination with cells.
    float *out;
};

// Writes each destination's LET into `out`: buffer d starts at word at[d] (header, then
// ncell[d] records, then its particles); cell c of it goes to record sent[d (ncells + 1) + c] -
// sent[d (ncells + 1)] and its particles (an opened leaf's) to the particle slots the scan
// `particles` gives, relative to the buffer's first. Destinations without cells get nothing.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) let_pack(const LetPackArgs a)
{
    const int ncells = a.ncells;
    const TreeArrays t = a.tree;
    const unsigned *sent = a.sent, *particles = a.particles;
    const long long stride = (long long)ncells + 1, total = stride * a.ndest;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(j / stride), c = (int)(j % stride);
        const unsigned ncell = a.ncell[d];
        if (ncell == 0) continue;
        const long long base = (long long)d * stride;
        float *buf = a.out + a.at[d];
        const unsigned cells_before = sent[base], parts_before = particles[base];
        if (c == ncells) {
            buf[0] = __uint_as_float(ncell);
            buf[1] = __uint_as_float(particles[base + ncells] - parts_before);
            continue;
        }
        if (sent[j + 1] == sent[j]) continue;
        const unsigned f = a.fate[(long long)d * ncells + c];
        const unsigned first = particles[j] - parts_before;
        float *r = buf + LET_HEADER_WORDS + (long long)LET_CELL_WORDS * (sent[j] - cells_before);
        const float4 box = t.boxes[c], cm = t.com_mass[c];
        const unsigned end = c + t.subtree[c];
        unsigned count = 0, subtree = 1, kids = 0;
        if (f == LET_LEAF) {
            count = t.count[c];
        } else if (f == LET_OPENED) {
            count = particles[base + end] - particles[j];
            subtree = sent[base + end] - sent[j];
            kids = t.nchild[c];
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
        for (int k = 0; k < 6; k++) r[8 + k] = t.quad[6ll * c + k];
        r[14] = t.trace[c];
        r[15] = accepted ? -1.0f : t.s_eff[c];
        r[LET_FIRST] = __uint_as_float(first);
        r[LET_COUNT] = __uint_as_float(count);
        r[LET_SUBTREE] = __uint_as_float(subtree);
        r[LET_TAG] = __uint_as_float(kids | (unsigned)t.level[c] << 8);
        const unsigned long long key = cell_key(a.built[0], a.built[c], t.level[c]);
        r[LET_KEY] = __uint_as_float((unsigned)key);
        r[LET_KEY + 1] = __uint_as_float((unsigned)(key >> 32));
        if (f == LET_LEAF) {
            float *p = buf + LET_HEADER_WORDS + (long long)LET_CELL_WORDS * ncell +
                       (long long)LET_PARTICLE_WORDS * first;
            for (unsigned k = 0; k < count; k++) {
                const float4 q = t.particles[t.first[c] + k];
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

struct RUST_TWIN LetUnpackArgs {
    // The received LETs (wire format, words).
    const float *data;
    // The word of data where this LET's first cell record starts (after its header).
    unsigned cells_at;
    // Its cells.
    int ncells;
    // Its particles.
    int nparts;
    // The forest's cell where its cells go.
    int cell0;
    // The forest's particle where its particles go.
    int part0;
    // The forest, in the walk's tree arrays (written: particles, first, count, nchild,
    // subtree, boxes, com_mass, quad, trace, s_eff; level and parent are not).
    TreeArrays tree;
    // Per forest cell: its key cell (written where not null).
    unsigned long long *keys;
    // [0] the smallest malformed cell, [1] the smallest particle that is not finite, [2] 0
    // where the root does not span the cells (all 0xffffffff before).
    unsigned *bad;
};

// Unpacks one received LET (src/lets/wire.rs unpack_forest): its `ncells` records from word
// `cells_at` of `data` and its `nparts` particles after them, into the forest's arrays at cell
// `cell0` and particle `part0` (first shifted by part0), checking each record as the host does.
// bad[0] gets the smallest malformed cell, bad[1] the smallest particle that is not finite,
// bad[2] 0 where the root's subtree is not every cell (all start at 0xffffffff).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) let_unpack(const LetUnpackArgs a)
{
    const int ncells = a.ncells, nparts = a.nparts;
    const TreeArrays t = a.tree;
    const long long total = (long long)ncells + nparts;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < total;
         j += (long long)gridDim.x * blockDim.x) {
        if (j >= ncells) {
            const long long k = j - ncells;
            const float *p = a.data + a.cells_at + (long long)LET_CELL_WORDS * ncells + 4 * k;
            if (!finite(p[0]) || !finite(p[1]) || !finite(p[2]) || !finite(p[3]))
                atomicMin(&a.bad[1], (unsigned)k);
            t.particles[a.part0 + k] = make_float4(p[0], p[1], p[2], p[3]);
            continue;
        }
        const int c = (int)j;
        const float *r = a.data + a.cells_at + (long long)LET_CELL_WORDS * c;
        const unsigned f = __float_as_uint(r[LET_FIRST]), n = __float_as_uint(r[LET_COUNT]);
        const unsigned s = __float_as_uint(r[LET_SUBTREE]), tag = __float_as_uint(r[LET_TAG]);
        const unsigned long long key = (unsigned long long)__float_as_uint(r[LET_KEY]) |
                                       (unsigned long long)__float_as_uint(r[LET_KEY + 1]) << 32;
        bool ok = s != 0 && (unsigned long long)c + s <= (unsigned long long)ncells &&
                  (unsigned long long)f + n <= (unsigned long long)nparts && key != 0 &&
                  key_level(key) == tag >> 8;
        for (int k = 0; k < LET_FIRST && ok; k++) ok = finite(r[k]);
        if (!ok) atomicMin(&a.bad[0], (unsigned)c);
        if (c == 0 && s != (unsigned)ncells) atomicMin(&a.bad[2], 0u);
        const long long o = (long long)a.cell0 + c;
        t.boxes[o] = make_float4(r[0], r[1], r[2], r[3]);
        t.com_mass[o] = make_float4(r[4], r[5], r[6], r[7]);
        for (int k = 0; k < 6; k++) t.quad[6 * o + k] = r[8 + k];
        t.trace[o] = r[14];
        t.s_eff[o] = r[15];
        t.first[o] = (unsigned)a.part0 + f;
        t.count[o] = n;
        t.subtree[o] = s;
        t.nchild[o] = (unsigned char)(tag & 0xffu);
        if (a.keys) a.keys[o] = key;
    }
}
