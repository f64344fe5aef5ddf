// Periodic boundaries in the walk kernels: the rules of the periodic walk (issue 16) that
// src/walk/cpu.rs follows too. The tree's frame is the box (period 1): every source is taken at
// its image nearest the target group's centre bc, and the Ewald correction of all its other
// images (src/walk/ewald.rs) is summed per group at bc and carried to each target to first
// order. Accepted cells and small opened leaves take one correction each at their centre of
// mass (with their spread's potential term), the particles of larger opened leaves one each.
#pragma once

// The constants of src/walk/ewald.rs (box units; a test of src/walk/gpu checks them; its
// MAX_ACCEPTED_HALF is in gravity.cuh, with the opening tests that read it):
// a group's targets span at most this half-extent per axis (MAX_GROUP_HALF),
#define MAX_GROUP_HALF (1.0f / 128.0f)
// an opened leaf of at most this half side takes one correction (MAX_LEAF_MONOPOLE_HALF),
#define MAX_LEAF_MONOPOLE_HALF (1.0f / 128.0f)
// the table has this many points per axis over [0, 1/2] (TABLE_POINTS),
#define EWALD_POINTS 65
// and a source taken as one mass adds this times its spread sum m |y|^2 to the potential
// (SPREAD_POTENTIAL = -2 pi / 3, whose doc derives it; the table's interpolation, likewise).
#define EWALD_SPREAD_POTENTIAL -2.09439510f

// The Ewald corrections summed over a group's sources, G = 1: acceleration f, potential psi and
// the Jacobian of f (xx, yy, zz, xy, xz, yz) at the group's centre.
struct EwaldSums {
    float fx, fy, fz, psi;
    float jxx, jyy, jzz, jxy, jxz, jyz;
};

__device__ __forceinline__ EwaldSums ewald_zero()
{
    return EwaldSums{0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
}

// The lattice vector that takes a source at p to its image nearest bc: round(p - bc) per axis
// (half away from zero); the image is at p minus it.
__device__ __forceinline__ float3 nearest_shift(float4 p, float3 bc)
{
    return make_float3(roundf(p.x - bc.x), roundf(p.y - bc.y), roundf(p.z - bc.z));
}

// The separation of the group's centre bc from a source at p (target minus source).
__device__ __forceinline__ float3 separation(float3 bc, float4 p)
{
    return make_float3(bc.x - p.x, bc.y - p.y, bc.z - p.z);
}

// p moved by minus the lattice vector s (its mass kept).
__device__ __forceinline__ float4 shifted(float4 p, float3 s)
{
    return make_float4(p.x - s.x, p.y - s.y, p.z - s.z, p.w);
}

// Adds m times the Ewald correction at separation d = target minus source (each component in
// [-1/2, 1/2], the nearest image) to s: EwaldTable::correction of src/walk/ewald.rs on the same
// float32 table (`table`: 3 float4 per point, [psi fx fy fz] [Jxx Jyy Jzz Jxy] [Jxz Jyz 0 0], x
// the slowest index), trilinear on the octant of |d| with the symmetries' signs, plus the
// Newtonian terms of the six images across the faces.
__device__ __forceinline__ void ewald_add(const float4 *__restrict__ table, float3 d, float m,
                                          EwaldSums &s)
{
    const int n = EWALD_POINTS;
    const float scale = 2.0f * (n - 1);
    const float a[3] = {fabsf(d.x), fabsf(d.y), fabsf(d.z)};
    int base[3];
    float frac[3];
#pragma unroll
    for (int k = 0; k < 3; k++) {
        const float u = fminf(a[k] * scale, (float)(n - 1));
        base[k] = min((int)u, n - 2);
        frac[k] = u - (float)base[k];
    }
    float v[10] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    const float2 *table2 = (const float2 *)table;
#pragma unroll
    for (int corner = 0; corner < 8; corner++) {
        const int cx = corner >> 2 & 1, cy = corner >> 1 & 1, cz = corner & 1;
        const float w = (cx ? frac[0] : 1.f - frac[0]) * (cy ? frac[1] : 1.f - frac[1]) *
                        (cz ? frac[2] : 1.f - frac[2]);
        const int p = ((base[0] + cx) * n + base[1] + cy) * n + base[2] + cz;
        const float4 t0 = table[3 * p], t1 = table[3 * p + 1];
        const float2 t2 = table2[6 * p + 4];
        const float t[10] = {t0.x, t0.y, t0.z, t0.w, t1.x, t1.y, t1.z, t1.w, t2.x, t2.y};
#pragma unroll
        for (int k = 0; k < 10; k++) v[k] += w * t[k];
    }
    // Trilinear interpolation spreads psi over the eight points around d by h^2 sum_k
    // frac_k (1 - frac_k) (h = 1/scale, the spacing): its spread's term is taken off
    // (EwaldTable::correction).
    const float spread =
        frac[0] * (1.f - frac[0]) + frac[1] * (1.f - frac[1]) + frac[2] * (1.f - frac[2]);
    v[0] -= EWALD_SPREAD_POTENTIAL * (1.f / (scale * scale)) * spread;
    // The images across the faces, d -+ e_x, e_y, e_z.
    float psi = v[0], fx = 0.f, fy = 0.f, fz = 0.f;
#pragma unroll
    for (int axis = 0; axis < 3; axis++) {
#pragma unroll
        for (int side = -1; side <= 1; side += 2) {
            const float ex = d.x + (axis == 0 ? side : 0);
            const float ey = d.y + (axis == 1 ? side : 0);
            const float ez = d.z + (axis == 2 ? side : 0);
            const float rinv = rsqrtf(ex * ex + ey * ey + ez * ez);
            const float rinv3 = rinv * rinv * rinv;
            psi -= rinv;
            fx -= ex * rinv3;
            fy -= ey * rinv3;
            fz -= ez * rinv3;
        }
    }
    const float sx = d.x < 0.f ? -1.f : 1.f;
    const float sy = d.y < 0.f ? -1.f : 1.f;
    const float sz = d.z < 0.f ? -1.f : 1.f;
    s.fx += m * (sx * v[1] + fx);
    s.fy += m * (sy * v[2] + fy);
    s.fz += m * (sz * v[3] + fz);
    s.psi += m * psi;
    s.jxx += m * v[4];
    s.jyy += m * v[5];
    s.jzz += m * v[6];
    s.jxy += m * (sx * sy * v[7]);
    s.jxz += m * (sx * sz * v[8]);
    s.jyz += m * (sy * sz * v[9]);
}

// ewald_add for a source of several particles taken as one mass m at its centre of mass (an
// accepted cell, a small opened leaf) with their spread trace = sum m |y|^2 about it: the
// isotropic second-order term of their correction, EWALD_SPREAD_POTENTIAL trace, joins psi.
__device__ __forceinline__ void ewald_add_cell(const float4 *__restrict__ table, float3 d,
                                               float m, float trace, EwaldSums &s)
{
    ewald_add(table, d, m, s);
    s.psi += EWALD_SPREAD_POTENTIAL * trace;
}

// Sums s over the W lanes of `mask` (W a power of two dividing 32, the lanes of one group):
// every lane then holds the group's sums.
template <int W>
__device__ __forceinline__ void ewald_reduce(EwaldSums &s, unsigned mask)
{
    const int width = W;
#pragma unroll
    for (int off = W / 2; off > 0; off >>= 1) {
        s.fx += __shfl_xor_sync(mask, s.fx, off, width);
        s.fy += __shfl_xor_sync(mask, s.fy, off, width);
        s.fz += __shfl_xor_sync(mask, s.fz, off, width);
        s.psi += __shfl_xor_sync(mask, s.psi, off, width);
        s.jxx += __shfl_xor_sync(mask, s.jxx, off, width);
        s.jyy += __shfl_xor_sync(mask, s.jyy, off, width);
        s.jzz += __shfl_xor_sync(mask, s.jzz, off, width);
        s.jxy += __shfl_xor_sync(mask, s.jxy, off, width);
        s.jxz += __shfl_xor_sync(mask, s.jxz, off, width);
        s.jyz += __shfl_xor_sync(mask, s.jyz, off, width);
    }
}

// Adds the group's sums s, taken at its centre bc, to a target at x: f + J delta to its
// acceleration and psi - f.delta - delta.J delta / 2 to its potential, delta = x - bc
// (Correction::at_offset).
__device__ __forceinline__ void ewald_apply(const EwaldSums &s, float3 bc, float3 x, float4 &acc)
{
    const float dx = x.x - bc.x, dy = x.y - bc.y, dz = x.z - bc.z;
    const float jx = s.jxx * dx + s.jxy * dy + s.jxz * dz;
    const float jy = s.jxy * dx + s.jyy * dy + s.jyz * dz;
    const float jz = s.jxz * dx + s.jyz * dy + s.jzz * dz;
    acc.x += s.fx + jx;
    acc.y += s.fy + jy;
    acc.z += s.fz + jz;
    acc.w += s.psi - (s.fx * dx + s.fy * dy + s.fz * dz) - 0.5f * (dx * jx + dy * jy + dz * jz);
}
