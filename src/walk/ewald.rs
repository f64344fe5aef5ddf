//! The Ewald correction of a periodic box: what the infinite lattice of images of a point mass,
//! in a uniform background of the opposite density, adds to the force of its nearest image.
//!
//! Units: a box of side 1 (the tree frame of a periodic run is the box, so the period is 1 in
//! the frame), a unit mass and G = 1; a mass M at separation d (target minus source, the
//! nearest image) adds M·[`Correction`] to the walk's Newtonian M-term. The total field of a
//! point mass in the box is then exactly periodic and has zero mean density.
//!
//! The periodic potential of a unit mass at the origin is Φ = −φ_per with (Hernquist, Bouchet &
//! Suto 1991; GADGET-2's `ewald_psi`)
//!
//! φ_per(x) = Σ_n erfc(α|x − n|)/|x − n| + Σ_{k≠0} e^{−π²k²/α²} cos(2π k·x)/(π k²) − π/α²,
//!
//! n and k running over the integer lattice. The correction potential is ψ = Φ − (−1/|x|) =
//! 1/|x| − φ_per (smooth at x = 0), its force f = −∇ψ and its Jacobian J = ∂f/∂x = −∇∇ψ
//! (symmetric). [`ewald_sum`] evaluates them in float64; [`EwaldTable`] tabulates them once on
//! the octant [0, ½]³, from which the other octants follow by symmetry (ψ and the diagonal of J
//! are even in every coordinate, f_i is odd in x_i, J_ij is odd in x_i and in x_j), and
//! interpolates them trilinearly. The walks apply the correction once per (target group,
//! source) pair at the group's centre and carry it to each target to first order with J.

use glam::DVec3;
use rayon::prelude::*;
use std::sync::OnceLock;

/// The splitting parameter α of the sums (box units⁻¹).
const ALPHA: f64 = 2.0;
/// Real-space images summed: |n_i| ≤ this. The next ones are at least 2 box sides from a
/// point within one side of the origin (erfc(α r)/r < 1e-8 there) and 2.5 from the table's
/// octant (< 1e-12).
const REAL_SHELLS: i32 = 2;
/// Wave vectors summed: |k_i| ≤ this (e^{−π²k²/α²}/(πk²) < 1e-11 beyond).
const WAVE_SHELLS: i32 = 3;
/// Table points per axis over [0, ½]: a spacing of 1/128 box sides.
pub const TABLE_POINTS: usize = 65;
/// Float32 values per table point: ψ, f_x, f_y, f_z, J_xx, J_yy, J_zz, J_xy, J_xz, J_yz and two
/// zeros, so that a point is three aligned float4 on the GPU.
pub const TABLE_STRIDE: usize = 12;
/// The square of the spacing h = 1/(2 (TABLE_POINTS − 1)) of the table's points (box units²).
const SPACING_SQUARED: f32 = 1.0 / ((2 * (TABLE_POINTS - 1)) * (2 * (TABLE_POINTS - 1))) as f32;
/// A periodic walk's target groups have at most this half-extent per axis (box units).
pub const MAX_GROUP_HALF: f32 = 1.0 / 128.0;
/// A periodic walk never accepts a cell of a larger half side (box units).
pub const MAX_ACCEPTED_HALF: f32 = 1.0 / 16.0;
/// An opened leaf of at most this half side takes one Ewald correction at its centre of mass.
pub const MAX_LEAF_MONOPOLE_HALF: f32 = 1.0 / 128.0;

/// The potential correction per unit of a source's spread, −2π/3 (box units, G = 1): a source
/// taken as one mass M at its centre of mass (an accepted cell, a small opened leaf) adds
/// `SPREAD_POTENTIAL · T` to the potential Ψ of its Ewald term, T = Σ m |y|² its particles'
/// second moment about the centre of mass (`Cells::trace`, mass × box units²).
///
/// Its particles, at offsets y from the centre of mass, lie at separations D − y from the
/// target (D = target − centre of mass), and their exact correction is
/// Σ m ψ(D − y) = M ψ(D) − ∇ψ(D)·Σ m y + ½ Σ m yᵀ H(D) y + O(y³), H = ∇∇ψ. About the centre
/// of mass Σ m y = 0. H's isotropic part is (∇²ψ / 3) I, and ∇²ψ is the background term of the
/// correction everywhere in the box: ψ = 1/|x| − φ_per, ∇²(1/|x|) = −4π δ(x) and
/// ∇²φ_per = −4π (δ(x) − 1) (the unit mass and its neutralising background; the potential of
/// the mass is −φ_per), so ∇²ψ = −4π (near the origin ψ = ψ(0) − (2π/3)|x|², f = (4π/3) x,
/// the test `correction_near_the_origin_is_the_background`). The isotropic part thus gives
/// ½ (−4π/3) Σ m |y|² = −(2π/3) T, the same for every target; H's anisotropic part, which
/// depends on D and is a Jacobian's derivative, is neglected as the monopole term neglects the
/// quadrupole's. It changes potentials only (it does not depend on D): without it a uniform
/// set's periodic potentials were all about 9 % of their rms too high.
///
/// The table's trilinear interpolation is such an average too: of ψ at the eight points around
/// the separation, with weights whose spread about it is h² Σ_k t_k (1 − t_k) (h the points'
/// spacing, t_k the fractions): [`EwaldTable::correction`] takes that term off (without it
/// every ψ came out (π/3) h² = 6.4e-5 low on average, 1.5e-3 of a uniform set's rms potential).
pub const SPREAD_POTENTIAL: f64 = -2.0 * std::f64::consts::PI / 3.0;

/// The Ewald correction at one separation (box units, unit mass, G = 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Correction {
    /// Potential ψ (energy per mass): add M ψ to the target's potential.
    pub pot: f64,
    /// Acceleration f = −∇ψ: add M f to the target's acceleration.
    pub acc: DVec3,
    /// Jacobian ∂f_i/∂x_j as (xx, yy, zz, xy, xz, yz): a target displaced by δ from the point
    /// where the correction was taken gets M (f + J δ) and M (ψ − f·δ).
    pub jac: [f64; 6],
}

impl Correction {
    /// The correction at `centre + delta` (box units): the acceleration to first order in
    /// `delta`, f + J δ, and the potential to second order, ψ − f·δ − ½ δ·J δ, so that the
    /// acceleration is minus the gradient of the potential (J = ∂f/∂x is symmetric; its trace,
    /// the background's 4π M, is the isotropic −(2π/3) M |δ|² of the potential).
    pub fn at_offset(&self, delta: DVec3) -> (DVec3, f64) {
        let [xx, yy, zz, xy, xz, yz] = self.jac;
        let jd = DVec3::new(
            xx * delta.x + xy * delta.y + xz * delta.z,
            xy * delta.x + yy * delta.y + yz * delta.z,
            xz * delta.x + yz * delta.y + zz * delta.z,
        );
        (
            self.acc + jd,
            self.pot - self.acc.dot(delta) - 0.5 * delta.dot(jd),
        )
    }
}

/// erfc(x) for x ≥ 0 in float64: the Taylor series of erf below 2.5, the continued fraction
/// of erfc above (relative error below 1e-9 everywhere, far below the table's float32).
fn erfc(x: f64) -> f64 {
    if x < 2.5 {
        // erf x = 2/√π Σ (−1)^n x^{2n+1} / (n! (2n + 1))
        let x2 = x * x;
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        1.0 - sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        // erfc x = e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), from the tail.
        let mut f = x;
        for k in (1..=40).rev() {
            f = x + 0.5 * k as f64 / f;
        }
        (-x * x).exp() / (std::f64::consts::PI.sqrt() * f)
    }
}

/// A radial function's value, its derivative over r, A = u'/r, and B = (u'' − u'/r)/r²: its
/// gradient is A x and its Hessian A δ_ij + B x_i x_j.
struct Radial {
    value: f64,
    a: f64,
    b: f64,
}

impl Radial {
    /// u(r) = erfc(αr)/r (r > 0).
    fn screened(r: f64) -> Self {
        let c = 2.0 * ALPHA / std::f64::consts::PI.sqrt() * (-ALPHA * ALPHA * r * r).exp();
        let e = erfc(ALPHA * r);
        let d1 = -e / (r * r) - c / r;
        let d2 = 2.0 * e / (r * r * r) + c * (2.0 / (r * r) + 2.0 * ALPHA * ALPHA);
        Self {
            value: e / r,
            a: d1 / r,
            b: (d2 - d1 / r) / (r * r),
        }
    }

    /// u(r) = erf(αr)/r = 1/r − erfc(αr)/r, smooth at r = 0 (its series below αr = 0.05).
    fn smooth(r: f64) -> Self {
        let ar2 = (ALPHA * r) * (ALPHA * r);
        if ar2 < 2.5e-3 {
            let c = 2.0 * ALPHA / std::f64::consts::PI.sqrt();
            let a2 = ALPHA * ALPHA;
            return Self {
                value: c * (1.0 - ar2 / 3.0 + ar2 * ar2 / 10.0 - ar2 * ar2 * ar2 / 42.0),
                a: c * a2 * (-2.0 / 3.0 + 0.4 * ar2 - ar2 * ar2 / 7.0),
                b: c * a2 * a2 * (0.8 - 4.0 * ar2 / 7.0),
            };
        }
        let s = Self::screened(r);
        let (r2, r3) = (r * r, r * r * r);
        Self {
            value: 1.0 / r - s.value,
            a: -1.0 / r3 - s.a,
            b: 3.0 / (r2 * r3) - s.b,
        }
    }

    /// Adds `sign` × its gradient and Hessian at x (|x| = r) to `grad` and `hess` (xx, yy, zz,
    /// xy, xz, yz), and its value to `value`.
    fn add(&self, x: DVec3, sign: f64, value: &mut f64, grad: &mut DVec3, hess: &mut [f64; 6]) {
        *value += sign * self.value;
        *grad += sign * self.a * x;
        let (a, b) = (sign * self.a, sign * self.b);
        hess[0] += a + b * x.x * x.x;
        hess[1] += a + b * x.y * x.y;
        hess[2] += a + b * x.z * x.z;
        hess[3] += b * x.x * x.y;
        hess[4] += b * x.x * x.z;
        hess[5] += b * x.y * x.z;
    }
}

/// The Ewald correction at separation `x` (box units, within a box of the origin: for the
/// nearest image or another one) in float64, by the
/// sums of the module documentation. The reference that [`EwaldTable`] tabulates.
pub fn ewald_sum(x: DVec3) -> Correction {
    // ψ = 1/|x| − φ_per = π/α² + erf(α|x|)/|x| − Σ_{n≠0} erfc/|x − n| − Σ_k (…) cos(2π k·x)
    let mut psi = std::f64::consts::PI / (ALPHA * ALPHA);
    let mut grad = DVec3::ZERO;
    let mut hess = [0.0; 6];
    Radial::smooth(x.length()).add(x, 1.0, &mut psi, &mut grad, &mut hess);
    let lattice = |m: i32| (-m..=m).flat_map(move |i| (-m..=m).map(move |j| (i, j)));
    for (i, j) in lattice(REAL_SHELLS) {
        for k in -REAL_SHELLS..=REAL_SHELLS {
            if (i, j, k) == (0, 0, 0) {
                continue;
            }
            let d = x - DVec3::new(i as f64, j as f64, k as f64);
            Radial::screened(d.length()).add(d, -1.0, &mut psi, &mut grad, &mut hess);
        }
    }
    let pi = std::f64::consts::PI;
    for (i, j) in lattice(WAVE_SHELLS) {
        for k in -WAVE_SHELLS..=WAVE_SHELLS {
            let h = DVec3::new(i as f64, j as f64, k as f64);
            let h2 = h.length_squared();
            if h2 == 0.0 {
                continue;
            }
            let w = (-pi * pi * h2 / (ALPHA * ALPHA)).exp() / (pi * h2);
            let (s, c) = (2.0 * pi * h.dot(x)).sin_cos();
            // −w cos(2π h·x): gradient 2π w sin · h, Hessian 4π² w cos · h h.
            psi -= w * c;
            grad += 2.0 * pi * w * s * h;
            let q = 4.0 * pi * pi * w * c;
            hess[0] += q * h.x * h.x;
            hess[1] += q * h.y * h.y;
            hess[2] += q * h.z * h.z;
            hess[3] += q * h.x * h.y;
            hess[4] += q * h.x * h.z;
            hess[5] += q * h.y * h.z;
        }
    }
    Correction {
        pot: psi,
        acc: -grad,
        jac: hess.map(|v| -v),
    }
}

/// The Ewald correction tabulated on the octant [0, ½]³ of the unit box in float32
/// ([`TABLE_POINTS`]³ points, [`TABLE_STRIDE`] values each, x the slowest index), as the CPU
/// and GPU walks interpolate it.
#[derive(Clone, Debug)]
pub struct EwaldTable {
    values: Vec<f32>,
}

/// The table, computed on first use (about a second on two cores).
pub fn table() -> &'static EwaldTable {
    static TABLE: OnceLock<EwaldTable> = OnceLock::new();
    TABLE.get_or_init(EwaldTable::compute)
}

impl EwaldTable {
    fn compute() -> Self {
        let n = TABLE_POINTS;
        let step = 0.5 / (n - 1) as f64;
        let values = (0..n * n * n)
            .into_par_iter()
            .flat_map_iter(|p| {
                let (i, j, k) = (p / (n * n), (p / n) % n, p % n);
                let c = Self::smooth_part(DVec3::new(i as f64, j as f64, k as f64) * step);
                let j6 = c.jac;
                [
                    c.pot, c.acc.x, c.acc.y, c.acc.z, j6[0], j6[1], j6[2], j6[3], j6[4], j6[5],
                    0.0, 0.0,
                ]
                .map(|v| v as f32)
            })
            .collect();
        Self { values }
    }

    /// The correction's part that the table holds: without the six images across the faces
    /// (n = ±e_x, ±e_y, ±e_z), the nearest singularities of the correction in the octant,
    /// whose Newtonian potential and force [`face_images`] adds back exactly.
    fn smooth_part(x: DVec3) -> Correction {
        let mut c = ewald_sum(x);
        let (pot, acc) = face_images(x);
        c.pot -= pot;
        c.acc -= acc;
        c
    }

    /// The table's float32 values, point after point ([`TABLE_STRIDE`] each), for upload.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The correction at separation `d` (box units, each component in [−½, ½], the nearest
    /// image), interpolated trilinearly on the octant of |d| with the symmetries' signs (ψ
    /// less the interpolation's own spread term, see [`SPREAD_POTENTIAL`]).
    #[inline(always)]
    pub fn correction(&self, d: [f32; 3]) -> Correction {
        let (first, frac) = Self::locate(d);
        let n = TABLE_POINTS;
        // Four rows of two neighbouring points along z, each pair interpolated along z and
        // weighted by its (x, y) corner.
        let [fx, fy, fz] = frac;
        let mut v = [0f32; 10];
        for (cx, wx) in [(0, 1.0 - fx), (1, fx)] {
            for (cy, wy) in [(0, 1.0 - fy), (1, fy)] {
                let w = wx * wy;
                let p = first + (cx * n + cy) * n;
                let pair = &self.values[p * TABLE_STRIDE..(p + 2) * TABLE_STRIDE];
                let (lo, hi) = pair.split_at(TABLE_STRIDE);
                for k in 0..10 {
                    v[k] += w * ((1.0 - fz) * lo[k] + fz * hi[k]);
                }
            }
        }
        // Trilinear interpolation averages ψ over the eight points around d with weights whose
        // spread about d is h² Σ_k t_k (1 − t_k) (h the spacing, t the fractions): it adds
        // SPREAD_POTENTIAL times that spread to ψ, as a spread source does, taken off here
        // (without it every ψ came out (π/3) h² low on average).
        let spread =
            frac[0] * (1.0 - frac[0]) + frac[1] * (1.0 - frac[1]) + frac[2] * (1.0 - frac[2]);
        v[0] -= SPREAD_POTENTIAL as f32 * SPACING_SQUARED * spread;
        let s = d.map(|x| if x < 0.0 { -1.0f64 } else { 1.0 });
        let v = v.map(f64::from);
        let (pot, acc) = face_images(DVec3::new(d[0] as f64, d[1] as f64, d[2] as f64));
        Correction {
            pot: v[0] + pot,
            acc: DVec3::new(s[0] * v[1], s[1] * v[2], s[2] * v[3]) + acc,
            jac: [
                v[4],
                v[5],
                v[6],
                s[0] * s[1] * v[7],
                s[0] * s[2] * v[8],
                s[1] * s[2] * v[9],
            ],
        }
    }

    /// Σ m · [`EwaldTable::correction`]`(d)` over `terms` (d's x, y, z, then m; box and mass
    /// units) in float64, the table points of each term fetched a few terms ahead (a walk's
    /// separations are scattered over the table, which is larger than a core's caches).
    pub fn sum(&self, terms: &[[f32; 4]]) -> Correction {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU supports the features the function is compiled for.
                return unsafe { self.sum_avx2(terms) };
            }
        }
        self.sum_portable(terms)
    }

    /// [`EwaldTable::sum`] compiled for AVX2 and FMA (the periodic CPU walk took 9 % less time
    /// than with the portable build on an AMD EPYC).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn sum_avx2(&self, terms: &[[f32; 4]]) -> Correction {
        self.sum_portable(terms)
    }

    /// [`EwaldTable::sum`] for any CPU.
    #[inline(always)]
    fn sum_portable(&self, terms: &[[f32; 4]]) -> Correction {
        const AHEAD: usize = 6;
        let mut total = Correction::default();
        for (i, t) in terms.iter().enumerate() {
            if let Some(u) = terms.get(i + AHEAD) {
                self.prefetch(Self::locate([u[0], u[1], u[2]]).0);
            }
            let c = self.correction([t[0], t[1], t[2]]);
            let m = t[3] as f64;
            total.pot += m * c.pot;
            total.acc += m * c.acc;
            for (a, b) in total.jac.iter_mut().zip(c.jac) {
                *a += m * b;
            }
        }
        total
    }

    /// The first of the eight table points around |d| (index of a point) and the fractions of
    /// |d| between them per axis.
    #[inline(always)]
    fn locate(d: [f32; 3]) -> (usize, [f32; 3]) {
        let n = TABLE_POINTS;
        let scale = (n - 1) as f32 * 2.0;
        let mut base = [0usize; 3];
        let mut frac = [0f32; 3];
        for k in 0..3 {
            let u = (d[k].abs() * scale).min((n - 1) as f32);
            let i = (u as usize).min(n - 2);
            base[k] = i;
            frac[k] = u - i as f32;
        }
        ((base[0] * n + base[1]) * n + base[2], frac)
    }

    /// Asks the cache for the eight table points from point `first` on ([`Self::locate`]): four
    /// pairs of 2 [`TABLE_STRIDE`] floats, each on at most three cache lines.
    #[inline(always)]
    fn prefetch(&self, first: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let n = TABLE_POINTS;
            for row in [0, n, n * n, n * n + n] {
                let pair = &self.values[(first + row) * TABLE_STRIDE..][..2 * TABLE_STRIDE];
                for at in [0, 16, 2 * TABLE_STRIDE - 1] {
                    // SAFETY: a prefetch only hints the cache; the address is in the table.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(pair[at..].as_ptr().cast()) };
                }
            }
        }
    }
}

/// The Newtonian potential and acceleration at `x` of unit masses at the six lattice points
/// across the faces of the box, ±e_x, ±e_y, ±e_z (box units, G = 1).
#[inline(always)]
pub fn face_images(x: DVec3) -> (f64, DVec3) {
    // The six separations first, then their inverse distances in one loop (the square roots
    // and divisions pipelined).
    let n = [DVec3::X, DVec3::Y, DVec3::Z];
    let d: [DVec3; 6] = std::array::from_fn(|i| if i < 3 { x - n[i] } else { x + n[i - 3] });
    let rinv: [f64; 6] = std::array::from_fn(|i| 1.0 / d[i].length_squared().sqrt());
    let mut pot = 0.0;
    let mut acc = DVec3::ZERO;
    for (d, r) in d.iter().zip(rinv) {
        pot -= r;
        acc -= *d * (r * r * r);
    }
    (pot, acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erfc against values from Abramowitz & Stegun's table 7.1 and the asymptotic series.
    #[test]
    fn erfc_matches_tabulated_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 4.677_734_981_047_266e-3),
            (2.5, 4.069_520_174_449_59e-4),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
        ] {
            let got = erfc(x);
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "erfc({x}) = {got}, want {want}"
            );
        }
    }

    /// The force is minus the gradient of the potential and the Jacobian the gradient of the
    /// force (central differences), and the force vanishes at the symmetry points.
    #[test]
    fn sums_are_consistent_derivatives() {
        let h = 1e-5;
        for x in [
            DVec3::new(0.1, 0.2, 0.3),
            DVec3::new(0.45, -0.05, 0.2),
            DVec3::new(0.01, 0.0, -0.02),
        ] {
            let c = ewald_sum(x);
            for k in 0..3 {
                let e = [DVec3::X, DVec3::Y, DVec3::Z][k] * h;
                let (p, m) = (ewald_sum(x + e), ewald_sum(x - e));
                let f = -(p.pot - m.pot) / (2.0 * h);
                assert!(
                    (f - c.acc[k]).abs() < 1e-7,
                    "f_{k} at {x}: {f} vs {}",
                    c.acc[k]
                );
                let dj = (p.acc - m.acc) / (2.0 * h);
                let row = match k {
                    0 => [c.jac[0], c.jac[3], c.jac[4]],
                    1 => [c.jac[3], c.jac[1], c.jac[5]],
                    _ => [c.jac[4], c.jac[5], c.jac[2]],
                };
                for i in 0..3 {
                    assert!((dj[i] - row[i]).abs() < 1e-5, "J at {x}: {dj} vs {row:?}");
                }
            }
        }
        // The total force (nearest image plus correction) vanishes at the lattice's symmetry
        // points; the correction alone at the origin.
        assert!(ewald_sum(DVec3::ZERO).acc.length() < 1e-12);
        for x in [
            DVec3::splat(0.5),
            DVec3::new(0.5, 0.0, 0.0),
            DVec3::new(0.0, 0.5, 0.5),
        ] {
            let newton = -x / x.length().powi(3);
            assert!((ewald_sum(x).acc + newton).length() < 1e-9, "force at {x}");
        }
    }

    /// Near the origin the correction is the background's pull (4π/3) x: the images' tidal
    /// field vanishes at second order in a cubic lattice.
    #[test]
    fn correction_near_the_origin_is_the_background() {
        for x in [
            DVec3::new(0.004, -0.008, 0.006),
            DVec3::new(0.01, -0.02, 0.015),
        ] {
            let c = ewald_sum(x);
            let want = 4.0 * std::f64::consts::PI / 3.0 * x;
            let tol = 10.0 * x.length_squared() * want.length();
            assert!((c.acc - want).length() < tol, "{} at {x}", c.acc);
        }
    }

    /// The table reproduces the sums in every octant, to 1e-4 of the largest correction.
    #[test]
    fn table_interpolates_the_sums() {
        let t = table();
        let mut worst = [0.0f64; 3];
        for i in 0..400 {
            let u = |s: f64| ((i as f64 * s).sin() * 0.5).clamp(-0.5, 0.5);
            let x = DVec3::new(u(0.731), u(1.377), u(2.113));
            let want = ewald_sum(x);
            let got = t.correction([x.x as f32, x.y as f32, x.z as f32]);
            let e = [
                (got.acc - want.acc).length(),
                (got.pot - want.pot).abs(),
                (0..6)
                    .map(|k| (got.jac[k] - want.jac[k]).abs())
                    .fold(0.0, f64::max),
            ];
            for k in 0..3 {
                worst[k] = worst[k].max(e[k]);
            }
        }
        eprintln!(
            "worst errors: force {:.2e}, potential {:.2e}, Jacobian {:.2e}",
            worst[0], worst[1], worst[2]
        );
        assert!(
            worst[0] < 1e-4 && worst[1] < 1e-4 && worst[2] < 1e-2,
            "{worst:?}"
        );
    }
}
