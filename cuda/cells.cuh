// The tree as every kernel sees it: where its sorted particles and its cells' arrays lie on the
// device. Cells are in depth-first preorder (root 0): opening cell c goes to c + 1, accepting it
// to c + subtree[c], and each cell owns the particles first[c] .. first[c] + count[c].
//
// Kernels take their arguments as one struct each (`struct RUST_TWIN Name`, defined next to the
// kernel); build.rs gives each a Rust twin of the same fields (src/gpu/args.rs), which the
// launches fill by name. The host's and the device's cell arrays are one generic definition in
// src/tree/cells.rs whose `arrays()` fills TreeArrays: a field added here does not compile
// until it is added there too.
#pragma once

// Marks a struct that build.rs gives a Rust twin (build/twins.rs: one field per line, each with
// a comment).
#define RUST_TWIN

// The parent of the root (TreeArrays::parent).
#define NO_PARENT 0xffffffffu

struct RUST_TWIN TreeArrays {
    // Sorted particles: position in the frame (x, y, z) and mass.
    float4 *particles;
    // Per cell: first particle.
    unsigned *first;
    // Per cell: number of particles.
    unsigned *count;
    // Per cell: tree level (root 0).
    unsigned char *level;
    // Per cell: number of children (0: a leaf).
    unsigned char *nchild;
    // Per cell: cells in its subtree, itself included.
    unsigned *subtree;
    // Per cell: box centre (x, y, z) and half side.
    float4 *boxes;
    // Per cell: centre of mass (x, y, z) and mass.
    float4 *com_mass;
    // Per cell: traceless quadrupole (xx, yy, zz, xy, xz, yz).
    float *quad;
    // Per cell: sum of m |y|^2 about the centre of mass.
    float *trace;
    // Per cell: squared effective opening radius S_eff (accept when d^2 > S_eff).
    float *s_eff;
    // Per cell: its parent (NO_PARENT for the root); null where a tree keeps none.
    unsigned *parent;
};

// The float32 frame of a job (src/sfc/frame.rs): a position x (length units, float64) is at
// r = (x - centre) * scale in it, folded to r - floor(r + 1/2) in a periodic frame, rounded to
// float32 (frame_coord in build.cu).
struct RUST_TWIN FrameMap {
    // The frame's centre, x (length units).
    double cx;
    // The frame's centre, y (length units).
    double cy;
    // The frame's centre, z (length units).
    double cz;
    // 1 / the side of the frame's cube (1 / length units).
    double scale;
    // 1: a periodic box centred at the centre (positions folded to their nearest image); 0: not.
    long long periodic;
};
