// The kernels the CPU emulator knows: their CUDA sources, included into this one translation
// unit, and the table that names them (hinoki_emu::kernels, read by runtime.cpp).
//
// build.rs compiles this file with `-include cuda_emulate.h`: every source below sees the shim
// first, as NVRTC gives a program CUDA's built-ins without any #include. The sources share this
// unit as hinoki's kernels share one NVRTC program (src/walk/gpu/device.rs), so their kernels,
// device functions, globals and macros need distinct names across them. Define, before its
// #include, any macro a source takes from NVRTC's options (-D...).
//
// To add a kernel: #include its source below, and add HINOKI_EMULATE(name) to the table. Its
// parameters must be pointers, int, unsigned, unsigned long long, float or double (the kinds of
// a launch argument; anything else fails to compile here).

#include "selftest.cu"

#include "../build.cu"

std::span<const hinoki_emu::Kernel> hinoki_emu::kernels()
{
    static constexpr Kernel table[] = {
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
        // build.cu (the GPU tree build, src/walk/gpu/build.rs)
        HINOKI_EMULATE(tree_keys),
        HINOKI_EMULATE(scan_tiles),
        HINOKI_EMULATE(scan_add),
        HINOKI_EMULATE(radix_digit_counts),
        HINOKI_EMULATE(radix_tile_counts),
        HINOKI_EMULATE(radix_scatter),
        HINOKI_EMULATE(gather_particles),
        HINOKI_EMULATE(tree_root),
        HINOKI_EMULATE(split_octants),
        HINOKI_EMULATE(split_emit),
        HINOKI_EMULATE(subtree_sizes),
        HINOKI_EMULATE(preorder_children),
        HINOKI_EMULATE(cell_moments),
        HINOKI_EMULATE(store_cells),
    };
    return table;
}
