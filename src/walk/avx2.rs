//! The grouped walk's list evaluation in explicit AVX2 + FMA: eight targets per vector, sources
//! broadcast, and 1/√r² from the approximate `vrsqrtps` refined by one Newton step (relative
//! error ~1e-7, as the GPU's `rsqrtf`) instead of a square root and a division.
//!
//! Same formulas as [`super::kernels`] (which the portable path uses); the test below holds the
//! two to float32 rounding.

use std::arch::x86_64::*;

/// Targets per vector.
pub const LANES: usize = 8;

/// 1/√x for x > 0 to ~1e-7: `rsqrt` estimate and one Newton–Raphson step.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rsqrt(x: __m256) -> __m256 {
    let y = _mm256_rsqrt_ps(x);
    // y (3 − x y²) / 2
    let xy2 = _mm256_mul_ps(_mm256_mul_ps(x, y), y);
    _mm256_mul_ps(
        _mm256_mul_ps(_mm256_set1_ps(0.5), y),
        _mm256_sub_ps(_mm256_set1_ps(3.0), xy2),
    )
}

/// Accelerations (x, y, z) and potentials of eight targets.
struct Acc {
    ax: __m256,
    ay: __m256,
    az: __m256,
    ph: __m256,
}

/// Adds to `acc` the point masses `sources` (the particles `first`, `first + 1`, … of the tree)
/// on the targets at `x` (x, y, z of eight lanes) with squared softening `e2`; with `OWN`, the
/// lane whose own particle (`me`) a source is leaves it out. A source at r = 0 (no softening)
/// adds nothing.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn p2p<const OWN: bool>(
    acc: &mut Acc,
    x: [__m256; 3],
    sources: &[[f32; 4]],
    first: u32,
    me: __m256i,
    e2: __m256,
) {
    let zero = _mm256_setzero_ps();
    for (j, src) in (first..).zip(sources) {
        let dx = _mm256_sub_ps(_mm256_set1_ps(src[0]), x[0]);
        let dy = _mm256_sub_ps(_mm256_set1_ps(src[1]), x[1]);
        let dz = _mm256_sub_ps(_mm256_set1_ps(src[2]), x[2]);
        let r2 = _mm256_fmadd_ps(dx, dx, _mm256_fmadd_ps(dy, dy, _mm256_fmadd_ps(dz, dz, e2)));
        let mut live = _mm256_cmp_ps::<_CMP_GT_OQ>(r2, zero);
        if OWN {
            let itself = _mm256_cmpeq_epi32(_mm256_set1_epi32(j as i32), me);
            live = _mm256_andnot_ps(_mm256_castsi256_ps(itself), live);
        }
        let rinv = _mm256_and_ps(rsqrt(r2), live);
        let mr = _mm256_mul_ps(_mm256_set1_ps(src[3]), rinv);
        let mr3 = _mm256_mul_ps(mr, _mm256_mul_ps(rinv, rinv));
        acc.ax = _mm256_fmadd_ps(dx, mr3, acc.ax);
        acc.ay = _mm256_fmadd_ps(dy, mr3, acc.ay);
        acc.az = _mm256_fmadd_ps(dz, mr3, acc.az);
        acc.ph = _mm256_sub_ps(acc.ph, mr);
    }
}

/// Accelerations and potentials (G = 1) on up to eight targets `tg`, which are the particles
/// `own` (one per lane; `u32::MAX`: none), from the point masses of `ranges` (index ranges into
/// `particles`) but their own, and the cells `cells` (indices into `com_mass`, `quad` and
/// `trace`), written to `out` (one entry per target).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub fn evaluate_batch(
    tg: &[[f32; 4]],
    own: [u32; LANES],
    particles: &[[f32; 4]],
    ranges: &[(u32, u32)],
    com_mass: &[[f32; 4]],
    quad: &[[f32; 6]],
    trace: &[f32],
    cells: &[u32],
    eps2: f32,
    quadrupole: bool,
    out: &mut [[f32; 4]],
) {
    let lane = |k: usize| -> [f32; LANES] { std::array::from_fn(|l| tg[l.min(tg.len() - 1)][k]) };
    let (xs, ys, zs) = (lane(0), lane(1), lane(2));
    // SAFETY (all loads/stores below): the arrays hold LANES floats.
    let xi = unsafe { _mm256_loadu_ps(xs.as_ptr()) };
    let yi = unsafe { _mm256_loadu_ps(ys.as_ptr()) };
    let zi = unsafe { _mm256_loadu_ps(zs.as_ptr()) };
    // SAFETY: `own` holds LANES u32s.
    let me = unsafe { _mm256_loadu_si256(own.as_ptr().cast()) };
    let zero = _mm256_setzero_ps();
    let mut acc = Acc {
        ax: zero,
        ay: zero,
        az: zero,
        ph: zero,
    };
    let x = [xi, yi, zi];
    let e2 = _mm256_set1_ps(eps2);
    for &(s, e) in ranges {
        let sources = &particles[s as usize..e as usize];
        // Only the range holding a target's own particle needs the index test.
        if own.iter().any(|o| (s..e).contains(o)) {
            p2p::<true>(&mut acc, x, sources, s, me, e2);
        } else {
            p2p::<false>(&mut acc, x, sources, s, me, e2);
        }
    }
    let Acc {
        mut ax,
        mut ay,
        mut az,
        mut ph,
    } = acc;
    for &c in cells {
        let cm = com_mass[c as usize];
        let dx = _mm256_sub_ps(_mm256_set1_ps(cm[0]), xi);
        let dy = _mm256_sub_ps(_mm256_set1_ps(cm[1]), yi);
        let dz = _mm256_sub_ps(_mm256_set1_ps(cm[2]), zi);
        let r2 = _mm256_fmadd_ps(dx, dx, _mm256_fmadd_ps(dy, dy, _mm256_fmadd_ps(dz, dz, e2)));
        let rinv = rsqrt(r2);
        let rinv2 = _mm256_mul_ps(rinv, rinv);
        let mr = _mm256_mul_ps(_mm256_set1_ps(cm[3]), rinv);
        let mr3 = _mm256_mul_ps(mr, rinv2);
        if !quadrupole {
            ax = _mm256_fmadd_ps(dx, mr3, ax);
            ay = _mm256_fmadd_ps(dy, mr3, ay);
            az = _mm256_fmadd_ps(dz, mr3, az);
            ph = _mm256_sub_ps(ph, mr);
            continue;
        }
        let q = quad[c as usize].map(|v| _mm256_set1_ps(v));
        let [qxx, qyy, qzz, qxy, qxz, qyz] = q;
        let qx = _mm256_fmadd_ps(qxx, dx, _mm256_fmadd_ps(qxy, dy, _mm256_mul_ps(qxz, dz)));
        let qy = _mm256_fmadd_ps(qxy, dx, _mm256_fmadd_ps(qyy, dy, _mm256_mul_ps(qyz, dz)));
        let qz = _mm256_fmadd_ps(qxz, dx, _mm256_fmadd_ps(qyz, dy, _mm256_mul_ps(qzz, dz)));
        // dᵀQd − T ε²: the softened second-order term.
        let t_eps2 = _mm256_set1_ps(-trace[c as usize] * eps2);
        let dqd = _mm256_fmadd_ps(
            dx,
            qx,
            _mm256_fmadd_ps(dy, qy, _mm256_fmadd_ps(dz, qz, t_eps2)),
        );
        let rinv5 = _mm256_mul_ps(_mm256_mul_ps(rinv2, rinv2), rinv);
        // (2.5 dqd / r⁵) / r², in this order as in the portable formula: 1/r⁷ alone
        // overflows float32 for cells accepted within 2⁻¹⁸ of a target.
        let radial = _mm256_fmadd_ps(
            _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.5), dqd), rinv5),
            rinv2,
            mr3,
        );
        ax = _mm256_fnmadd_ps(qx, rinv5, _mm256_fmadd_ps(dx, radial, ax));
        ay = _mm256_fnmadd_ps(qy, rinv5, _mm256_fmadd_ps(dy, radial, ay));
        az = _mm256_fnmadd_ps(qz, rinv5, _mm256_fmadd_ps(dz, radial, az));
        ph = _mm256_fnmadd_ps(
            _mm256_mul_ps(_mm256_set1_ps(0.5), dqd),
            rinv5,
            _mm256_sub_ps(ph, mr),
        );
    }
    let mut res = [[0.0f32; LANES]; 4];
    for (r, v) in res.iter_mut().zip([ax, ay, az, ph]) {
        // SAFETY: r holds LANES floats.
        unsafe { _mm256_storeu_ps(r.as_mut_ptr(), v) };
    }
    for (l, o) in out.iter_mut().enumerate() {
        *o = [res[0][l], res[1][l], res[2][l], res[3][l]];
    }
}
