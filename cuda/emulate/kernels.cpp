// The kernels the CPU emulator knows: the sources of its own table, included into this one
// translation unit, that table, and the list of all tables (hinoki_emu::kernel_tables, read by
// runtime.cpp), which adds one table per (V, G) layout of the walk program (walk_layout.cpp).
//
// build.rs compiles this file with `-include cuda_emulate.h`: every source below sees the shim
// first, as NVRTC gives a program CUDA's built-ins without any #include. The sources share this
// one unit (on a GPU they are programs of their own), so their kernels, device functions, globals
// and macros need distinct names across them. Define, before its #include, any macro a source
// takes from NVRTC's options (-D...). build.rs also defines HINOKI_WALK_LAYOUTS, the layouts it
// compiles walk_layout.cpp for, as HINOKI_LAYOUT(v, g) HINOKI_LAYOUT(v, g) ...
//
// To add a kernel: #include its source below, and add HINOKI_EMULATE(name) to the table. It
// takes its argument block (a struct), or pointers, int, unsigned, unsigned long long, float or
// double (anything else fails to compile here); a launch hands it the block's bytes as a GPU's
// parameter buffer would. A kernel of the walk program goes into walk_layout.cpp instead; a
// layout, into build.rs's list.

#include "selftest.cu"

// Kernels that take the fields of a shared block as parameters (build.cu's *_PARAMETERS) do not
// all read every one of them, which g++ warns of under -Wextra.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "../cells.cuh"
#include "../gravity.cuh"
#include "../build.cu"
#include "../groups.cu"
#include "../particles.cu"
#include "../domain.cu"
#include "../lets.cu"
#include "../union.cu"
#include "../integrate.cu"
#pragma GCC diagnostic pop

#ifndef HINOKI_WALK_LAYOUTS
#error "build.rs compiles kernels.cpp with -DHINOKI_WALK_LAYOUTS=..."
#endif

namespace hinoki_emu {

// The table of each layout (walk_layout.cpp).
#define HINOKI_LAYOUT(v, g) std::span<const Kernel> walk_kernels_##v##_##g();
HINOKI_WALK_LAYOUTS
#undef HINOKI_LAYOUT

std::span<const std::span<const Kernel>> kernel_tables()
{
    static constexpr Kernel own[] = {
        // selftest.cu
        HINOKI_EMULATE(selftest_block_scan),
        HINOKI_EMULATE(selftest_histogram),
        HINOKI_EMULATE(selftest_warp_rank),
        HINOKI_EMULATE(selftest_vote),
        HINOKI_EMULATE(selftest_warp_ops),
        HINOKI_EMULATE(selftest_early_exit),
        HINOKI_EMULATE(selftest_atomics),
        HINOKI_EMULATE(selftest_args),
        HINOKI_EMULATE(selftest_axpy),
        HINOKI_EMULATE(selftest_divergent_barrier),
        HINOKI_EMULATE(selftest_mixed_warp_ops),
        HINOKI_EMULATE(selftest_half_warps),
        HINOKI_EMULATE(selftest_group_ops),
        HINOKI_EMULATE(selftest_mismatched_masks),
        // build.cu (the GPU tree build and refit, src/tree/build_gpu.rs; scans, src/gpu/stages.rs)
        HINOKI_EMULATE(sample_positions),
        HINOKI_EMULATE(to_frame),
        HINOKI_EMULATE(tree_keys),
        HINOKI_EMULATE(scan_chained),
        HINOKI_EMULATE(radix_digit_counts),
        HINOKI_EMULATE(radix_onesweep),
        HINOKI_EMULATE(gather_particles),
        HINOKI_EMULATE(closest_pair),
        HINOKI_EMULATE(pair_record),
        HINOKI_EMULATE(crowded_leaves),
        HINOKI_EMULATE(tree_root),
        HINOKI_EMULATE(split_level),
        HINOKI_EMULATE(subtree_sizes),
        HINOKI_EMULATE(preorder_children),
        HINOKI_EMULATE(cell_parents),
        HINOKI_EMULATE(cell_moments),
        HINOKI_EMULATE(cell_moments_warp),
        HINOKI_EMULATE(store_cells),
        HINOKI_EMULATE(refit_particles),
        HINOKI_EMULATE(cell_bounds),
        HINOKI_EMULATE(refit_cells),
        // groups.cu (targets and groups on the device, src/walk/groups_gpu.rs)
        HINOKI_EMULATE(group_starts),
        HINOKI_EMULATE(group_levels),
        HINOKI_EMULATE(group_width),
        HINOKI_EMULATE(emit_groups),
        HINOKI_EMULATE(gather_targets),
        HINOKI_EMULATE(chunk_extents),
        HINOKI_EMULATE(chunk_limit),
        HINOKI_EMULATE(chunk_pieces),
        HINOKI_EMULATE(emit_pieces),
        HINOKI_EMULATE(input_targets),
        HINOKI_EMULATE(invert_order),
        HINOKI_EMULATE(chunk_groups),
        HINOKI_EMULATE(active_groups),
        HINOKI_EMULATE(keep_groups),
        HINOKI_EMULATE(bootstrap_amag),
        // particles.cu (the particles on the device, src/backend/gpu/store.rs)
        HINOKI_EMULATE(particle_bounds),
        HINOKI_EMULATE(pack_particles),
        HINOKI_EMULATE(unpack_particles),
        // domain.cu (domain decomposition, src/domain/gpu.rs)
        HINOKI_EMULATE(domain_keys),
        HINOKI_EMULATE(domain_samples),
        HINOKI_EMULATE(domain_owners),
        HINOKI_EMULATE(domain_leaving),
        HINOKI_EMULATE(domain_keep),
        // lets.cu (LETs, src/lets/export_gpu.rs)
        HINOKI_EMULATE(region_cells),
        HINOKI_EMULATE(region_list),
        HINOKI_EMULATE(region_boxes),
        HINOKI_EMULATE(targets_amin),
        HINOKI_EMULATE(let_fates),
        HINOKI_EMULATE(let_sent),
        HINOKI_EMULATE(let_edges),
        HINOKI_EMULATE(let_pack),
        HINOKI_EMULATE(let_unpack),
        // union.cu (the local tree and the LETs merged, src/lets/union_gpu.rs)
        HINOKI_EMULATE(union_local_keys),
        HINOKI_EMULATE(union_insert),
        HINOKI_EMULATE(union_local_match),
        HINOKI_EMULATE(union_leaders),
        HINOKI_EMULATE(union_groups),
        HINOKI_EMULATE(union_members),
        HINOKI_EMULATE(union_count),
        HINOKI_EMULATE(union_summary),
        HINOKI_EMULATE(union_copy),
        HINOKI_EMULATE(union_cells),
        // integrate.cu (the time step, src/integrate/state_gpu.rs)
        HINOKI_EMULATE(synchronised_flags),
        HINOKI_EMULATE(half_kick),
        HINOKI_EMULATE(drift),
        HINOKI_EMULATE(add_background),
        HINOKI_EMULATE(keep_forces),
        HINOKI_EMULATE(acc_magnitudes),
        HINOKI_EMULATE(assign_bins),
        HINOKI_EMULATE(bin_summary),
        HINOKI_EMULATE(conserved_sums),
        HINOKI_EMULATE(first_non_finite),
        HINOKI_EMULATE(particle_record),
    };
#define HINOKI_LAYOUT(v, g) walk_kernels_##v##_##g(),
    static const std::span<const Kernel> tables[] = {own, HINOKI_WALK_LAYOUTS};
#undef HINOKI_LAYOUT
    return tables;
}

} // namespace hinoki_emu
