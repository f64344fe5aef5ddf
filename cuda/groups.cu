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

// Whether cell c is a group cell (src/walk/groups.rs `is_group`).
__device__ __forceinline__ bool group_cell(unsigned c, const unsigned *__restrict__ count,
                                           const unsigned char *__restrict__ nchild,
                                           const float4 *__restrict__ boxes, unsigned max,
                                           float widest)
{
    return nchild[c] == 0 || (count[c] <= max && 2.0f * boxes[c].w <= widest);
}

// For every cell, the groups that start at it (`starts`: 0, 1, or for a leaf of more than `max`
// particles its number of pieces) and, for a packed group, the particles of the whole run
// (`run`). starts[ncells] is set to 0 so that an exclusive scan over ncells + 1 entries ends
// with the number of groups.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    group_starts(int ncells, const unsigned *__restrict__ count,
                 const unsigned char *__restrict__ nchild, const unsigned *__restrict__ subtree,
                 const float4 *__restrict__ boxes, const unsigned *__restrict__ parent,
                 unsigned max, float widest, unsigned *__restrict__ starts,
                 unsigned *__restrict__ run)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= ncells; c += gridDim.x * blockDim.x) {
        if (c == ncells) {
            starts[c] = 0;
            continue;
        }
        const unsigned up = parent[c];
        const bool head = group_cell(c, count, nchild, boxes, max, widest) &&
                          (up == NO_PARENT || !group_cell(up, count, nchild, boxes, max, widest));
        unsigned k = 0, total = count[c];
        if (head && count[c] > max) {
            k = (count[c] + max - 1) / max; // a leaf cut into full groups and a rest
        } else if (head && (up == NO_PARENT || subtree[up] > GROUP_PIECE)) {
            k = 1; // alone in its piece
        } else if (head) {
            // Greedy packing over the siblings in order, as the host does it: a sibling that is
            // not a group cell, or a cut leaf, closes the open group.
            bool open = false, mine = false;
            unsigned sum = 0, kid = up + 1;
            for (int j = 0; j < nchild[up]; j++, kid += subtree[kid]) {
                const unsigned m = count[kid];
                const bool whole = group_cell(kid, count, nchild, boxes, max, widest) && m <= max;
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
        starts[c] = k;
        run[c] = total;
    }
}

// Adds the particles of every group that starts at a cell to the count of that cell's level
// (`weight[level]`), for the particle-weighted median group width; `half[level]` (zero on entry)
// becomes the largest half side of those cells (one value per level after a rebuild; after a
// refit the boxes differ, and a maximum does not depend on the order of the threads).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    group_levels(int ncells, const unsigned *__restrict__ starts, const unsigned *__restrict__ run,
                 const unsigned char *__restrict__ level, const float4 *__restrict__ boxes,
                 unsigned *__restrict__ weight, float *__restrict__ half)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncells; c += gridDim.x * blockDim.x) {
        if (starts[c] == 0) continue;
        atomicAdd(&weight[level[c]], run[c]);
        // Non-negative floats order as their bit patterns.
        atomicMax(reinterpret_cast<unsigned *>(half) + level[c], __float_as_uint(boxes[c].w));
    }
}

// Writes the groups (first target, number of targets) at the positions of the exclusive scan
// `offset` of `starts`.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    emit_groups(int ncells, const unsigned *__restrict__ offset,
                const unsigned *__restrict__ first, const unsigned *__restrict__ count,
                const unsigned *__restrict__ run, unsigned max, uint2 *__restrict__ groups)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < ncells; c += gridDim.x * blockDim.x) {
        const unsigned at = offset[c], k = offset[c + 1] - at;
        if (k == 1 && count[c] <= max) {
            groups[at] = make_uint2(first[c], run[c]);
        } else {
            for (unsigned j = 0; j < k; j++) {
                const unsigned rest = count[c] - j * max;
                groups[at + j] = make_uint2(first[c] + j * max, rest < max ? rest : max);
            }
        }
    }
}

// The walk's targets in tree order: each sorted particle's position and the previous |a| of the
// particle it is (`amag` in input order, indexed through `index`; zero when has_amag is 0).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    gather_targets(int n, const float4 *__restrict__ sorted, const unsigned *__restrict__ index,
                   const float *__restrict__ amag, int has_amag, float4 *__restrict__ targets)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const float4 p = sorted[k];
        targets[k] = make_float4(p.x, p.y, p.z, has_amag ? amag[index[k]] : 0.0f);
    }
}

// The GPU's groups (src/walk/groups.rs `curve_groups`): chunks of `chunk` consecutive targets,
// cut at the cell groups above where a chunk is wider than `limit`.

// The largest side of the bounding box of every chunk of `chunk` consecutive sorted particles
// (`extent` in src/walk/groups.rs).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    chunk_extents(int n, const float4 *__restrict__ sorted, unsigned chunk, int nchunks,
                  float *__restrict__ extents)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < nchunks; k += gridDim.x * blockDim.x) {
        const unsigned s = k * chunk, e = min(s + chunk, (unsigned)n);
        const float4 q = sorted[s];
        float lo[3] = {q.x, q.y, q.z}, hi[3] = {q.x, q.y, q.z};
        for (unsigned i = s + 1; i < e; i++) {
            const float4 p = sorted[i];
            lo[0] = fminf(lo[0], p.x); hi[0] = fmaxf(hi[0], p.x);
            lo[1] = fminf(lo[1], p.y); hi[1] = fmaxf(hi[1], p.y);
            lo[2] = fminf(lo[2], p.z); hi[2] = fmaxf(hi[2], p.z);
        }
        extents[k] = fmaxf(fmaxf(fmaxf(0.0f, hi[0] - lo[0]), hi[1] - lo[1]), hi[2] - lo[2]);
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

// For every chunk, the groups it becomes: itself when no wider than `limit`, else one piece
// per cell group it overlaps. pieces[nchunks] is set to 0 for the scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    chunk_pieces(int n, unsigned chunk, int nchunks, const float *__restrict__ extents, float limit,
                 const uint2 *__restrict__ cells, int ncg, unsigned *__restrict__ pieces)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k <= nchunks; k += gridDim.x * blockDim.x) {
        if (k == nchunks) {
            pieces[k] = 0;
        } else if (extents[k] <= limit) {
            pieces[k] = 1;
        } else {
            const unsigned s = k * chunk, e = min(s + chunk, (unsigned)n);
            pieces[k] = cell_group_of(e - 1, cells, ncg) - cell_group_of(s, cells, ncg) + 1;
        }
    }
}

// Writes the groups of every chunk at the positions of the exclusive scan `offset` of
// chunk_pieces.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    emit_pieces(int n, unsigned chunk, int nchunks, const float *__restrict__ extents, float limit,
                const uint2 *__restrict__ cells, int ncg, const unsigned *__restrict__ offset,
                uint2 *__restrict__ groups)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < nchunks; k += gridDim.x * blockDim.x) {
        const unsigned s = k * chunk, e = min(s + chunk, (unsigned)n);
        unsigned at = offset[k];
        if (extents[k] <= limit) {
            groups[at] = make_uint2(s, e - s);
            continue;
        }
        for (int j = cell_group_of(s, cells, ncg); j < ncg && cells[j].x < e; j++, at++) {
            const unsigned from = max(cells[j].x, s), to = min(cells[j].x + cells[j].y, e);
            groups[at] = make_uint2(from, to - from);
        }
    }
}

// Without a curve order (`--order none`): the targets are the particles in their own order,
// in the tree's frame (centre (cx, cy, cz), `scale` = 1 / side, build.cu to_frame),
// each with its previous |a| (zero when has_amag is 0), and the groups fixed chunks of `chunk`
// consecutive ones (src/walk/groups.rs `chunk_groups`).
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    input_targets(int n, const double *__restrict__ pos, double cx, double cy, double cz,
                  double scale, const float *__restrict__ amag, int has_amag,
                  float4 *__restrict__ targets)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        targets[i] = make_float4(frame_coord(pos[3ll * i], cx, scale),
                                 frame_coord(pos[3ll * i + 1], cy, scale),
                                 frame_coord(pos[3ll * i + 2], cz, scale),
                                 has_amag ? amag[i] : 0.0f);
}

// The inverse of the tree's order (order[k]: the particle of sorted slot k): inverse[i] is the
// sorted slot of particle i, the walk's own particle of target i without a curve order.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    invert_order(int n, const unsigned *__restrict__ order, unsigned *__restrict__ inverse)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        inverse[order[k]] = (unsigned)k;
}

extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    chunk_groups(int n, unsigned chunk, int nchunks, uint2 *__restrict__ groups)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < nchunks; k += gridDim.x * blockDim.x) {
        const unsigned s = k * chunk;
        groups[k] = make_uint2(s, min(chunk, (unsigned)n - s));
    }
}

// Block steps: flag[g] = 1 when group g holds an active particle (active[i] != 0 for particle
// i; target t is particle order[t], or t itself when has_order is 0); flag[ngroups] = 0 for the
// scan that follows.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    active_groups(int ngroups, const uint2 *__restrict__ groups, const unsigned *__restrict__ order,
                  int has_order, const unsigned char *__restrict__ active,
                  unsigned *__restrict__ flag)
{
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g <= ngroups; g += gridDim.x * blockDim.x) {
        unsigned any = 0;
        if (g < ngroups) {
            const uint2 gr = groups[g];
            for (unsigned t = gr.x; t < gr.x + gr.y && !any; t++)
                any = active[has_order ? order[t] : t] != 0;
        }
        flag[g] = any;
    }
}

// The flagged groups, in order, at the positions of the exclusive scan `offset` of the flags;
// *walked (zero on entry) gets the number of their targets.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    keep_groups(int ngroups, const uint2 *__restrict__ groups, const unsigned *__restrict__ offset,
                uint2 *__restrict__ kept, unsigned *__restrict__ walked)
{
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < ngroups; g += gridDim.x * blockDim.x) {
        if (offset[g + 1] > offset[g]) {
            kept[offset[g]] = groups[g];
            atomicAdd(walked, groups[g].y);
        }
    }
}

// The acceleration criterion's first evaluation: each target's |a_old| (the w of `targets`)
// from the first walk's result for it, out[k] (G = 1), times g, as the host forms it.
extern "C" __global__ void __launch_bounds__(BUILD_BLOCK)
    bootstrap_amag(int n, const float4 *__restrict__ out, float g, float4 *__restrict__ targets)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const float4 a = out[k];
        targets[k].w = g * sqrtf(a.x * a.x + a.y * a.y + a.z * a.z);
    }
}
