// The (V,G) tree walk of seed 001 (Ogiya et al., Sec. 4.1), stackless as in seed 004 (appendix
// A), reading the tree's own arrays: cells in depth-first preorder, where seed 004's "more" of a
// cell is the next cell and its "next" is the cell after its subtree, and the key-sorted
// particles, each leaf owning a contiguous range of them.
//
// Each thread owns V consecutive targets in registers; G consecutive threads (G divides 32) form a
// group that owns one range of at most V*G consecutive targets (a tree cell, src/walk/groups.rs)
// and walks the tree once, taking every opening decision together. The group first reduces its targets' bounding box (and smallest previous acceleration)
// with __shfl_xor_sync over the group's lanes only (a mask of its own G lanes: with independent
// thread scheduling on Volta and later, other groups of the same warp may be elsewhere in the
// walk). After that every lane evaluates the same criterion on the same numbers, so the group
// stays converged without further communication. The criterion is the CPU grouped walk's
// (src/walk/mac.rs): a cell is accepted when it does not overlap the group's box and its centre of
// mass is far enough from the box (d_min^2 > S_eff), or, for the acceleration criterion,
// G M l^2 < alpha |a|_min d_min^4. The minimum distance from the box is never larger than the
// minimum over the particles that seed 001 reduces per node, so the decision is the same or more
// conservative, at no per-node shuffle.
//
// V and G are compile-time constants (NVRTC defines HINOKI_V, HINOKI_G).
// Output per target: (ax, ay, az, phi) with G = 1, and the p2p and m2p counts.
//
// In a periodic box (walk_vg_periodic, periodic.cuh) every cell is tested at its image nearest
// the group and the group's lanes all sum the same Ewald corrections (their decisions are the
// same; their loads of one table entry are one transaction), so no reduction is needed. The
// groups are first cut to the size the periodic walk needs (periodic_groups, below).

#ifndef HINOKI_V
#define HINOKI_V 1
#endif
#ifndef HINOKI_G
#define HINOKI_G 32
#endif
#define V HINOKI_V
#define G HINOKI_G

#include "gravity.cuh"
#include "periodic.cuh"

// The arguments of walk_vg and walk_list (the list kernel's own at the end; walk_vg reads none
// of them).
struct RUST_TWIN WalkArgs {
    // The walked tree (its level and parent are not read).
    TreeArrays tree;
    // Its cells.
    int n_cells;
    // walk_list: per cell, 8 child slots (link_children), as 2 uint4.
    const unsigned *children;
    // Per target: position, |a_old|.
    const float4 *targets;
    // Targets.
    int n_targets;
    // Which particle each target is (own_particle in gravity.cuh).
    int own_kind;
    // For own_kind 2: per target, its particle.
    const unsigned *own;
    // Per group: first target, count (at most V*G, or 32 V for walk_list).
    const uint2 *groups;
    // Groups.
    int n_groups;
    // Softening squared.
    float eps2;
    // 1: quadrupole terms; 0: monopoles.
    int quadrupole;
    // 1: the acceleration criterion; 0: S_eff.
    int accel_mac;
    // The acceleration criterion's alpha.
    float alpha;
    // The gravitational constant the acceleration criterion uses.
    float grav;
    // The periodic kernels: the Ewald table, 3 per point (src/walk/ewald.rs); null for the others.
    const float4 *ewald;
    // Per target: acceleration, potential.
    float4 *out;
    // Per target: p2p, m2p interaction counts.
    uint2 *counts;
    // 1: add to out and counts instead of writing them.
    int accumulate;
    // walk_list: entries of each warp's stack.
    int stack_cap;
    // walk_list: [0] the next group to take, [1] a stack-overflow flag.
    unsigned *control;
    // walk_list: per warp, stack_cap cell indices.
    unsigned *stacks;
};

// The walk kernels' parameters are the fields of WalkArgs, one by one and restrict-qualified
// (NVVM honours __restrict__ only on kernel parameters); build.rs checks them against the
// struct, whose bytes the launch passes as the parameter buffer.
#define WALK_PARAMETERS                                                                                      \
    const float4 *__restrict__ tree_particles,  /* sorted particles: position, mass */                \
    const unsigned *__restrict__ tree_first,  /* per cell: first particle */                          \
    const unsigned *__restrict__ tree_count,  /* per cell: particles */                               \
    const unsigned char *__restrict__ tree_level,  /* (not read) */                                   \
    const unsigned char *__restrict__ tree_nchild,  /* per cell: children (0: a leaf) */              \
    const unsigned *__restrict__ tree_subtree,  /* per cell: cells in its subtree, itself included */ \
    const float4 *__restrict__ tree_boxes,  /* per cell: geometric centre, half side */               \
    const float4 *__restrict__ tree_com_mass,  /* per cell: centre of mass, mass */                   \
    const float *__restrict__ tree_quad,  /* per cell: xx, yy, zz, xy, xz, yz */                      \
    const float *__restrict__ tree_trace,  /* per cell: sum m |y|^2 */                                \
    const float *__restrict__ tree_s_eff,  /* per cell: S_eff */                                      \
    const unsigned *__restrict__ tree_parent,  /* (not read) */                                       \
    int n_cells,                                                                                      \
    const unsigned *__restrict__ children,  /* walk_list: per cell, 8 child slots */                  \
    const float4 *__restrict__ targets,  /* per target: position, |a_old| */                          \
    int n_targets,                                                                                    \
    int own_kind,  /* which particle each target is (own_particle) */                                 \
    const unsigned *__restrict__ own,  /* for own_kind 2: per target, its particle */                 \
    const uint2 *__restrict__ groups,  /* per group: first target, count */                           \
    int n_groups,                                                                                     \
    float eps2, int quadrupole, int accel_mac, float alpha, float grav,                               \
    const float4 *__restrict__ ewald,  /* periodic kernels: the Ewald table, 3 per point */           \
    float4 *__restrict__ out,  /* per target: acceleration, potential */                              \
    uint2 *__restrict__ counts,  /* per target: p2p, m2p */                                           \
    int accumulate,  /* add to out and counts instead of writing */                                   \
    int stack_cap,  /* walk_list: entries of each warp's stack */                                     \
    unsigned *__restrict__ control,  /* walk_list: next group, stack overflow */                      \
    unsigned *__restrict__ stacks  /* walk_list: per warp, stack_cap cell indices */

// A kernel passes its parameters on to the walk of its kind, whose
// arguments are the fields of WalkArgs by their names in WALK_PARAMETERS (build.rs checks them).
#define WALK_ARGUMENTS                                                                            \
    tree_particles, tree_first, tree_count, tree_level, tree_nchild, tree_subtree, tree_boxes,  \
    tree_com_mass, tree_quad, tree_trace, tree_s_eff, tree_parent, n_cells, children, targets,  \
    n_targets, own_kind, own, groups, n_groups, eps2, quadrupole, accel_mac, alpha, grav,       \
    ewald, out, counts, accumulate, stack_cap, control, stacks

// The walk of one group by its G threads, with open boundaries or (PERIODIC) in the periodic
// box: one template, compiled into a kernel of each kind (walk_vg, walk_vg_periodic), so that
// the open walk's code and registers are those it had without the periodic one.
template <bool PERIODIC>
__device__ __forceinline__ void walk_vg_group(WALK_PARAMETERS)
{
    const float2 *cell_quad = (const float2 *)tree_quad;  // (xx,yy), (zz,xy), (xz,yz)
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int group = tid / G;
    if (group >= n_groups) return;             // the whole group leaves together
    const uint2 range = groups[group];
    const int first = range.x;
    const int count = range.y;
    const int lane = tid % G;
    const unsigned lane_in_warp = threadIdx.x & 31u;
    const unsigned mask = (0xffffffffu >> (32 - G)) << (lane_in_warp & ~(unsigned)(G - 1));

    float3 x[V], bc, bh;
    float amin;
    load_group<V, G>(targets, first, count, lane, mask, x, bc, bh, amin);

    float4 acc[V];
    unsigned me[V];
#pragma unroll
    for (int v = 0; v < V; v++) {
        acc[v] = make_float4(0.f, 0.f, 0.f, 0.f);
        me[v] = own_particle(own_kind, own, first + min(lane * V + v, count - 1));
    }
    unsigned np = 0, nm = 0;
    EwaldSums ew = ewald_zero();   // PERIODIC: the group's Ewald corrections

    // Cells are in depth-first preorder: opening a cell goes to c + 1 (its first child),
    // accepting it skips its subtree to c + subtree[c] (the "more" and "next" of seed 004).
    int c = 0;
    while (c < n_cells) {
        float4 pm = tree_com_mass[c];
        float4 box = tree_boxes[c];
        float3 shift = make_float3(0.f, 0.f, 0.f);
        bool accepted;
        if constexpr (PERIODIC) {
            // The cell's image nearest the group.
            shift = nearest_shift(pm, bc);
            pm = shifted(pm, shift);
            box = shifted(box, shift);
            accepted = accepts_image(box, pm, tree_s_eff[c], bc, bh, accel_mac, alpha, grav, amin);
        } else {
            accepted = accepts(box, pm, tree_s_eff[c], bc, bh, accel_mac, alpha, grav, amin);
        }
        if (accepted) {
            const float2 q0 = cell_quad[3 * c], q1 = cell_quad[3 * c + 1], q2 = cell_quad[3 * c + 2];
            const float4 qa = make_float4(q0.x, q0.y, q1.x, q1.y);
            const float tr = tree_trace[c] * eps2;
#pragma unroll
            for (int v = 0; v < V; v++) m2p(x[v], pm, qa, q2, tr, eps2, quadrupole, acc[v]);
            if constexpr (PERIODIC) ewald_add_cell(ewald, separation(bc, pm), pm.w, tree_trace[c], ew);
            nm++;
            c += tree_subtree[c];
            continue;
        }
        if (tree_nchild[c] == 0) {
            // An opened leaf: its particles are a contiguous range, read with independent loads.
            // A periodic walk takes a small leaf's particles at the leaf's image and its
            // correction at its centre of mass, a larger one's each at its own nearest image.
            const bool own_images = PERIODIC && box.w > MAX_LEAF_MONOPOLE_HALF;
            if constexpr (PERIODIC) {
                if (!own_images) ewald_add_cell(ewald, separation(bc, pm), pm.w, tree_trace[c], ew);
            }
            const int j0 = tree_first[c];
            const int nl = tree_count[c];
#pragma unroll 4
            for (int j = j0; j < j0 + nl; j++) {
                float4 pj = tree_particles[j];
                if constexpr (PERIODIC) {
                    pj = shifted(pj, own_images ? nearest_shift(pj, bc) : shift);
                    if (own_images) ewald_add(ewald, separation(bc, pj), pj.w, ew);
                }
#pragma unroll
                for (int v = 0; v < V; v++) p2p(x[v], pj, eps2, (unsigned)j != me[v], acc[v]);
            }
            np += nl;
        }
        c += 1;
    }
    if constexpr (PERIODIC) {
#pragma unroll
        for (int v = 0; v < V; v++) ewald_apply(ew, bc, x[v], acc[v]);
    }
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int i = first + lane * V + v;
        if (lane * V + v < count) {
            store_result(out, counts, i, acc[v], np, nm, accumulate);  // the target itself included
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) walk_vg(WALK_PARAMETERS)
{
    walk_vg_group<false>(WALK_ARGUMENTS);
}

extern "C" __global__ void __launch_bounds__(128) walk_vg_periodic(WALK_PARAMETERS)
{
    walk_vg_group<true>(WALK_ARGUMENTS);
}

struct RUST_TWIN PeriodicGroupsArgs {
    // Per target: position, |a_old|.
    const float4 *targets;
    // The walk's groups: first target, count.
    const uint2 *groups;
    // Groups.
    int n_groups;
    // The groups of the periodic walk: first target, count (room for one per target).
    uint2 *pieces;
    // How many pieces there are (zero on entry).
    unsigned *count;
};

// The groups of a periodic walk (rule 1, periodic.cuh): every group cut into consecutive pieces
// whose targets' bounding box has a half-extent of at most MAX_GROUP_HALF on every axis, or one
// target, each piece as long as it stays so (the fewest pieces). They are appended in any order:
// a walk's result for a target depends only on the group that holds it.
extern "C" __global__ void __launch_bounds__(128) periodic_groups(const PeriodicGroupsArgs a)
{
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= a.n_groups) return;
    const uint2 range = a.groups[g];
    const unsigned end = range.x + range.y;
    unsigned start = range.x;
    float4 t = a.targets[start];
    float lo[3] = {t.x, t.y, t.z}, hi[3] = {t.x, t.y, t.z};
    for (unsigned i = start + 1; i <= end; i++) {
        bool cut = i == end;
        if (!cut) {
            t = a.targets[i];
            const float p[3] = {t.x, t.y, t.z};
            float nlo[3], nhi[3];
            for (int k = 0; k < 3; k++) {
                nlo[k] = fminf(lo[k], p[k]);
                nhi[k] = fmaxf(hi[k], p[k]);
                cut = cut || 0.5f * (nhi[k] - nlo[k]) > MAX_GROUP_HALF;
            }
            if (!cut) {
                for (int k = 0; k < 3; k++) {
                    lo[k] = nlo[k];
                    hi[k] = nhi[k];
                }
                continue;
            }
            for (int k = 0; k < 3; k++) lo[k] = hi[k] = p[k];
        }
        a.pieces[atomicAdd(a.count, 1u)] = make_uint2(start, i - start);
        start = i;
    }
}
