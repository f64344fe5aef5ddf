// The interaction-list walk (the design of Bonsai and Ryoanji, on hinoki's tree): one warp per
// target group, V = HINOKI_V targets per lane (a group is a tree cell of at most 32 V targets,
// src/walk/groups.rs). Instead of one opening decision at a time, as the (V,G) kernel of
// walk.cu takes them, the warp tests up to 32 cells at once (one per lane) and sorts them:
//   - accepted cells go to a list of multipoles in shared memory,
//   - opened leaves put their particles on a list of point sources in shared memory,
//   - opened internal cells push their children on the warp's stack (global memory), read
//     from a list of up to 8 children per cell (link_children, run before the walk), so that
//     a lane pushes them with two independent loads instead of a chain through `subtree`.
// Whenever a list holds 32 entries, every lane applies all 32 to its V targets, reading each
// source with one broadcast shared-memory load: the inner loops have no dependent global loads,
// and the 32 cell tests of a step proceed in parallel instead of one after another.
//
// The decisions are those of walk.cu and of the CPU grouped walk (`accepts` on the group's
// bounding box), so the interactions are the same; only the order of the sums differs.
//
// The stack: cells are popped 32 at a time from its top (lane l takes the l-th of them from
// the bottom up) and children are pushed in lane order, so depths along the stack never
// decrease; then at most 8 * 32 entries share one depth and the stack holds at most
// 256 (depth + 1) entries (LIST_STACK_PER_LEVEL in src/walk/gpu/mod.rs).
//
// Warps are persistent: each takes the next group from a global counter until none is left.
// Output per target as walk_vg: (ax, ay, az, phi) with G = 1, and the p2p and m2p counts.
//
// In a periodic box (walk_list_periodic, periodic.cuh) the lane that tests a cell moves it to
// its image nearest the group, so that the lists hold every source already shifted and the
// loops that apply them are those of the open walk. The lane that accepts a cell or opens a
// small leaf adds that source's Ewald correction to its own sums, a lane that loads a larger
// leaf's particles theirs; at the group's end a warp reduction gives every lane the group's sums.

#define LIST_WARPS 4    // warps per block (128 threads, the launch bound)
#define LIST_CAP 64     // entries of each shared-memory list; evaluated in batches of 32
#define FULL_MASK 0xffffffffu

// Exclusive prefix sum of x over the warp; the total in *total.
__device__ __forceinline__ unsigned warp_exclusive_scan(unsigned x, unsigned lane, unsigned *total)
{
    unsigned incl = x;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(FULL_MASK, incl, off);
        if (lane >= (unsigned)off) incl += y;
    }
    *total = __shfl_sync(FULL_MASK, incl, 31);
    return incl - x;
}

// For every cell from first_cell on, its children in order (first c + 1, each next one after
// the previous one's subtree), 8 slots per cell; slots past nchild are left as they are.
struct RUST_TWIN LinkArgs {
    // The tree's cells.
    TreeArrays tree;
    // The first cell linked (0, or in a merged tree the first cell in preorder).
    int first_cell;
    // Cells.
    int n_cells;
    // Per cell: 8 child slots.
    unsigned *children;
};

extern "C" __global__ void link_children(const LinkArgs a)
{
    const int c = a.first_cell + blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= a.n_cells) return;
    const int k = a.tree.nchild[c];
    unsigned child = c + 1;
    for (int j = 0; j < k; j++) {
        a.children[8 * c + j] = child;
        child += a.tree.subtree[child];
    }
}

// An opened leaf's particle p as the source list holds it: as it is in an open walk; in a
// periodic one at the leaf's image (`shift`), or when `own_images`, at its own image nearest bc
// with its Ewald correction added to ew.
template <bool PERIODIC>
__device__ __forceinline__ float4 source_image(float4 p, bool own_images, float3 shift, float3 bc,
                                               const float4 *__restrict__ ewald, EwaldSums &ew)
{
    if constexpr (PERIODIC) {
        if (!own_images) return shifted(p, shift);
        p = shifted(p, nearest_shift(p, bc));
        ewald_add(ewald, separation(bc, p), p.w, ew);
    }
    return p;
}

// The list walk of a warp's groups, with open boundaries or (PERIODIC) in the periodic box:
// one template, compiled into a kernel of each kind (walk_list, walk_list_periodic), so that the
// open walk's code and registers are those it had without the periodic one.
template <bool PERIODIC>
__device__ __forceinline__ void walk_list_groups(WALK_PARAMETERS)
{
    const float2 *cell_quad = (const float2 *)tree_quad;  // (xx,yy), (zz,xy), (xz,yz)
    const uint4 *cell_children = (const uint4 *)children;  // 8 slots a cell
    __shared__ float4 s_cm[LIST_WARPS][LIST_CAP];   // multipoles: centre of mass, mass
    __shared__ float4 s_qa[LIST_WARPS][LIST_CAP];   //   quadrupole xx yy zz xy
    __shared__ float4 s_qb[LIST_WARPS][LIST_CAP];   //   quadrupole xz yz, trace eps^2
    __shared__ float4 s_src[LIST_WARPS][LIST_CAP];  // point sources: position, mass
    __shared__ unsigned s_idx[LIST_WARPS][LIST_CAP]; //   and their index among the particles
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = threadIdx.x >> 5;
    const unsigned below = (1u << lane) - 1u;       // lanes before this one
    float4 *cm = s_cm[warp], *qa = s_qa[warp], *qb = s_qb[warp], *src = s_src[warp];
    unsigned *idx = s_idx[warp];
    unsigned *stack = stacks + (size_t)(blockIdx.x * LIST_WARPS + warp) * stack_cap;

    while (true) {
        unsigned group = 0;
        if (lane == 0) group = atomicAdd(&control[0], 1u);
        group = __shfl_sync(FULL_MASK, group, 0);
        if (group >= (unsigned)n_groups) return;
        const uint2 range = groups[group];
        const int first = range.x;
        const int count = range.y;

        float3 x[HINOKI_V], bc, bh;
        float amin;
        load_group<HINOKI_V, 32>(targets, first, count, (int)lane, FULL_MASK, x, bc, bh, amin);

        float4 acc[HINOKI_V];
        unsigned me[HINOKI_V];
#pragma unroll
        for (int v = 0; v < HINOKI_V; v++) {
            acc[v] = make_float4(0.f, 0.f, 0.f, 0.f);
            me[v] = own_particle(own_kind, own, first + min((int)lane * HINOKI_V + v, count - 1));
        }
        unsigned np = 0, nm = 0;   // interactions evaluated (the same on every lane)
        int n_cm = 0, n_src = 0;   // entries waiting in the two lists
        EwaldSums ew = ewald_zero();   // PERIODIC: this lane's share of the Ewald corrections

        // Applies the first `k` multipoles (or point sources) of the lists to this lane's
        // targets; one loop per multipole order, each compiled for its order.
        auto apply_multipoles = [&](int k) {
            if (quadrupole) {
#pragma unroll 4
                for (int j = 0; j < k; j++) {
                    const float4 c = cm[j], a = qa[j], b = qb[j];
#pragma unroll
                    for (int v = 0; v < HINOKI_V; v++)
                        m2p(x[v], c, a, make_float2(b.x, b.y), b.z, eps2, true, acc[v]);
                }
            } else {
#pragma unroll 4
                for (int j = 0; j < k; j++) {
                    const float4 c = cm[j];
#pragma unroll
                    for (int v = 0; v < HINOKI_V; v++)
                        m2p(x[v], c, c, make_float2(0.f, 0.f), 0.f, eps2, false, acc[v]);
                }
            }
            nm += k;
        };
        auto apply_sources = [&](int k) {
#pragma unroll 4
            for (int j = 0; j < k; j++) {
                const float4 s = src[j];
                const unsigned i = idx[j];
#pragma unroll
                for (int v = 0; v < HINOKI_V; v++) p2p(x[v], s, eps2, i != me[v], acc[v]);
            }
            np += k;
        };

        // A forest (the LETs) has several roots, one after the other in preorder.
        for (int root = 0; root < n_cells; root += tree_subtree[root]) {
            if (lane == 0) stack[0] = root;
            int top = 1;
            __syncwarp();
            while (top > 0) {
                const int k = min(top, 32);
                top -= k;
                const int c = (int)lane < k ? (int)stack[top + lane] : -1;
                bool accepted = false;
                unsigned children = 0, leaf_first = 0, leaf_count = 0;
                float4 pm;
                // PERIODIC: the lattice vector to the cell's image nearest the group, and
                // whether an opened leaf's particles take their own images instead.
                float3 shift = make_float3(0.f, 0.f, 0.f);
                bool own_images = false;
                if (c >= 0) {
                    pm = tree_com_mass[c];
                    if constexpr (PERIODIC) {
                        shift = nearest_shift(pm, bc);
                        pm = shifted(pm, shift);
                        const float4 box = shifted(tree_boxes[c], shift);
                        accepted = accepts_image(box, pm, tree_s_eff[c], bc, bh, accel_mac, alpha, grav, amin);
                        own_images = box.w > MAX_LEAF_MONOPOLE_HALF;
                    } else {
                        accepted = accepts(tree_boxes[c], pm, tree_s_eff[c], bc, bh, accel_mac, alpha, grav, amin);
                    }
                    if (!accepted) {
                        children = tree_nchild[c];
                        if (children == 0) {
                            leaf_first = tree_first[c];
                            leaf_count = tree_count[c];
                        }
                    }
                    // An accepted cell's correction, or a small opened leaf's.
                    if (PERIODIC && (accepted || (children == 0 && !own_images)))
                        ewald_add_cell(ewald, separation(bc, pm), pm.w, tree_trace[c], ew);
                }
                // Accepted cells join the multipole list.
                const unsigned ballot = __ballot_sync(FULL_MASK, accepted);
                if (accepted) {
                    const int slot = n_cm + __popc(ballot & below);
                    const float2 q0 = cell_quad[3 * c], q1 = cell_quad[3 * c + 1], q2 = cell_quad[3 * c + 2];
                    cm[slot] = pm;
                    qa[slot] = make_float4(q0.x, q0.y, q1.x, q1.y);
                    qb[slot] = make_float4(q2.x, q2.y, tree_trace[c] * eps2, 0.f);
                }
                n_cm += __popc(ballot);
                // Opened internal cells push their children.
                unsigned pushed;
                const unsigned at = top + warp_exclusive_scan(children, lane, &pushed);
                if (top + pushed > (unsigned)stack_cap) {
                    if (lane == 0) atomicOr(&control[1], 1u);
                    return;
                }
                if (children > 0) {
                    const uint4 a = cell_children[2 * c];
                    stack[at] = a.x;
                    if (children > 1) stack[at + 1] = a.y;
                    if (children > 2) stack[at + 2] = a.z;
                    if (children > 3) stack[at + 3] = a.w;
                    if (children > 4) {
                        const uint4 b = cell_children[2 * c + 1];
                        stack[at + 4] = b.x;
                        if (children > 5) stack[at + 5] = b.y;
                        if (children > 6) stack[at + 6] = b.z;
                        if (children > 7) stack[at + 7] = b.w;
                    }
                }
                top += pushed;
                __syncwarp();
                while (n_cm >= 32) {
                    apply_multipoles(32);
                    __syncwarp();
                    if ((int)lane < n_cm - 32) {
                        cm[lane] = cm[32 + lane];
                        qa[lane] = qa[32 + lane];
                        qb[lane] = qb[32 + lane];
                    }
                    n_cm -= 32;
                    __syncwarp();
                }
                // Opened leaves put their particles on the source list, as much as fits,
                // evaluating full batches of 32 in between.
                while (__any_sync(FULL_MASK, leaf_count > 0)) {
                    unsigned total;
                    const int off = warp_exclusive_scan(leaf_count, lane, &total);
                    const int space = LIST_CAP - n_src;
                    const int take = max(0, min((int)leaf_count, space - off));
                    for (int j = 0; j < take; j++) {
                        float4 &slot = src[n_src + off + j];
                        slot = source_image<PERIODIC>(tree_particles[leaf_first + j], own_images,
                                                      shift, bc, ewald, ew);
                        idx[n_src + off + j] = leaf_first + j;
                    }
                    leaf_first += take;
                    leaf_count -= take;
                    n_src += min((int)total, space);
                    __syncwarp();
                    while (n_src >= 32) {
                        apply_sources(32);
                        __syncwarp();
                        if ((int)lane < n_src - 32) {
                            src[lane] = src[32 + lane];
                            idx[lane] = idx[32 + lane];
                        }
                        n_src -= 32;
                        __syncwarp();
                    }
                }
            }
        }
        apply_multipoles(n_cm);
        apply_sources(n_src);
        __syncwarp();   // the lists are reused by the warp's next group
        if constexpr (PERIODIC) {
            ewald_reduce<32>(ew, FULL_MASK);
#pragma unroll
            for (int v = 0; v < HINOKI_V; v++) ewald_apply(ew, bc, x[v], acc[v]);
        }
#pragma unroll
        for (int v = 0; v < HINOKI_V; v++) {
            const int i = first + lane * HINOKI_V + v;
            if ((int)lane * HINOKI_V + v < count) {
                store_result(out, counts, i, acc[v], np, nm, accumulate);  // the target itself included
            }
        }
    }
}

// Take WALK_PARAMETERS (walk.cu).
extern "C" __global__ void __launch_bounds__(LIST_WARPS * 32) walk_list(WALK_PARAMETERS)
{
    walk_list_groups<false>(WALK_ARGUMENTS);
}

extern "C" __global__ void __launch_bounds__(LIST_WARPS * 32) walk_list_periodic(WALK_PARAMETERS)
{
    walk_list_groups<true>(WALK_ARGUMENTS);
}
