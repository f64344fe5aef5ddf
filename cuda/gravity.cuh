// Device functions shared by the walk and direct-summation kernels: the softened interactions,
// the cell-acceptance test and the loading of a target group. They compute the formulas of src/walk/kernels.rs and
// src/walk/mac.rs (in fused multiply-adds), so that the GPU and CPU walks take the same
// decisions on the same tree.
#pragma once

#define HINOKI_INF __int_as_float(0x7f800000)

// The particle of the walked tree that target t is (its index among the tree's sorted
// particles), so that its sums leave out only itself: own_kind 0, none (a forest of LETs never
// holds a target); 1, particle t (targets in the tree's order); 2, particle own[t].
#define NOT_OWN 0xffffffffu
__device__ __forceinline__ unsigned own_particle(int own_kind, const unsigned *__restrict__ own,
                                                 int t)
{
    return own_kind == 0 ? NOT_OWN : own_kind == 1 ? (unsigned)t : own[t];
}

// Point mass src (x, y, z, m) on a target at x: adds m d / r^3 and -m / r, r^2 = |d|^2 + eps2,
// unless the source is the target itself (`other` false, by index as on the CPU: coincident
// particles feel each other's softened potential) or r = 0 (coincident without softening,
// where the potential is not defined).
__device__ __forceinline__ void p2p(float3 x, float4 src, float eps2, bool other, float4 &acc)
{
    const float dx = src.x - x.x, dy = src.y - x.y, dz = src.z - x.z;
    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
    const float rinv = other && r2 > 0.f ? rsqrtf(r2) : 0.f;
    const float mr = src.w * rinv;
    const float mr3 = mr * rinv * rinv;
    acc.x += dx * mr3;
    acc.y += dy * mr3;
    acc.z += dz * mr3;
    acc.w -= mr;
}

// Cell (centre of mass, mass; traceless quadrupole qa = xx yy zz xy, qb = xz yz; trace_eps2
// = eps^2 sum m |y|^2) on a target, with the softened second-order term d.Q.d - trace eps^2.
// Callers pass `quadrupole` as a constant where they can, so each loop is compiled for one
// order.
__device__ __forceinline__ void m2p(float3 x, float4 cm, float4 qa, float2 qb, float trace_eps2,
                                    float eps2, bool quadrupole, float4 &acc)
{
    const float dx = cm.x - x.x, dy = cm.y - x.y, dz = cm.z - x.z;
    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
    const float rinv = rsqrtf(r2);
    const float rinv2 = rinv * rinv;
    const float mr = cm.w * rinv;
    const float mr3 = mr * rinv2;
    if (!quadrupole) {
        acc.x += dx * mr3;
        acc.y += dy * mr3;
        acc.z += dz * mr3;
        acc.w -= mr;
        return;
    }
    const float qx = qa.x * dx + qa.w * dy + qb.x * dz;
    const float qy = qa.w * dx + qa.y * dy + qb.y * dz;
    const float qz = qb.x * dx + qb.y * dy + qa.z * dz;
    const float dqd = fmaf(dx, qx, fmaf(dy, qy, fmaf(dz, qz, -trace_eps2)));
    const float rinv5 = rinv2 * rinv2 * rinv;
    const float radial = mr3 + 2.5f * dqd * rinv5 * rinv2;
    acc.x += dx * radial - qx * rinv5;
    acc.y += dy * radial - qy * rinv5;
    acc.z += dz * radial - qz * rinv5;
    acc.w += -mr - 0.5f * dqd * rinv5;
}

// A periodic walk never accepts a cell of a larger half side (box units; MAX_ACCEPTED_HALF of
// src/walk/ewald.rs, which a test of src/walk/gpu checks).
#define MAX_ACCEPTED_HALF (1.0f / 16.0f)

// The criterion proper (Criterion::accepts_at of src/walk/mac.rs) for a cell of half side w and
// mass m at squared distance d2 from the targets' box, whose overlap is already excluded.
__device__ __forceinline__ bool accepts_at(float w, float m, float s_eff, float d2, int accel_mac,
                                           float alpha, float grav, float amin)
{
    if (accel_mac) {
        const float l2 = 4.f * w * w;
        return grav * m * l2 < alpha * amin * d2 * d2;
    }
    return d2 > s_eff;
}

// The test of Criterion::accepts_box for a cell (box: centre, half side; cm: centre of mass,
// mass) and a target box (centre bc, half-extents bh), `distance` taking a separation along an
// axis (cell minus targets' centre) to the distance that counts (|x|, or to the nearest image):
// never accept a cell whose box overlaps the targets' box.
template <typename Distance>
__device__ __forceinline__ bool accepts_box(float4 box, float4 cm, float s_eff, float3 bc,
                                            float3 bh, int accel_mac, float alpha, float grav,
                                            float amin, Distance distance)
{
    if (distance(box.x - bc.x) <= box.w + bh.x && distance(box.y - bc.y) <= box.w + bh.y &&
        distance(box.z - bc.z) <= box.w + bh.z)
        return false;
    const float ex = fmaxf(distance(cm.x - bc.x) - bh.x, 0.f);
    const float ey = fmaxf(distance(cm.y - bc.y) - bh.y, 0.f);
    const float ez = fmaxf(distance(cm.z - bc.z) - bh.z, 0.f);
    const float d2 = ex * ex + ey * ey + ez * ez;
    return accepts_at(box.w, cm.w, s_eff, d2, accel_mac, alpha, grav, amin);
}

// The distances of accepts_box: along an axis, and to the nearest image of a period 1.
struct AxisDistance {
    __device__ __forceinline__ float operator()(float x) const { return fabsf(x); }
};
struct ImageDistance {
    __device__ __forceinline__ float operator()(float x) const { return fabsf(x - roundf(x)); }
};

// The opening test of src/walk/mac.rs (Criterion::accepts) for a target box (centre bc,
// half-extents bh).
__device__ __forceinline__ bool accepts(float4 box, float4 cm, float s_eff, float3 bc, float3 bh,
                                        int accel_mac, float alpha, float grav, float amin)
{
    if (s_eff < 0.f) return true;  // a LET multipole its sender checked for all our targets
    return accepts_box(box, cm, s_eff, bc, bh, accel_mac, alpha, grav, amin, AxisDistance{});
}

// The rules of a periodic walk (frame units, period 1) around accepts_box: a LET multipole its
// sender accepted for us (s_eff < 0) is accepted, a cell of half side above MAX_ACCEPTED_HALF
// opened.
template <typename Distance>
__device__ __forceinline__ bool accepts_in_box(float4 box, float4 cm, float s_eff, float3 bc,
                                               float3 bh, int accel_mac, float alpha, float grav,
                                               float amin, Distance distance)
{
    if (s_eff < 0.f) return true;
    if (box.w > MAX_ACCEPTED_HALF) return false;
    return accepts_box(box, cm, s_eff, bc, bh, accel_mac, alpha, grav, amin, distance);
}

// The periodic walk's test of a cell already moved to its image nearest the group (box and cm;
// Criterion::accepts_image).
__device__ __forceinline__ bool accepts_image(float4 box, float4 cm, float s_eff, float3 bc,
                                              float3 bh, int accel_mac, float alpha, float grav,
                                              float amin)
{
    return accepts_in_box(box, cm, s_eff, bc, bh, accel_mac, alpha, grav, amin, AxisDistance{});
}

// The periodic test of a cell for a whole box of targets (Criterion::accepts_periodic, the LET
// export's): the separations folded to the nearest image per axis, so that a cell accepted for
// the box is accepted for every group inside it whatever image the group takes.
__device__ __forceinline__ bool accepts_periodic(float4 box, float4 cm, float s_eff, float3 bc,
                                                 float3 bh, int accel_mac, float alpha,
                                                 float grav, float amin)
{
    return accepts_in_box(box, cm, s_eff, bc, bh, accel_mac, alpha, grav, amin, ImageDistance{});
}

// Writes target i's walk result (acceleration and potential, interaction counts), or adds it
// to what an earlier walk left there (the forest of LETs after the local tree).
__device__ __forceinline__ void store_result(float4 *__restrict__ out, uint2 *__restrict__ counts,
                                             int i, float4 acc, unsigned np, unsigned nm,
                                             int accumulate)
{
    if (accumulate) {
        const float4 o = out[i];
        const uint2 k = counts[i];
        out[i] = make_float4(o.x + acc.x, o.y + acc.y, o.z + acc.z, o.w + acc.w);
        counts[i] = make_uint2(k.x + np, k.y + nm);
    } else {
        out[i] = acc;
        counts[i] = make_uint2(np, nm);
    }
}

// Loads this lane's targets of one group, [first, first + count), NV per lane over NG lanes
// (lanes past the end repeat the last target), into x, and reduces over the group's lanes (the
// NG lanes of `mask`) its bounding box, centre bc and half-extents bh, and the smallest
// previous |a| of its targets, amin. Every lane of the group then holds the same bc, bh, amin.
template <int NV, int NG>
__device__ __forceinline__ void load_group(const float4 *__restrict__ targets, int first,
                                           int count, int lane, unsigned mask,
                                           float3 (&x)[NV], float3 &bc, float3 &bh, float &amin)
{
    float lo[3] = {HINOKI_INF, HINOKI_INF, HINOKI_INF};
    float hi[3] = {-HINOKI_INF, -HINOKI_INF, -HINOKI_INF};
    amin = HINOKI_INF;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int i = first + min(lane * NV + v, count - 1);
        const float4 t = targets[i];
        x[v] = make_float3(t.x, t.y, t.z);
        lo[0] = fminf(lo[0], t.x); hi[0] = fmaxf(hi[0], t.x);
        lo[1] = fminf(lo[1], t.y); hi[1] = fmaxf(hi[1], t.y);
        lo[2] = fminf(lo[2], t.z); hi[2] = fmaxf(hi[2], t.z);
        amin = fminf(amin, t.w);
    }
#pragma unroll
    for (int off = NG / 2; off > 0; off >>= 1) {
#pragma unroll
        for (int k = 0; k < 3; k++) {
            lo[k] = fminf(lo[k], __shfl_xor_sync(mask, lo[k], off, NG));
            hi[k] = fmaxf(hi[k], __shfl_xor_sync(mask, hi[k], off, NG));
        }
        amin = fminf(amin, __shfl_xor_sync(mask, amin, off, NG));
    }
    bc = make_float3(0.5f * (lo[0] + hi[0]), 0.5f * (lo[1] + hi[1]), 0.5f * (lo[2] + hi[2]));
    bh = make_float3(0.5f * (hi[0] - lo[0]), 0.5f * (hi[1] - lo[1]), 0.5f * (hi[2] - lo[2]));
}
