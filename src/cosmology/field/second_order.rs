//! The source of second-order Lagrangian perturbation theory (2LPT; Scoccimarro 1998, Crocce,
//! Pueblas & Scoccimarro 2006), by FFTs on the particle grid.
//!
//! With φ the first-order potential, ∇²φ = −δ and ψ₁ = ∇φ
//! ([`displacement`](super::displacement)), the second-order displacement is ψ₂ = ∇φ₂ with
//! ∇²φ₂ = S = Σ_{i>j} (φ,ii φ,jj − φ,ij²), the second invariant of the tensor φ,ij
//! (quadratic in φ, so the same for the potential of the opposite sign convention). Its
//! modes: φ,ij is the inverse transform of −k_i k_j δ_k/k², six real fields that take three
//! inverse FFTs, two fields in one (the modes A + iB of two real fields give a(x) + i b(x));
//! S is formed point by point, transformed forward and divided by n³. The product of two
//! fields on the grid aliases the modes beyond the Nyquist wave number back, as 2LPTic and
//! N-GenIC do; its k = 0 mode and Nyquist planes are set to zero, as those of δ are.

use super::{fft3, synthesise, Direction, Grid};
use rayon::prelude::*;
use rustfft::num_complex::Complex64;

/// The modes δ₂_k (dimensionless) of −S, S = Σ_{i>j} (φ,ii φ,jj − φ,ij²) the second-order
/// source of the density modes `delta` (the layout and conventions of the module docs of
/// `field`, Hermitian) on `grid`, φ their potential (∇²φ = −δ):
/// [`displacement`](super::displacement) of δ₂ is the 2LPT displacement ψ₂ = ∇φ₂ with
/// ∇²φ₂ = S, i.e. ∇·ψ₂ = S = −δ₂ (Mpc/h per unit growth factor D₂). Zero at k = 0 and on the Nyquist planes. Holds at most two complex and
/// two real grids (48 bytes a point) besides `delta`, and returns one complex grid; the
/// result does not depend on the number of threads.
pub fn second_order_modes(grid: &Grid, delta: &[Complex64]) -> Vec<Complex64> {
    assert_eq!(delta.len(), grid.points(), "modes of another grid");
    // φ,ab + i φ,cd: the modes −(k_a k_b + i k_c k_d) δ_k/k².
    let hessian_pair = |field: &mut Vec<Complex64>, (a, b): (usize, usize), (c, d)| {
        synthesise(grid, field, |index, k, k2| {
            -Complex64::new(k[a] * k[b], k[c] * k[d]) * (delta[index] / k2)
        });
    };
    let mut field = Vec::new();
    hessian_pair(&mut field, (0, 0), (1, 1));
    // S = φ,xx φ,yy + (φ,xx + φ,yy) φ,zz − φ,xy² − φ,xz² − φ,yz².
    let (mut source, trace): (Vec<f64>, Vec<f64>) =
        field.par_iter().map(|c| (c.re * c.im, c.re + c.im)).unzip();
    hessian_pair(&mut field, (2, 2), (0, 1));
    source
        .par_iter_mut()
        .zip(trace)
        .zip(&field)
        .for_each(|((s, t), c)| *s += t * c.re - c.im * c.im);
    hessian_pair(&mut field, (0, 2), (1, 2));
    source
        .par_iter_mut()
        .zip(&field)
        .for_each(|(s, c)| *s -= c.re * c.re + c.im * c.im);
    field
        .par_iter_mut()
        .zip(source)
        .for_each(|(f, s)| *f = Complex64::new(s, 0.0));
    fft3(grid, &mut field, Direction::Forward);
    // δ₂_k = −S_k, the forward transform divided by n³ (δ(x) = Σ_k δ_k e^{ik·x}).
    let scale = -1.0 / grid.points() as f64;
    field.par_iter_mut().enumerate().for_each(|(index, f)| {
        let m = grid.wave_vector(index);
        *f = if m == [0, 0, 0] || grid.is_nyquist(m) {
            Complex64::new(0.0, 0.0)
        } else {
            *f * scale
        };
    });
    field
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosmology::field::{density_modes, displacement, Amplitudes, Realisation};
    use crate::cosmology::{Cosmology, PowerSpectrum};

    /// The modes of δ = Σ A cos(k·x) over `waves` (integer wave vector, amplitude) on `grid`.
    fn cosines(grid: &Grid, waves: &[([i64; 3], f64)]) -> Vec<Complex64> {
        let n = grid.n() as i64;
        let at = |m: [i64; 3]| {
            let i = |c: i64| c.rem_euclid(n) as usize;
            (i(m[0]) * grid.n() + i(m[1])) * grid.n() + i(m[2])
        };
        let mut delta = vec![Complex64::new(0.0, 0.0); grid.points()];
        for &(m, amplitude) in waves {
            delta[at(m)] += amplitude / 2.0;
            delta[at(m.map(|c| -c))] += amplitude / 2.0;
        }
        delta
    }

    /// The position of grid point `index` in Mpc/h.
    fn point(grid: &Grid, index: usize) -> [f64; 3] {
        let n = grid.n();
        [index / (n * n), index / n % n, index % n].map(|i| i as f64 * grid.box_size() / n as f64)
    }

    fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
        a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    }

    /// Two plane waves δ = A cos(a·x) + B cos(b·x): φ,ij = −(A cos(a·x) â_i â_j +
    /// B cos(b·x) b̂_i b̂_j), whose second invariant is S = AB (1 − μ²) cos(a·x) cos(b·x),
    /// μ = â·b̂, = AB (1 − μ²)/2 [cos((a + b)·x) + cos((a − b)·x)]; so φ₂ = −AB (1 − μ²)/2
    /// Σ_± cos(c_±·x)/|c_±|² and ψ₂ = ∇φ₂ = AB (1 − μ²)/2 Σ_± c_± sin(c_±·x)/|c_±|²,
    /// c_± = a ± b. Perpendicular waves along x and y (S = φ,xx φ,yy) and oblique ones (the
    /// off-diagonal terms count).
    #[test]
    fn two_plane_waves_have_the_closed_form() {
        let grid = Grid::new(16, 50.0).unwrap();
        let kf = grid.fundamental();
        let (big_a, big_b) = (0.3, -0.2);
        for (ma, mb) in [([3i64, 0, 0], [0i64, 2, 0]), ([2, 1, 0], [-1, 1, 3])] {
            let delta = cosines(&grid, &[(ma, big_a), (mb, big_b)]);
            let psi2 = displacement(&grid, &second_order_modes(&grid, &delta));
            let (a, b) = (ma.map(|c| kf * c as f64), mb.map(|c| kf * c as f64));
            let mu2 = dot(a, b).powi(2) / (dot(a, a) * dot(b, b));
            let terms = [0, 1].map(|s| {
                let sign = if s == 0 { 1.0 } else { -1.0 };
                std::array::from_fn::<f64, 3, _>(|i| a[i] + sign * b[i])
            });
            let mut worst: f64 = 0.0;
            let mut largest: f64 = 0.0;
            for index in 0..grid.points() {
                let x = point(&grid, index);
                for (axis, component) in psi2.iter().enumerate() {
                    let want: f64 = terms
                        .iter()
                        .map(|c| c[axis] * dot(*c, x).sin() / dot(*c, *c))
                        .sum::<f64>()
                        * big_a
                        * big_b
                        * (1.0 - mu2)
                        / 2.0;
                    worst = worst.max((component[index] - want).abs());
                    largest = largest.max(want.abs());
                }
            }
            println!(
                "waves {ma:?}, {mb:?} (μ² = {mu2:.3}): max |ψ₂ − closed form| = {:.1e} of the \
                 largest {largest:.3e} Mpc/h",
                worst / largest
            );
            assert!(largest > 1e-3 && worst < 1e-10 * largest);
        }
    }

    /// One plane wave in any direction has S = 0 (φ,ij ∝ k_i k_j is of rank one): Zel'dovich
    /// is exact in one dimension, ψ₂ = 0 to rounding.
    #[test]
    fn a_single_plane_wave_has_no_second_order() {
        let grid = Grid::new(16, 50.0).unwrap();
        for m in [[3i64, 0, 0], [0, 0, 5], [3, -2, 5]] {
            let amplitude = 0.5;
            let delta = cosines(&grid, &[(m, amplitude)]);
            let psi2 = displacement(&grid, &second_order_modes(&grid, &delta));
            let k = grid.fundamental() * (dot(m.map(|c| c as f64), m.map(|c| c as f64))).sqrt();
            // The scale ψ₂ would have for two such waves: A²/k.
            let scale = amplitude * amplitude / k;
            let worst = psi2.iter().flatten().map(|c| c.abs()).fold(0.0, f64::max);
            println!("plane wave {m:?}: max |ψ₂| = {:.1e} A²/k", worst / scale);
            assert!(worst < 1e-13 * scale);
        }
    }

    /// The paired field −δ has the first-order displacement negated and the second-order one
    /// unchanged, bit for bit (negation commutes with every rounding); fixed amplitudes keep
    /// the Gaussian field's phases.
    #[test]
    fn paired_fields_negate_the_first_order_only() {
        let c = Cosmology::new(0.3, 0.7, 0.7, 100.0).unwrap();
        let power = PowerSpectrum::new(&c, 0.045, 0.96, 0.8).unwrap();
        let grid = Grid::new(16, 64.0).unwrap();
        for amplitudes in [Amplitudes::Gaussian, Amplitudes::Fixed] {
            let field = |paired| {
                let realisation = Realisation {
                    seed: 11,
                    amplitudes,
                    paired,
                };
                density_modes(&grid, |k| power.power(k), &realisation)
            };
            let (delta, mirrored) = (field(false), field(true));
            assert!(delta.iter().zip(&mirrored).all(|(d, m)| *m == -*d));
            let (psi1, psi1_mirrored) =
                (displacement(&grid, &delta), displacement(&grid, &mirrored));
            for (p, q) in psi1.iter().zip(&psi1_mirrored) {
                assert!(p.iter().any(|&v| v != 0.0));
                assert!(p.iter().zip(q).all(|(p, q)| *q == -*p), "{amplitudes:?}");
            }
            let (second, second_mirrored) = (
                second_order_modes(&grid, &delta),
                second_order_modes(&grid, &mirrored),
            );
            assert!(second.iter().any(|c| c.norm() > 0.0));
            assert!(second == second_mirrored, "{amplitudes:?}");
        }
    }
}
