// hinoki's GPU walk program for the CPU emulator, in one (V, G) layout: cuda/gravity.cuh,
// periodic.cuh, walk.cu, walk_list.cu, direct.cu and unsort.cu, the program NVRTC compiles (walk_source in
// src/gpu/context.rs), with the table of its kernels registered as kernel@V,G (walk_vg@4,8,
// walk_list@2,32, link_children@2,32, direct@2,32, unsort_results@2,32, ...).
//
// build.rs compiles this file once per layout, each into its own object, with -DHINOKI_V=v
// -DHINOKI_G=g and `-include cuda_emulate.h` (as kernels.cpp), and kernels.cpp gathers the tables
// (hinoki_emu::walk_kernels_V_G). Every unit holds the same names, so each keeps them to itself:
//   - the sources are included in an unnamed namespace, which gives their device functions,
//     templates and __shared__ statics internal linkage (their definitions differ from layout to
//     layout: V and G are compile-time constants);
//   - g++ gives an extern "C" function external linkage under its plain name even in an unnamed
//     namespace, so the kernels are renamed below to kernel_V_G (walk_vg_4_8, ...): otherwise
//     the units' kernels would clash, and worse, the instantiations Entry<&walk_vg>, which name
//     the kernel by that same plain name in every unit, would be merged by the linker into one.
// A kernel added to these sources needs a renaming line and a table line below.

#if !defined(HINOKI_V) || !defined(HINOKI_G)
#error "build.rs compiles walk_layout.cpp with -DHINOKI_V=v -DHINOKI_G=g"
#endif

// name_V_G, with V and G expanded first.
#define HINOKI_LAYOUT_PASTE(name, v, g) name##_##v##_##g
#define HINOKI_LAYOUT_NAME(name, v, g) HINOKI_LAYOUT_PASTE(name, v, g)
#define HINOKI_IN_LAYOUT(name) HINOKI_LAYOUT_NAME(name, HINOKI_V, HINOKI_G)

// The kernels' own names, per layout (a macro does not expand within its own expansion: the
// name inside stays as written).
#define walk_vg HINOKI_IN_LAYOUT(walk_vg)
#define walk_vg_periodic HINOKI_IN_LAYOUT(walk_vg_periodic)
#define periodic_groups HINOKI_IN_LAYOUT(periodic_groups)
#define walk_list HINOKI_IN_LAYOUT(walk_list)
#define walk_list_periodic HINOKI_IN_LAYOUT(walk_list_periodic)
#define link_children HINOKI_IN_LAYOUT(link_children)
#define direct HINOKI_IN_LAYOUT(direct)
#define unsort_results HINOKI_IN_LAYOUT(unsort_results)
#define clear_results HINOKI_IN_LAYOUT(clear_results)
#define mask_inactive HINOKI_IN_LAYOUT(mask_inactive)
#define add_results HINOKI_IN_LAYOUT(add_results)

// walk_vg and walk_list take n_targets without reading it, which g++ warns of under -Wextra.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
namespace {
// cells.cuh, gravity.cuh and periodic.cuh first, as in the NVRTC program; the sources' own
// #include of them is then empty (#pragma once).
#include "../cells.cuh"
#include "../gravity.cuh"
#include "../periodic.cuh"
#include "../walk.cu"
#include "../walk_list.cu"
#include "../direct.cu"
#include "../unsort.cu"
} // namespace
#pragma GCC diagnostic pop

// The name a kernel is launched by: kernel@V,G.
#define HINOKI_LAYOUT_STRING(x) #x
#define HINOKI_LAYOUT_STR(x) HINOKI_LAYOUT_STRING(x)
#define HINOKI_LAYOUT_ENTRY(kernel)                                                              \
    HINOKI_EMULATE_AS(#kernel "@" HINOKI_LAYOUT_STR(HINOKI_V) "," HINOKI_LAYOUT_STR(HINOKI_G),   \
                      kernel)

namespace hinoki_emu {

// This layout's kernels (declared in kernels.cpp).
std::span<const Kernel> HINOKI_IN_LAYOUT(walk_kernels)()
{
    static constexpr Kernel table[] = {
        HINOKI_LAYOUT_ENTRY(walk_vg),
        HINOKI_LAYOUT_ENTRY(walk_vg_periodic),
        HINOKI_LAYOUT_ENTRY(periodic_groups),
        HINOKI_LAYOUT_ENTRY(link_children),
        HINOKI_LAYOUT_ENTRY(walk_list),
        HINOKI_LAYOUT_ENTRY(walk_list_periodic),
        HINOKI_LAYOUT_ENTRY(direct),
        HINOKI_LAYOUT_ENTRY(unsort_results),
        HINOKI_LAYOUT_ENTRY(clear_results),
        HINOKI_LAYOUT_ENTRY(mask_inactive),
        HINOKI_LAYOUT_ENTRY(add_results),
    };
    return table;
}

} // namespace hinoki_emu
