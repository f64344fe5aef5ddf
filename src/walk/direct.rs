//! Exact direct summation in float64: the reference every force path is checked against, and the
//! `--method direct` force choice for small N.
//!
//! a_i = Σ_{j≠i} m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2},  φ_i = −Σ_{j≠i} m_j / (|x_j − x_i|² + ε²)^{1/2}
//! with G = 1 (scale by G outside). Self-interaction is excluded by index, so coincident but
//! distinct particles still interact (through the softening).
//!
//! In a periodic box of side L ([`periodic_direct_forces`]) every pair is taken at its nearest
//! image, d = x_j − x_i − L round((x_j − x_i)/L), softened as above, plus the Ewald correction
//! of all the other images ([`ewald_sum`] at −d/L, float64), and every particle also feels its
//! own images (the correction at 0: no force, the potential m_i ψ(0)/L). This is the exact
//! periodic reference of the walks, at about 50 µs per pair (the correction's sums).

use super::ewald::ewald_sum;
use glam::DVec3;
use rayon::prelude::*;

/// Accelerations and potentials on the `targets` (indices into `pos`) from all particles,
/// in float64 with Plummer softening `eps` (length units). Returns `(acc, pot)` in target order.
pub fn direct_forces(
    pos: &[DVec3],
    mass: &[f64],
    eps: f64,
    targets: &[usize],
) -> (Vec<DVec3>, Vec<f64>) {
    let eps2 = eps * eps;
    targets
        .par_iter()
        .map(|&i| force_on(pos, mass, eps2, i))
        .unzip()
}

/// Accelerations and potentials on the `targets` (indices into `pos`) from all particles and
/// all their periodic images in a box of side `side` (length units; positions anywhere, taken
/// modulo the box), in float64 with Plummer softening `eps` (length units) of the nearest
/// images, G = 1. Returns `(acc, pot)` in target order.
pub fn periodic_direct_forces(
    pos: &[DVec3],
    mass: &[f64],
    eps: f64,
    side: f64,
    targets: &[usize],
) -> (Vec<DVec3>, Vec<f64>) {
    let eps2 = eps * eps;
    let own_images = ewald_sum(DVec3::ZERO).pot / side;
    targets
        .par_iter()
        .map(|&i| {
            let xi = pos[i];
            let mut a = DVec3::ZERO;
            let mut p = mass[i] * own_images;
            for (j, (&xj, &m)) in pos.iter().zip(mass).enumerate() {
                if j == i {
                    continue;
                }
                let mut d = xj - xi;
                d -= side * (d / side).round();
                let r2 = d.length_squared() + eps2;
                if r2 > 0.0 {
                    let rinv = 1.0 / r2.sqrt();
                    a += d * (m * rinv * rinv * rinv);
                    p -= m * rinv;
                }
                let c = ewald_sum(-d / side);
                a += c.acc * (m / (side * side));
                p += c.pot * (m / side);
            }
            (a, p)
        })
        .unzip()
}

/// Exact float64 acceleration and potential on particle `i` (G = 1).
fn force_on(pos: &[DVec3], mass: &[f64], eps2: f64, i: usize) -> (DVec3, f64) {
    let xi = pos[i];
    // Four independent accumulators let the compiler keep the loop pipelined.
    const L: usize = 4;
    let mut ax = [0.0f64; L];
    let mut ay = [0.0f64; L];
    let mut az = [0.0f64; L];
    let mut ph = [0.0f64; L];
    let n = pos.len();
    let full = n / L * L;
    let mut j0 = 0;
    while j0 < full {
        for l in 0..L {
            let j = j0 + l;
            let d = pos[j] - xi;
            let r2 = d.length_squared() + eps2;
            let w = if j == i || r2 == 0.0 { 0.0 } else { 1.0 };
            let rinv = w / r2.max(f64::MIN_POSITIVE).sqrt();
            let mr = mass[j] * rinv;
            let mr3 = mr * rinv * rinv;
            ax[l] += d.x * mr3;
            ay[l] += d.y * mr3;
            az[l] += d.z * mr3;
            ph[l] -= mr;
        }
        j0 += L;
    }
    let mut a = DVec3::new(ax.iter().sum(), ay.iter().sum(), az.iter().sum());
    let mut p: f64 = ph.iter().sum();
    for j in full..n {
        if j == i {
            continue;
        }
        let d = pos[j] - xi;
        let r2 = d.length_squared() + eps2;
        if r2 == 0.0 {
            continue;
        }
        let rinv = 1.0 / r2.sqrt();
        a += d * (mass[j] * rinv * rinv * rinv);
        p -= mass[j] * rinv;
    }
    (a, p)
}

/// Total potential energy W = ½ Σ_i m_i φ_i (G = 1) by exact summation over all pairs.
pub fn potential_energy(pos: &[DVec3], mass: &[f64], eps: f64) -> f64 {
    let all: Vec<usize> = (0..pos.len()).collect();
    let (_, pot) = direct_forces(pos, mass, eps, &all);
    0.5 * pot.iter().zip(mass).map(|(p, m)| p * m).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_bodies_newton() {
        let pos = vec![DVec3::ZERO, DVec3::new(2.0, 0.0, 0.0)];
        let mass = vec![1.0, 3.0];
        let (a, p) = direct_forces(&pos, &mass, 0.0, &[0, 1]);
        assert!((a[0] - DVec3::new(0.75, 0.0, 0.0)).length() < 1e-15);
        assert!((a[1] - DVec3::new(-0.25, 0.0, 0.0)).length() < 1e-15);
        assert!((p[0] + 1.5).abs() < 1e-15 && (p[1] + 0.5).abs() < 1e-15);
        assert!((potential_energy(&pos, &mass, 0.0) + 1.5).abs() < 1e-15);
    }

    #[test]
    fn momentum_is_conserved_to_rounding() {
        let pos: Vec<DVec3> = (0..37)
            .map(|i| {
                let t = i as f64;
                DVec3::new(t.sin(), (1.7 * t).cos(), (0.3 * t).sin() * t / 37.0)
            })
            .collect();
        let mass: Vec<f64> = (0..37).map(|i| 1.0 + (i % 5) as f64).collect();
        let all: Vec<usize> = (0..37).collect();
        let (a, _) = direct_forces(&pos, &mass, 0.01, &all);
        let f: DVec3 = a.iter().zip(&mass).map(|(a, m)| *a * *m).sum();
        let scale: f64 = a.iter().zip(&mass).map(|(a, m)| a.length() * m).sum();
        assert!(f.length() < 1e-14 * scale, "net force {f:?} vs {scale}");
    }
}
