// The local tree and the received LETs merged into one tree on the device (src/lets/union_gpu.rs;
// the host's is src/lets/union.rs, the same cells): the cells of one key cell, held by the
// local tree and by one or more LETs, combined into one cell, whose children are the parts'
// children merged again by key, in octant order, then each part that is a leaf kept whole.
//
// The sources are the local tree's cells (s < n_local) and the forest's (s = n_local + j); the
// union's arrays hold the merged cells first (m < n_merged, the root's first), then the pseudo
// cells, then every source cell s at n_front + s (n_front = merged + pseudo cells), so that
// the walk's roots start at cell 0 and only the root's subtree size matters. A merged cell of
// more than 8 children reaches them through pseudo cells of at most 8 each (never accepted: a
// box of half side 1e30, which every target box overlaps), an 8-ary tree of them, so that the
// walk's lists of 8 children stay as they are.
//
// The groups of equal keys are found by a hash table of the forest's keys (open addressing,
// linear probing; a slot's leader is its smallest source cell, so that the merged cells'
// numbering, by a scan over the forest in order, does not depend on the order of the inserts),
// which the local cells then look up. Part of the stage program, after cuda/build.cu
// (BUILD_BLOCK, moments_of, store_moments, cell_s_eff, bounding_cube) and cuda/lets.cu
// (cell_key).

#define UNION_NONE 0xffffffffu
// Marks a source cell s in an octant (UNION_SOURCE | s): its union cell, n_front + s, is known
// only once the merged cells are counted.
#define UNION_SOURCE 0x80000000u
// Half side of a pseudo cell's box.
#define PSEUDO_HALF 1e30f

struct RUST_TWIN UnionArgs {
    // The local tree.
    TreeArrays local;
    // Its cells.
    int n_local;
    // Its particles.
    int n_local_particles;
    // The local tree's cells' boxes at the rebuild, whence their key cells.
    const float4 *built;
    // The forest of received LETs.
    TreeArrays forest;
    // Its cells.
    int n_forest;
    // Its particles.
    int n_forest_particles;
    // Per local cell: its key cell (union_local_keys).
    unsigned long long *local_keys;
    // Per forest cell: its key cell (let_unpack).
    const unsigned long long *forest_keys;
    // Slots of the hash table (a power of two).
    int slots;
    // Per slot: its key (0: empty).
    unsigned long long *table_key;
    // Per slot: the forest cells of its key.
    unsigned *table_count;
    // Per slot: the smallest of them (a source cell).
    unsigned *table_leader;
    // Per slot: the local cell of its key (UNION_NONE: none).
    unsigned *table_local;
    // Per slot: the merged cell it is, where merged.
    unsigned *table_merged;
    // Per forest cell: its slot.
    unsigned *slot_of;
    // Per forest cell: 1 where it leads a merged group; then their exclusive scan, its merged
    // cell.
    unsigned *leads;
    // Per forest cell that leads: its group's parts; then their exclusive scan, where they go
    // in `parts`.
    unsigned *part_counts;
    // Per merged cell: its key cell.
    unsigned long long *merged_key;
    // Per merged cell: its first part in `parts`.
    unsigned *merged_first;
    // Per merged cell: its parts.
    unsigned *merged_parts;
    // Per merged cell: its parts placed so far.
    unsigned *merged_fill;
    // Per merged cell: its pseudo cells; then their exclusive scan.
    unsigned *pseudo;
    // Per merged cell: what each of its 8 octants holds (a merged cell, UNION_SOURCE | a source
    // cell, or UNION_NONE), found by union_count for union_cells.
    unsigned *octants;
    // The merged cells' parts (source cells): the local one first, then the forest's in order.
    unsigned *parts;
    // Merged cells.
    int n_merged;
    // Merged and pseudo cells: the union's cell of source cell s is n_front + s.
    int n_front;
    // Per tree level: the most pseudo levels below a merged cell of that level (atomicMax).
    unsigned *extra_levels;
    // What the host reads of the first phase (union_summary): merged cells, parts, pseudo
    // cells, and the extra levels summed over the tree levels.
    unsigned *summary;
    // The union, in the walk's tree arrays.
    TreeArrays tree;
    // Per union cell: its 8 child slots.
    unsigned *children;
    // The union's cells.
    int n_cells;
    // The criterion of S_eff: 0 Barnes-Hut, otherwise the modified one.
    int mac;
    // Opening angle.
    float theta;
    // Set to 0 where the keys of a part's children do not nest in its own.
    unsigned *bad;
};

// The slot of the hash table where key k's probe starts.
__device__ __forceinline__ unsigned union_hash(unsigned long long k, int slots)
{
    return (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 32) & (unsigned)(slots - 1);
}

// The slot of key k, or UNION_NONE where the table does not hold it.
__device__ __forceinline__ unsigned union_find(const UnionArgs &a, unsigned long long k)
{
    for (unsigned h = union_hash(k, a.slots);; h = (h + 1) & (unsigned)(a.slots - 1)) {
        const unsigned long long t = a.table_key[h];
        if (t == k) return h;
        if (t == 0) return UNION_NONE;
    }
}

// Source cell s: its tree and its index there.
__device__ __forceinline__ const TreeArrays &union_source(const UnionArgs &a, unsigned s,
                                                          unsigned *c)
{
    if (s < (unsigned)a.n_local) {
        *c = s;
        return a.local;
    }
    *c = s - (unsigned)a.n_local;
    return a.forest;
}

// The key cell of source cell s.
__device__ __forceinline__ unsigned long long union_key(const UnionArgs &a, unsigned s)
{
    return s < (unsigned)a.n_local ? a.local_keys[s] : a.forest_keys[s - (unsigned)a.n_local];
}

// Whether the group of table slot h is merged: two parts or more.
__device__ __forceinline__ bool union_merged(const UnionArgs &a, unsigned h)
{
    return a.table_count[h] + (a.table_local[h] != UNION_NONE) >= 2;
}

// The pseudo cells a merged cell of k children needs (an 8-ary tree of them), and the levels
// they add below it.
__device__ __forceinline__ unsigned pseudo_cells(unsigned k, unsigned *levels)
{
    unsigned n = 0, l = 0;
    while (k > 8) {
        k = (k + 7) / 8;
        n += k;
        l++;
    }
    *levels = l;
    return n;
}

// Every local cell's key cell.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_local_keys(const UnionArgs a)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.n_local; c += gridDim.x * blockDim.x)
        a.local_keys[c] = cell_key(a.built[0], a.built[c], a.local.level[c]);
}

// Every forest cell's key into the table: its slot, the slot's count and leader.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_insert(const UnionArgs a)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.n_forest; j += gridDim.x * blockDim.x) {
        const unsigned s = (unsigned)(a.n_local + j);
        const unsigned long long k = a.forest_keys[j];
        unsigned h = union_hash(k, a.slots);
        while (true) {
            const unsigned long long t = atomicCAS(&a.table_key[h], 0ull, k);
            if (t == 0 || t == k) break;
            h = (h + 1) & (unsigned)(a.slots - 1);
        }
        atomicAdd(&a.table_count[h], 1u);
        atomicMin(&a.table_leader[h], s);
        a.slot_of[j] = h;
    }
}

// Every local cell whose key a forest cell has, into its slot.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_local_match(const UnionArgs a)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.n_local; c += gridDim.x * blockDim.x) {
        const unsigned h = union_find(a, a.local_keys[c]);
        if (h != UNION_NONE) a.table_local[h] = (unsigned)c;
    }
}

// Per forest cell: whether it leads a merged group, and the group's parts.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_leaders(const UnionArgs a)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.n_forest; j += gridDim.x * blockDim.x) {
        const unsigned h = a.slot_of[j];
        const bool lead = union_merged(a, h) && a.table_leader[h] == (unsigned)(a.n_local + j);
        a.leads[j] = lead;
        a.part_counts[j] = lead ? a.table_count[h] + (a.table_local[h] != UNION_NONE) : 0u;
    }
}

// Per merged group, by its leader (leads and part_counts scanned): the merged cell's key,
// parts and their place, its local part placed first.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_groups(const UnionArgs a)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.n_forest; j += gridDim.x * blockDim.x) {
        const unsigned h = a.slot_of[j];
        if (!union_merged(a, h) || a.table_leader[h] != (unsigned)(a.n_local + j)) continue;
        const unsigned m = a.leads[j], first = a.part_counts[j], local = a.table_local[h];
        a.table_merged[h] = m;
        a.merged_key[m] = a.table_key[h];
        a.merged_first[m] = first;
        a.merged_parts[m] = a.table_count[h] + (local != UNION_NONE);
        a.merged_fill[m] = local != UNION_NONE;
        if (local != UNION_NONE) a.parts[first] = local;
    }
}

// Every forest cell of a merged group into its parts (in any order: union_count sorts them).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_members(const UnionArgs a)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.n_forest; j += gridDim.x * blockDim.x) {
        const unsigned h = a.slot_of[j];
        if (!union_merged(a, h)) continue;
        const unsigned m = a.table_merged[h];
        const unsigned at = atomicAdd(&a.merged_fill[m], 1u);
        a.parts[a.merged_first[m] + at] = (unsigned)(a.n_local + j);
    }
}

// What each octant of merged cell m holds into octant[]: a merged cell, or UNION_SOURCE | s for
// the one source cell s of that key, or UNION_NONE where no part has a child there. Flags bad
// where a child's key does not nest in m's.
__device__ __forceinline__ void union_octants(const UnionArgs &a, unsigned m, unsigned octant[8])
{
    const unsigned long long key = a.merged_key[m];
    const unsigned first = a.merged_first[m], n = a.merged_parts[m];
    for (int o = 0; o < 8; o++) octant[o] = UNION_NONE;
    for (unsigned i = 0; i < n; i++) {
        unsigned c;
        const TreeArrays &t = union_source(a, a.parts[first + i], &c);
        const unsigned base = a.parts[first + i] - c;
        unsigned kid = c + 1;
        for (unsigned j = 0; j < t.nchild[c]; j++) {
            const unsigned s = base + kid;
            const unsigned long long k = union_key(a, s);
            if (k >> 3 != key) {
                a.bad[0] = 0u;
            } else {
                const unsigned h = union_find(a, k);
                octant[k & 7] = h != UNION_NONE && union_merged(a, h) ? a.table_merged[h]
                                                                      : UNION_SOURCE | s;
            }
            kid += t.subtree[kid];
        }
    }
}

// Calls f(u) for the children of merged cell m in order: the union cell of each occupied
// octant (union_count's octants; a source cell s at n_front + s), then each part that is a
// leaf.
template <typename F>
__device__ __forceinline__ void union_children(const UnionArgs &a, unsigned m, F f)
{
    const unsigned first = a.merged_first[m], n = a.merged_parts[m];
    for (int o = 0; o < 8; o++) {
        const unsigned v = a.octants[8ull * m + o];
        if (v == UNION_NONE) continue;
        f(v & UNION_SOURCE ? (unsigned)a.n_front + (v & ~UNION_SOURCE) : v);
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned c;
        const TreeArrays &t = union_source(a, a.parts[first + i], &c);
        if (t.nchild[c] == 0) f((unsigned)a.n_front + a.parts[first + i]);
    }
}

// Per merged cell (their number the total of the scan of `leads`): its forest parts sorted (the
// order of the sums does not depend on the inserts'), its octants found, its children counted,
// the pseudo cells they need and the levels those add.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_count(const UnionArgs a)
{
    const int n_merged = (int)a.leads[a.n_forest];
    for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < n_merged; m += gridDim.x * blockDim.x) {
        unsigned *p = a.parts + a.merged_first[m];
        const unsigned n = a.merged_parts[m];
        const unsigned from = p[0] < (unsigned)a.n_local ? 1u : 0u;
        for (unsigned i = from + 1; i < n; i++) {
            const unsigned v = p[i];
            unsigned j = i;
            for (; j > from && p[j - 1] > v; j--) p[j] = p[j - 1];
            p[j] = v;
        }
        unsigned octant[8];
        union_octants(a, (unsigned)m, octant);
        for (int o = 0; o < 8; o++) a.octants[8ull * m + o] = octant[o];
        unsigned k = 0, levels;
        union_children(a, (unsigned)m, [&](unsigned) { k++; });
        a.pseudo[m] = pseudo_cells(k, &levels);
        atomicMax(&a.extra_levels[key_level(a.merged_key[m])], levels);
    }
}

// The totals of the first phase into `summary`, for one copy to the host (one thread).
extern "C" __global__ void union_summary(const UnionArgs a)
{
    if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
    a.summary[0] = a.leads[a.n_forest];
    a.summary[1] = a.part_counts[a.n_forest];
    a.summary[2] = a.pseudo[a.n_forest];
    unsigned extra = 0;
    for (int l = 0; l <= KEY_MAX_LEVEL; l++) extra += a.extra_levels[l];
    a.summary[3] = extra;
}

// The source cells into the union after its merged and pseudo cells (the forest's first
// particle moved past the local particles), and the particles, the local ones first.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_copy(const UnionArgs a)
{
    const long long nc = (long long)a.n_local + a.n_forest;
    const long long total = nc + a.n_local_particles + a.n_forest_particles;
    const TreeArrays u = a.tree;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        if (i >= nc) {
            const long long q = i - nc;
            u.particles[q] = q < a.n_local_particles ? a.local.particles[q]
                                                     : a.forest.particles[q - a.n_local_particles];
            continue;
        }
        unsigned c;
        const TreeArrays &t = union_source(a, (unsigned)i, &c);
        const long long o = a.n_front + i;
        const unsigned shift = i < a.n_local ? 0u : (unsigned)a.n_local_particles;
        u.first[o] = t.first[c] + shift;
        u.count[o] = t.count[c];
        u.level[o] = t.level[c];
        u.nchild[o] = t.nchild[c];
        u.subtree[o] = t.subtree[c];
        u.boxes[o] = t.boxes[c];
        u.com_mass[o] = t.com_mass[c];
        for (int d = 0; d < 6; d++) u.quad[6 * o + d] = t.quad[6ll * c + d];
        u.trace[o] = t.trace[c];
        u.s_eff[o] = t.s_eff[c];
    }
}

// The box of a merged cell (src/lets/union.rs merged_box): the cube around its parts' boxes
// (a terminal multipole's: its centre of mass, of half side 0), and around its key cell too
// where every part is a terminal multipole.
__device__ __forceinline__ float4 merged_box(const UnionArgs &a, unsigned m)
{
    const unsigned first = a.merged_first[m], n = a.merged_parts[m];
    bool cells = false;
    for (unsigned i = 0; i < n; i++) {
        unsigned c;
        cells = cells || union_source(a, a.parts[first + i], &c).boxes[c].w > 0.0f;
    }
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    if (!cells) key_box(a.built[0], a.merged_key[m], lo, hi);
    for (unsigned i = 0; i < n; i++) {
        unsigned c;
        const TreeArrays &t = union_source(a, a.parts[first + i], &c);
        const float4 b = t.boxes[c];
        const double p[3] = {b.x, b.y, b.z};
        for (int k = 0; k < 3; k++) {
            lo[k] = fmin(lo[k], p[k] - (double)b.w);
            hi[k] = fmax(hi[k], p[k] + (double)b.w);
        }
    }
    return bounding_cube(lo, hi);
}

// Per merged cell (pseudo scanned, the source cells copied): its moments (the parts', in
// order, parallel-axis theorem: src/tree/moments.rs combine), box and S_eff, and its
// children, through pseudo cells where they are more than 8.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) union_cells(const UnionArgs a)
{
    const TreeArrays u = a.tree;
    for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < a.n_merged; m += gridDim.x * blockDim.x) {
        const unsigned first = a.merged_first[m], n = a.merged_parts[m];
        double s[MOMENT_WORDS], part[MOMENT_WORDS];
        moments_of(
            n,
            [&](unsigned i, double y[3]) -> double {
                unsigned c;
                const float4 cm = union_source(a, a.parts[first + i], &c).com_mass[c];
                y[0] = cm.x;
                y[1] = cm.y;
                y[2] = cm.z;
                return cm.w;
            },
            [&](unsigned i) -> const double * {
                unsigned c;
                const TreeArrays &t = union_source(a, a.parts[first + i], &c);
                for (int d = 0; d < 6; d++) part[4 + d] = t.quad[6ll * c + d];
                part[10] = t.trace[c];
                return part;
            },
            s);
        const float4 cm = store_moments((unsigned)m, s, u.com_mass, u.quad, u.trace);
        const float4 box = merged_box(a, (unsigned)m);
        u.boxes[m] = box;
        u.s_eff[m] = cell_s_eff(box, cm, a.mac, a.theta);
        u.first[m] = 0;
        u.level[m] = (unsigned char)key_level(a.merged_key[m]);
        u.subtree[m] = m == 0 ? (unsigned)a.n_cells : 1u;
        unsigned count = 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned c;
            count += union_source(a, a.parts[first + i], &c).count[c];
        }
        u.count[m] = count;
        // The children: element e to slot e % 8 of the lowest pseudo level's cell e / 8, or
        // straight to the merged cell's slots where they are at most 8.
        unsigned k = 0, levels;
        union_children(a, (unsigned)m, [&](unsigned) { k++; });
        pseudo_cells(k, &levels);
        const unsigned pseudo0 = (unsigned)a.n_merged + a.pseudo[m];
        unsigned e = 0;
        union_children(a, (unsigned)m, [&](unsigned child) {
            const unsigned holder = levels > 0 ? pseudo0 + e / 8 : (unsigned)m;
            a.children[8ull * holder + e % 8] = child;
            e++;
        });
        // Each pseudo level's cells (holding `width` cells or children of the level below)
        // under the next level's, the top level's under the merged cell.
        unsigned width = k, at = pseudo0;
        for (unsigned l = 0; l < levels; l++) {
            const unsigned cells = (width + 7) / 8, next = at + cells;
            for (unsigned i = 0; i < cells; i++) {
                const unsigned p = at + i;
                u.nchild[p] = (unsigned char)min(8u, width - 8 * i);
                u.boxes[p] = make_float4(box.x, box.y, box.z, PSEUDO_HALF);
                u.com_mass[p] = cm;
                for (int d = 0; d < 6; d++) u.quad[6ll * p + d] = 0.0f;
                u.trace[p] = 0.0f;
                u.s_eff[p] = PSEUDO_HALF;
                u.first[p] = 0;
                u.count[p] = 0;
                u.level[p] = u.level[m];
                u.subtree[p] = 1;
                const unsigned parent = l + 1 == levels ? (unsigned)m : next + i / 8;
                a.children[8ull * parent + i % 8] = p;
            }
            width = cells;
            at = next;
        }
        u.nchild[m] = (unsigned char)width;
    }
}
