// The walk's targets and target groups from a tree that stays on the device: the groups of
// src/walk/groups.rs (`tree_groups`, `curve_groups`, `chunk_groups`), cell for cell, the
// targets of the CPU backend (src/backend/cpu.rs), and for block steps the groups holding an
// active particle. src/walk/groups_gpu.rs launches these kernels after the tree build.
//
// Part of the stage program: compiled after cuda/build.cu (BUILD_BLOCK, IEEE arithmetic).
// Cells are in preorder, as store_cells wrote them.
//
// A group is a run of consecutive targets walked together. The groups are the largest cells
// that are "group cells" (a leaf, or at most `max` particles in a box no wider than `widest`),
// with consecutive sibling group cells packed into one group while it holds at most `max`
// particles, only below parents whose subtree has at most GROUP_PIECE cells (the host forms
// those subtrees in parallel pieces and packs only within a piece). Leaves of more than `max`
// particles are cut into groups of `max`. Being a group cell passes from a cell to its children
// (they hold fewer particles in smaller boxes), so the largest ones are the group cells whose
// parent is not one.

// Cells per independent piece of the host's group formation (PIECE in src/walk/groups.rs).
#define GROUP_PIECE 4096u
// Tree levels, the root's and TREE_MAX_LEVEL included (LEVELS in src/walk/groups.rs).
#define GROUP_LEVELS (TREE_MAX_LEVEL + 1)
// A chunk wider than this many times the median chunk is cut (WIDE_CHUNK in src/walk/groups.rs).
#define WIDE_CHUNK 4.0f
// Buckets of the chunks' extents: the upper 16 bits of their total-order keys
// (LIMIT_KEY_BITS in src/walk/groups.rs).
#define EXTENT_BUCKETS 65536u

// Whether cell c of tree t is a group cell (src/walk/groups.rs `is_group`).
__device__ __forceinline__ bool group_cell(unsigned c, const TreeArrays &t, unsigned max,
                                           float widest)
{
    return t.nchild[c] == 0 || (t.count[c] <= max && 2.0f * t.boxes[c].w <= widest);
}

struct RUST_TWIN GroupStartsArgs {
    // Cells of the tree.
    int ncells;
    // The tree (its count, nchild, subtree, boxes and parent are read).
    TreeArrays tree;
    // Most targets of a group.
    unsigned max;
    // Widest group cell: largest side of its box (frame length units; +inf for no limit; one
    // word, which group_width writes).
    const float *widest;
    // Per cell and one more: the groups that start at it.
    unsigned *starts;
    // Per cell: the targets of the (packed) group that starts at it.
    unsigned *run;
};

// For every cell, the groups that start at it (`starts`: 0, 1, or for a leaf of more than `max`
// particles its number of pieces) and, for a packed group, the particles of the whole run
// (`run`). starts[ncells] is set to 0 so that an exclusive scan over ncells + 1 entries ends
// with the number of groups.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) group_starts(const GroupStartsArgs a)
{
    const TreeArrays &t = a.tree;
    const unsigned max = a.max;
    const float widest = *a.widest;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= a.ncells;
         c += gridDim.x * blockDim.x) {
        if (c == a.ncells) {
            a.starts[c] = 0;
            continue;
        }
        const unsigned up = t.parent[c];
        const bool head = group_cell(c, t, max, widest) &&
                          (up == NO_PARENT || !group_cell(up, t, max, widest));
        unsigned k = 0, total = t.count[c];
        if (head && t.count[c] > max) {
            k = (t.count[c] + max - 1) / max; // a leaf cut into full groups and a rest
        } else if (head && (up == NO_PARENT || t.subtree[up] > GROUP_PIECE)) {
            k = 1; // alone in its piece
        } else if (head) {
            // Greedy packing over the siblings in order, as the host does it: a sibling that is
            // not a group cell, or a cut leaf, closes the open group.
            bool open = false, mine = false;
            unsigned sum = 0, kid = up + 1;
            for (int j = 0; j < t.nchild[up]; j++, kid += t.subtree[kid]) {
                const unsigned m = t.count[kid];
                const bool whole = group_cell(kid, t, max, widest) && m <= max;
                if (whole && open && sum + m <= max) {
                    sum += m;
                } else {
                    if (mine) break; // c's group is closed
                    open = whole;
                    sum = m;
                    mine = kid == (unsigned)c;
                }
            }
            k = mine ? 1 : 0;
            total = sum;
        }
        a.starts[c] = k;
        a.run[c] = total;
    }
}

struct RUST_TWIN GroupLevelsArgs {
    // Cells of the tree.
    int ncells;
    // Per cell: the groups that start at it (group_starts).
    const unsigned *starts;
    // Per cell: the targets of the group that starts at it (group_starts).
    const unsigned *run;
    // The tree (its level and boxes are read).
    TreeArrays tree;
    // Per level: targets of the groups that start at its cells (zero on entry).
    unsigned *weight;
    // Per level: largest half side of those cells (frame length units; zero on entry).
    float *half;
};

// Adds the particles of every group that starts at a cell to the count of that cell's level
// (`weight[level]`), for the particle-weighted median group width; `half[level]` (zero on entry)
// becomes the largest half side of those cells (one value per level after a rebuild; after a
// refit the boxes differ, and a maximum does not depend on the order of the threads).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) group_levels(const GroupLevelsArgs a)
{
    const TreeArrays &t = a.tree;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.ncells;
         c += gridDim.x * blockDim.x) {
        if (a.starts[c] == 0) continue;
        atomicAdd(&a.weight[t.level[c]], a.run[c]);
        // Non-negative floats order as their bit patterns.
        atomicMax(reinterpret_cast<unsigned *>(a.half) + t.level[c], __float_as_uint(t.boxes[c].w));
    }
}

struct RUST_TWIN GroupWidthArgs {
    // Per level: targets of the groups that start at its cells (group_levels).
    const unsigned *weight;
    // Per level: largest half side of those cells (frame length units, group_levels).
    const float *half;
    // Targets.
    int n;
    // The widest group cell (frame length units; written).
    float *widest;
};

// The widest group cell of the second formation (src/walk/groups.rs `tree_groups_within`): 4
// times the particle-weighted median width of the first formation's group cells (`median_width`
// there, the same loop), written on the device so that no value comes down between the two.
// One thread.
extern "C" __global__ void group_width(const GroupWidthArgs a)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long half_n = (unsigned long long)a.n / 2;
    unsigned long long seen = 0;
    float median = __int_as_float(0x7f800000);
    for (int l = GROUP_LEVELS - 1; l >= 0; l--) {
        if (a.weight[l] == 0) continue;
        seen += a.weight[l];
        if (seen >= half_n) {
            median = 2.0f * a.half[l];
            break;
        }
    }
    *a.widest = 4.0f * median;
}

struct RUST_TWIN EmitGroupsArgs {
    // Cells of the tree.
    int ncells;
    // Per cell and one more: the exclusive scan of the groups that start at it.
    const unsigned *offset;
    // The tree (its first and count are read).
    TreeArrays tree;
    // Per cell: the targets of the group that starts at it (group_starts).
    const unsigned *run;
    // Most targets of a group.
    unsigned max;
    // The groups: (first target, number of targets).
    uint2 *groups;
};

// Writes the groups (first target, number of targets) at the positions of the exclusive scan
// `offset` of `starts`.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) emit_groups(const EmitGroupsArgs a)
{
    const TreeArrays &t = a.tree;
    const unsigned max = a.max;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.ncells;
         c += gridDim.x * blockDim.x) {
        const unsigned at = a.offset[c], k = a.offset[c + 1] - at;
        if (k == 1 && t.count[c] <= max) {
            a.groups[at] = make_uint2(t.first[c], a.run[c]);
        } else {
            for (unsigned j = 0; j < k; j++) {
                const unsigned rest = t.count[c] - j * max;
                a.groups[at + j] = make_uint2(t.first[c] + j * max, rest < max ? rest : max);
            }
        }
    }
}

struct RUST_TWIN GatherTargetsArgs {
    // Particles.
    int n;
    // The tree's sorted particles: frame position and mass.
    const float4 *sorted;
    // Per sorted slot: the particle (input order) it holds.
    const unsigned *index;
    // Per particle (input order): previous |a| (acceleration units); null when has_amag is 0.
    const float *amag;
    // 1 when amag is given, else 0.
    int has_amag;
    // Per sorted slot: the target (frame position, previous |a|).
    float4 *targets;
};

// The walk's targets in tree order: each sorted particle's position and the previous |a| of the
// particle it is (`amag` in input order, indexed through `index`; zero when has_amag is 0).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) gather_targets(const GatherTargetsArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x) {
        const float4 p = a.sorted[k];
        a.targets[k] = make_float4(p.x, p.y, p.z, a.has_amag ? a.amag[a.index[k]] : 0.0f);
    }
}

// The GPU's groups (src/walk/groups.rs `curve_groups`): chunks of `chunk` consecutive targets,
// cut at the cell groups above where a chunk is wider than `limit`.

struct RUST_TWIN ChunkExtentsArgs {
    // Targets.
    int n;
    // The tree's sorted particles: frame position and mass.
    const float4 *sorted;
    // Targets per chunk.
    unsigned chunk;
    // Chunks (n / chunk rounded up).
    int nchunks;
    // Per chunk: its extent (frame length units).
    float *extents;
    // Per bucket of extents (EXTENT_BUCKETS, zero on entry): the chunks in it.
    unsigned *buckets;
};

// Rust's f32::total_cmp order as unsigned keys: negative values' bits all flipped, the others'
// sign bit set.
__device__ __forceinline__ unsigned order_key(float x)
{
    const unsigned b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The float32 value of an order key (order_key's inverse).
__device__ __forceinline__ float from_order_key(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// The largest side of the bounding box of every chunk of `chunk` consecutive sorted particles
// (`extent` in src/walk/groups.rs), each counted in its bucket of extents.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) chunk_extents(const ChunkExtentsArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.nchunks;
         k += gridDim.x * blockDim.x) {
        const unsigned s = k * a.chunk, e = min(s + a.chunk, (unsigned)a.n);
        const float4 q = a.sorted[s];
        float lo[3] = {q.x, q.y, q.z}, hi[3] = {q.x, q.y, q.z};
        for (unsigned i = s + 1; i < e; i++) {
            const float4 p = a.sorted[i];
            lo[0] = fminf(lo[0], p.x); hi[0] = fmaxf(hi[0], p.x);
            lo[1] = fminf(lo[1], p.y); hi[1] = fmaxf(hi[1], p.y);
            lo[2] = fminf(lo[2], p.z); hi[2] = fmaxf(hi[2], p.z);
        }
        const float extent =
            fmaxf(fmaxf(fmaxf(0.0f, hi[0] - lo[0]), hi[1] - lo[1]), hi[2] - lo[2]);
        a.extents[k] = extent;
        atomicAdd(&a.buckets[order_key(extent) >> 16], 1u);
    }
}

struct RUST_TWIN ChunkLimitArgs {
    // Chunks.
    int nchunks;
    // Per bucket of extents: the chunks in it (chunk_extents).
    const unsigned *buckets;
    // The widest chunk kept whole (frame length units; written).
    float *limit;
};

// The widest chunk kept whole (src/walk/groups.rs `wide_chunk_limit`): WIDE_CHUNK times the
// lower edge of the bucket that holds the median chunk (rank nchunks / 2 in increasing order),
// which is the median with the lower 16 bits of its order key cleared. One block: each thread
// sums EXTENT_BUCKETS / BUILD_BLOCK buckets, a scan finds the thread whose buckets hold the
// median, and it finds the bucket.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) chunk_limit(const ChunkLimitArgs a)
{
    if (blockIdx.x != 0) return;
    const unsigned per = EXTENT_BUCKETS / BUILD_BLOCK, lo = threadIdx.x * per;
    unsigned sum = 0;
    for (unsigned b = lo; b < lo + per; b++) sum += a.buckets[b];
    unsigned total;
    const unsigned before = block_exclusive_scan(sum, &total);
    const unsigned mid = (unsigned)a.nchunks / 2;
    if (before <= mid && mid < before + sum) {
        unsigned seen = before, b = lo;
        while (seen + a.buckets[b] <= mid) seen += a.buckets[b++];
        *a.limit = WIDE_CHUNK * from_order_key(b << 16);
    }
}

// The cell group (of the `ncg` in `cells`, which tile the targets in order) holding target t.
__device__ __forceinline__ int cell_group_of(unsigned t, const uint2 *__restrict__ cells, int ncg)
{
    int lo = 0, hi = ncg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (cells[mid].x <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// The chunks of the curve groups and the cell groups that cut the wide ones (chunk_pieces,
// emit_pieces).
struct RUST_TWIN Chunks {
    // Targets.
    int n;
    // Targets per chunk.
    unsigned chunk;
    // Chunks (n / chunk rounded up).
    int nchunks;
    // Per chunk: its extent (frame length units, chunk_extents).
    const float *extents;
    // Widest chunk kept whole (frame length units; one word, chunk_limit's).
    const float *limit;
    // The cell groups: (first target, number of targets), tiling the targets in order.
    const uint2 *cells;
    // Number of cell groups.
    int ncg;
};

struct RUST_TWIN ChunkPiecesArgs {
    // The chunks.
    Chunks chunks;
    // Per chunk and one more: the groups it becomes.
    unsigned *pieces;
};

// For every chunk, the groups it becomes: itself when no wider than `limit`, else one piece
// per cell group it overlaps. pieces[nchunks] is set to 0 for the scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) chunk_pieces(const ChunkPiecesArgs a)
{
    const Chunks &ch = a.chunks;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k <= ch.nchunks;
         k += gridDim.x * blockDim.x) {
        if (k == ch.nchunks) {
            a.pieces[k] = 0;
        } else if (ch.extents[k] <= *ch.limit) {
            a.pieces[k] = 1;
        } else {
            const unsigned s = k * ch.chunk, e = min(s + ch.chunk, (unsigned)ch.n);
            a.pieces[k] =
                cell_group_of(e - 1, ch.cells, ch.ncg) - cell_group_of(s, ch.cells, ch.ncg) + 1;
        }
    }
}

struct RUST_TWIN EmitPiecesArgs {
    // The chunks.
    Chunks chunks;
    // Per chunk and one more: the exclusive scan of the groups it becomes.
    const unsigned *offset;
    // The groups: (first target, number of targets).
    uint2 *groups;
};

// Writes the groups of every chunk at the positions of the exclusive scan `offset` of
// chunk_pieces.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) emit_pieces(const EmitPiecesArgs a)
{
    const Chunks &ch = a.chunks;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < ch.nchunks;
         k += gridDim.x * blockDim.x) {
        const unsigned s = k * ch.chunk, e = min(s + ch.chunk, (unsigned)ch.n);
        unsigned at = a.offset[k];
        if (ch.extents[k] <= *ch.limit) {
            a.groups[at] = make_uint2(s, e - s);
            continue;
        }
        for (int j = cell_group_of(s, ch.cells, ch.ncg); j < ch.ncg && ch.cells[j].x < e;
             j++, at++) {
            const unsigned from = max(ch.cells[j].x, s), to = min(ch.cells[j].x + ch.cells[j].y, e);
            a.groups[at] = make_uint2(from, to - from);
        }
    }
}

struct RUST_TWIN InputTargetsArgs {
    // Particles.
    int n;
    // Per particle: position (3 doubles, length units).
    const double *pos;
    // The tree's frame.
    FrameMap frame;
    // Per particle: previous |a| (acceleration units); null when has_amag is 0.
    const float *amag;
    // 1 when amag is given, else 0.
    int has_amag;
    // Per particle: the target (frame position, previous |a|).
    float4 *targets;
};

// Without a curve order (`--order none`): the targets are the particles in their own order,
// in the tree's frame (build.cu to_frame), each with its previous |a| (zero when has_amag is
// 0), and the groups fixed chunks of `chunk` consecutive ones (src/walk/groups.rs
// `chunk_groups`).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) input_targets(const InputTargetsArgs a)
{
    const FrameMap f = a.frame;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        a.targets[i] = make_float4(frame_coord(a.pos[3ll * i], f.cx, f),
                                   frame_coord(a.pos[3ll * i + 1], f.cy, f),
                                   frame_coord(a.pos[3ll * i + 2], f.cz, f),
                                   a.has_amag ? a.amag[i] : 0.0f);
}

struct RUST_TWIN InvertOrderArgs {
    // Particles.
    int n;
    // Per sorted slot: the particle it holds.
    const unsigned *order;
    // Per particle: its sorted slot.
    unsigned *inverse;
};

// The inverse of the tree's order (order[k]: the particle of sorted slot k): inverse[i] is the
// sorted slot of particle i, the walk's own particle of target i without a curve order.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) invert_order(const InvertOrderArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x)
        a.inverse[a.order[k]] = (unsigned)k;
}

struct RUST_TWIN ChunkGroupsArgs {
    // Targets.
    int n;
    // Targets per chunk.
    unsigned chunk;
    // Chunks (n / chunk rounded up).
    int nchunks;
    // The groups: (first target, number of targets).
    uint2 *groups;
};

// The groups without a curve order: chunks of `chunk` consecutive targets, the last one holding
// the rest.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) chunk_groups(const ChunkGroupsArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.nchunks;
         k += gridDim.x * blockDim.x) {
        const unsigned s = k * a.chunk;
        a.groups[k] = make_uint2(s, min(a.chunk, (unsigned)a.n - s));
    }
}

struct RUST_TWIN ActiveGroupsArgs {
    // Groups.
    int ngroups;
    // The groups: (first target, number of targets).
    const uint2 *groups;
    // Per target: its particle; null when has_order is 0.
    const unsigned *order;
    // 1 when order is given, else 0 (target t is particle t).
    int has_order;
    // Per particle: nonzero when active (one byte).
    const unsigned char *active;
    // Per group and one more: 1 when it holds an active particle.
    unsigned *flag;
};

// Block steps: flag[g] = 1 when group g holds an active particle (active[i] != 0 for particle
// i; target t is particle order[t], or t itself when has_order is 0); flag[ngroups] = 0 for the
// scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) active_groups(const ActiveGroupsArgs a)
{
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g <= a.ngroups;
         g += gridDim.x * blockDim.x) {
        unsigned any = 0;
        if (g < a.ngroups) {
            const uint2 gr = a.groups[g];
            for (unsigned t = gr.x; t < gr.x + gr.y && !any; t++)
                any = a.active[a.has_order ? a.order[t] : t] != 0;
        }
        a.flag[g] = any;
    }
}

struct RUST_TWIN KeepGroupsArgs {
    // Groups.
    int ngroups;
    // The groups: (first target, number of targets).
    const uint2 *groups;
    // Per group and one more: the exclusive scan of the flags of active_groups.
    const unsigned *offset;
    // The flagged groups: (first target, number of targets).
    uint2 *kept;
    // Their targets (one word, zero on entry).
    unsigned *walked;
};

// The flagged groups, in order, at the positions of the exclusive scan `offset` of the flags;
// *walked (zero on entry) gets the number of their targets.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) keep_groups(const KeepGroupsArgs a)
{
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < a.ngroups;
         g += gridDim.x * blockDim.x) {
        if (a.offset[g + 1] > a.offset[g]) {
            a.kept[a.offset[g]] = a.groups[g];
            atomicAdd(a.walked, a.groups[g].y);
        }
    }
}

struct RUST_TWIN BootstrapAmagArgs {
    // Targets.
    int n;
    // Per target: the first walk's acceleration (x, y, z, with G = 1) and potential.
    const float4 *out;
    // The gravitational constant.
    float g;
    // Per target: frame position and |a_old| (w, written).
    float4 *targets;
};

// The acceleration criterion's first evaluation: each target's |a_old| (the w of `targets`)
// from the first walk's result for it, out[k] (G = 1), times g, as the host forms it.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK) bootstrap_amag(const BootstrapAmagArgs a)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < a.n; k += gridDim.x * blockDim.x) {
        const float4 o = a.out[k];
        a.targets[k].w = a.g * sqrtf(o.x * o.x + o.y * o.y + o.z * o.z);
    }
}
