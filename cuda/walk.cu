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

#ifndef HINOKI_V
#define HINOKI_V 1
#endif
#ifndef HINOKI_G
#define HINOKI_G 32
#endif
#define V HINOKI_V
#define G HINOKI_G

#include "gravity.cuh"

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
    float4 *__restrict__ out,  /* per target: acceleration, potential */                              \
    uint2 *__restrict__ counts,  /* per target: p2p, m2p */                                           \
    int accumulate,  /* add to out and counts instead of writing */                                   \
    int stack_cap,  /* walk_list: entries of each warp's stack */                                     \
    unsigned *__restrict__ control,  /* walk_list: next group, stack overflow */                      \
    unsigned *__restrict__ stacks  /* walk_list: per warp, stack_cap cell indices */

extern "C" __global__ void __launch_bounds__(128) walk_vg(WALK_PARAMETERS)
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
    const unsigned mask = (G == 32) ? 0xffffffffu
                                    : (((1u << G) - 1u) << (lane_in_warp & ~(unsigned)(G - 1)));

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

    // Cells are in depth-first preorder: opening a cell goes to c + 1 (its first child),
    // accepting it skips its subtree to c + subtree[c] (the "more" and "next" of seed 004).
    int c = 0;
    while (c < n_cells) {
        const float4 pm = tree_com_mass[c];
        const float4 box = tree_boxes[c];
        if (accepts(box, pm, tree_s_eff[c], bc, bh, accel_mac, alpha, grav, amin)) {
            const float2 q0 = cell_quad[3 * c], q1 = cell_quad[3 * c + 1], q2 = cell_quad[3 * c + 2];
            const float4 qa = make_float4(q0.x, q0.y, q1.x, q1.y);
            const float tr = tree_trace[c] * eps2;
#pragma unroll
            for (int v = 0; v < V; v++) m2p(x[v], pm, qa, q2, tr, eps2, quadrupole, acc[v]);
            nm++;
            c += tree_subtree[c];
            continue;
        }
        if (tree_nchild[c] == 0) {
            // An opened leaf: its particles are a contiguous range, read with independent loads.
            const int j0 = tree_first[c];
            const int nl = tree_count[c];
#pragma unroll 4
            for (int j = j0; j < j0 + nl; j++) {
                const float4 pj = tree_particles[j];
#pragma unroll
                for (int v = 0; v < V; v++) p2p(x[v], pj, eps2, (unsigned)j != me[v], acc[v]);
            }
            np += nl;
        }
        c += 1;
    }
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int i = first + lane * V + v;
        if (lane * V + v < count) {
            store_result(out, counts, i, acc[v], np, nm, accumulate);  // the target itself included
        }
    }
}
