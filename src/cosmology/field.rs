//! Random density fields on a periodic grid and their displacement fields, by FFTs.
//!
//! **Grid and conventions.** n³ points (n a power of two, 2 … 512) at x = L (i, j, l)/n in a
//! periodic box of side L (Mpc/h), stored with the last index fastest:
//! `(i * n + j) * n + l`. A mode's integer wave vector m has components in (−n/2, n/2)
//! (index i ↦ i for i < n/2, i − n otherwise), its wave vector is k = 2π m / L (h/Mpc). A
//! field is δ(x) = Σ_k δ_k exp(i k·x) (the unnormalised inverse DFT), so that for a field of
//! power spectrum P, ⟨|δ_k|²⟩ = P(|k|)/V with V = L³.
//!
//! **Random modes.** δ_k = √(P(|k|)/V) √(−ln u₁) exp(2πi u₂), a complex Gaussian of variance
//! P/V (a Rayleigh amplitude and a uniform phase), with u₁ ∈ (0, 1] and u₂ ∈ [0, 1) the first
//! two numbers of a Xoshiro256++ stream keyed by the seed and the mode's integer wave vector
//! (see [`mode_stream`]). With fixed amplitudes ([`Amplitudes::Fixed`], Angulo & Pontzen
//! 2016) the factor √(−ln u₁) is left out, |δ_k|² = P/V exactly, and the phase is the same
//! u₂; the paired field (Pontzen et al. 2016) is −δ_k, every phase shifted by π. So the
//! options share their phases for one seed. Of the two modes m and −m, only the one whose
//! first non-zero component is positive draws; the other is its complex conjugate, so
//! Hermitian symmetry δ_{−k} = δ_k* holds exactly. The k = 0 mode is zero (the box has the
//! mean density), and so are the Nyquist planes (any component = −n/2): such a mode is its
//! own conjugate partner, and its gradient has no real representation on the grid. Every
//! mode depends only on (seed, m), so a field is the same whatever the number of threads,
//! and two grids of the same box and seed share their common modes.
//!
//! **FFTs.** A 3-D transform is three passes of 1-D transforms (`rustfft`) along the fastest
//! axis, each followed by a cyclic rotation of the axes (x, y, z) → (z, x, y) into a second
//! array, rows in parallel with rayon; after three passes the layout is the original one.
//!
//! **Displacements.** [`displacement`] is the gradient field of a density's modes (one
//! inverse FFT per component); [`second_order_modes`] (`field/second_order.rs`) the modes of
//! the second-order Lagrangian source, whose [`displacement`] is the 2LPT displacement ψ₂.

use crate::error::{Error, Result};
use crate::hash::splitmix64;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;
use std::f64::consts::PI;

mod second_order;
pub use second_order::second_order_modes;

/// The largest grid side [`Grid::new`] accepts: 512³ points already take 2 GiB per complex
/// field, and one process holds the whole grid.
pub const MAX_GRID: usize = 512;

/// A periodic cubic grid: n³ points (n a power of two, 2 … [`MAX_GRID`]) in a box of side L
/// (Mpc/h). Built only through [`Grid::new`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    n: usize,
    box_size: f64,
}

/// The direction of a 3-D FFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// f_k = Σ_x f(x) exp(−i k·x) (no normalisation).
    Forward,
    /// f(x) = Σ_k f_k exp(+i k·x) (no normalisation): a field from its modes.
    Inverse,
}

impl Grid {
    /// A grid of `n`³ points in a periodic box of side `box_size` (Mpc/h). Fails with a
    /// one-line input error when `n` is not a power of two in 2 … [`MAX_GRID`] or the box
    /// size is not finite and > 0.
    pub fn new(n: usize, box_size: f64) -> Result<Self> {
        if !(n.is_power_of_two() && (2..=MAX_GRID).contains(&n)) {
            return Err(Error::input(format!(
                "initial conditions: grid n = {n} must be a power of two from 2 to {MAX_GRID}"
            )));
        }
        if !(box_size.is_finite() && box_size > 0.0) {
            return Err(Error::input(format!(
                "initial conditions: box size L = {box_size} Mpc/h must be finite and > 0"
            )));
        }
        Ok(Self { n, box_size })
    }

    /// n, the number of points along each side.
    pub fn n(&self) -> usize {
        self.n
    }

    /// L, the side of the box in Mpc/h.
    pub fn box_size(&self) -> f64 {
        self.box_size
    }

    /// n³, the number of points.
    pub fn points(&self) -> usize {
        self.n * self.n * self.n
    }

    /// 2π/L, the fundamental wave number in h/Mpc.
    pub fn fundamental(&self) -> f64 {
        2.0 * PI / self.box_size
    }

    /// The signed integer wave number of index `i` (0 … n−1) along one axis: i for i < n/2,
    /// i − n otherwise.
    pub fn wave_number(&self, i: usize) -> i64 {
        if i < self.n / 2 {
            i as i64
        } else {
            i as i64 - self.n as i64
        }
    }

    /// The integer wave vector m of the mode stored at linear index `index`.
    pub fn wave_vector(&self, index: usize) -> [i64; 3] {
        let n = self.n;
        [
            self.wave_number(index / (n * n)),
            self.wave_number(index / n % n),
            self.wave_number(index % n),
        ]
    }

    /// True when a component of m is −n/2 (a Nyquist plane, kept at zero).
    fn is_nyquist(&self, m: [i64; 3]) -> bool {
        m.contains(&-(self.n as i64 / 2))
    }
}

/// The random stream of the mode with integer wave vector `m` for `seed`: Xoshiro256++ seeded
/// (through `seed_from_u64`, i.e. SplitMix64 expansion) with the SplitMix64 hash chain
/// h = mix(mix(mix(mix(seed) ⊕ m_x) ⊕ m_y) ⊕ m_z), the components as two's-complement u64.
pub fn mode_stream(seed: u64, m: [i64; 3]) -> Xoshiro256PlusPlus {
    let key = m
        .iter()
        .fold(splitmix64(seed), |h, &c| splitmix64(h ^ c as u64));
    Xoshiro256PlusPlus::seed_from_u64(key)
}

/// How the amplitudes |δ_k| of the random modes are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Amplitudes {
    /// Rayleigh-distributed, √(P/V) √(−ln u₁): a Gaussian random field, ⟨|δ_k|²⟩ = P/V.
    #[default]
    Gaussian,
    /// |δ_k| = √(P/V) exactly, the phase kept (Angulo & Pontzen 2016; GADGET-4's
    /// `NGENIC_FIX_MODE_AMPLITUDES`): no cosmic variance in the power of a mode, a field that
    /// is no longer Gaussian.
    Fixed,
}

/// Which realisation of the density field [`density_modes`] draws: the seed, the amplitudes,
/// and whether it is the paired partner (every mode negated, i.e. every phase shifted by π:
/// Pontzen et al. 2016, GADGET-4's `NGENIC_MIRROR_PHASES`). One seed gives the same phases
/// with every choice of the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Realisation {
    /// The seed of every mode's random stream ([`mode_stream`]).
    pub seed: u64,
    /// Gaussian or fixed amplitudes.
    pub amplitudes: Amplitudes,
    /// The paired partner: δ_k → −δ_k.
    pub paired: bool,
}

impl Realisation {
    /// The Gaussian random field of `seed`, not paired.
    pub fn gaussian(seed: u64) -> Self {
        Self {
            seed,
            amplitudes: Amplitudes::Gaussian,
            paired: false,
        }
    }
}

/// The Fourier modes δ_k (dimensionless) of a random density field with power spectrum
/// `power` (P in (Mpc/h)³ as a function of |k| in h/Mpc, called only for k > 0) on `grid`,
/// the `realisation` drawn as the module docs describe: ⟨|δ_k|²⟩ = P(|k|)/L³ (exactly
/// |δ_k|² = P/L³ with fixed amplitudes), δ_{−k} = δ_k*, zero at k = 0 and on the Nyquist
/// planes. [`fft3`] with [`Direction::Inverse`] gives δ(x).
pub fn density_modes(
    grid: &Grid,
    power: impl Fn(f64) -> f64 + Sync,
    realisation: &Realisation,
) -> Vec<Complex64> {
    let volume = grid.box_size.powi(3);
    let kf = grid.fundamental();
    let sign = if realisation.paired { -1.0 } else { 1.0 };
    let mut modes = vec![Complex64::new(0.0, 0.0); grid.points()];
    modes
        .par_chunks_mut(grid.n)
        .enumerate()
        .for_each(|(row, out)| {
            for (l, mode) in out.iter_mut().enumerate() {
                let m = grid.wave_vector(row * grid.n + l);
                if m == [0, 0, 0] || grid.is_nyquist(m) {
                    continue;
                }
                // The drawing partner: the first non-zero component positive.
                let first = m.iter().copied().find(|&c| c != 0).unwrap_or(0);
                let canonical = if first > 0 { m } else { m.map(|c| -c) };
                let mut rng = mode_stream(realisation.seed, canonical);
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random::<f64>();
                let k = kf * ((m[0] * m[0] + m[1] * m[1] + m[2] * m[2]) as f64).sqrt();
                let rayleigh = match realisation.amplitudes {
                    Amplitudes::Gaussian => -u1.ln(),
                    Amplitudes::Fixed => 1.0,
                };
                let amplitude = (power(k) / volume * rayleigh).sqrt();
                let value = sign * Complex64::from_polar(amplitude, 2.0 * PI * u2);
                *mode = if first > 0 { value } else { value.conj() };
            }
        });
    modes
}

/// The Zel'dovich displacement ψ = ∇φ with ∇²φ = −δ (so that δ = −∇·ψ), in Mpc/h at the
/// grid points, from the modes `delta` (dimensionless, the layout and conventions of the
/// module docs, Hermitian) of a density contrast on `grid`: ψ_k = i k δ_k / k², k = 0 left at
/// zero. Returns the three components, each n³ values in the grid's layout (the real parts
/// of the inverse transforms; the imaginary parts vanish to rounding for Hermitian modes).
/// Holds two complex grids (32 bytes a point) besides `delta` and the result.
pub fn displacement(grid: &Grid, delta: &[Complex64]) -> [Vec<f64>; 3] {
    assert_eq!(delta.len(), grid.points(), "modes of another grid");
    let mut field = Vec::new();
    std::array::from_fn(|axis| {
        // i k_axis / k².
        synthesise(grid, &mut field, |index, k, k2| {
            Complex64::new(0.0, k[axis] / k2) * delta[index]
        });
        field.par_iter().map(|c| c.re).collect()
    })
}

/// Fills `field` with the n³ modes `mode(index, k, k²)` (k in h/Mpc) of `grid`, zero at
/// k = 0 where `mode` is not called, and transforms it to real space
/// ([`Direction::Inverse`]). The allocation of `field` is reused when it has the size.
fn synthesise(
    grid: &Grid,
    field: &mut Vec<Complex64>,
    mode: impl Fn(usize, [f64; 3], f64) -> Complex64 + Sync,
) {
    let kf = grid.fundamental();
    field.resize(grid.points(), Complex64::new(0.0, 0.0));
    field.par_iter_mut().enumerate().for_each(|(index, out)| {
        let k = grid.wave_vector(index).map(|c| kf * c as f64);
        let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
        *out = if k2 == 0.0 {
            Complex64::new(0.0, 0.0)
        } else {
            mode(index, k, k2)
        };
    });
    fft3(grid, field, Direction::Inverse);
}

/// The 3-D DFT of `data` (n³ values in the grid's layout) in place, unnormalised, in the
/// given direction: 1-D transforms along each axis, in parallel with rayon (the result does
/// not depend on the number of threads).
pub fn fft3(grid: &Grid, data: &mut Vec<Complex64>, direction: Direction) {
    let n = grid.n;
    assert_eq!(data.len(), grid.points(), "data of another grid");
    let fft = match direction {
        Direction::Forward => FftPlanner::new().plan_fft_forward(n),
        Direction::Inverse => FftPlanner::new().plan_fft_inverse(n),
    };
    let mut rotated = vec![Complex64::new(0.0, 0.0); data.len()];
    for _ in 0..3 {
        data.par_chunks_mut(n * n).for_each(|plane| {
            let mut scratch = vec![Complex64::new(0.0, 0.0); fft.get_inplace_scratch_len()];
            fft.process_with_scratch(plane, &mut scratch);
        });
        // rotated[z][x][y] = data[x][y][z]: the next pass transforms what was the middle axis.
        let source: &[Complex64] = data;
        rotated
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(row, out)| {
                let (z, x) = (row / n, row % n);
                for (y, value) in out.iter_mut().enumerate() {
                    *value = source[(x * n + y) * n + z];
                }
            });
        std::mem::swap(data, &mut rotated);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosmology::{Cosmology, PowerSpectrum};
    use crate::error::ErrorKind;

    #[test]
    fn fft3_matches_a_direct_dft() {
        let grid = Grid::new(4, 1.0).unwrap();
        let n = grid.n();
        let data: Vec<Complex64> = (0..grid.points())
            .map(|i| Complex64::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
            .collect();
        for (direction, sign) in [(Direction::Forward, -1.0), (Direction::Inverse, 1.0)] {
            let mut fast = data.clone();
            fft3(&grid, &mut fast, direction);
            for (k, &got) in fast.iter().enumerate() {
                let kv = [k / (n * n), k / n % n, k % n];
                let want: Complex64 = data
                    .iter()
                    .enumerate()
                    .map(|(x, &f)| {
                        let xv = [x / (n * n), x / n % n, x % n];
                        let dot: usize = (0..3).map(|a| kv[a] * xv[a]).sum();
                        f * Complex64::from_polar(1.0, sign * 2.0 * PI * dot as f64 / n as f64)
                    })
                    .sum();
                assert!((got - want).norm() < 1e-12, "{k}: {got} vs {want}");
            }
        }
    }

    fn lcdm_power() -> PowerSpectrum {
        let c = Cosmology::new(0.3111, 0.6889, 0.6766, 100.0).unwrap();
        PowerSpectrum::new(&c, 0.049, 0.9665, 0.8102).unwrap()
    }

    #[test]
    fn realisation_has_the_input_power_and_is_real() {
        let power = lcdm_power();
        let grid = Grid::new(128, 256.0).unwrap();
        let n = grid.n();
        let mut field = density_modes(&grid, |k| power.power(k), &Realisation::gaussian(42));
        fft3(&grid, &mut field, Direction::Inverse);
        let rms = (field.iter().map(|c| c.re * c.re).sum::<f64>() / grid.points() as f64).sqrt();
        let max_imag = field.iter().map(|c| c.im.abs()).fold(0.0, f64::max);
        println!(
            "δ(x): rms {rms:.4}, max |Im| / rms = {:.1e}",
            max_imag / rms
        );
        assert!(max_imag < 1e-10 * rms);
        // Measure: back to modes (divided by n³ for the forward convention), |δ_k|² V in
        // shells of width k_f, against the mean of P over the same modes.
        let mut real: Vec<Complex64> = field.iter().map(|c| Complex64::new(c.re, 0.0)).collect();
        fft3(&grid, &mut real, Direction::Forward);
        let volume = grid.box_size().powi(3);
        let norm = 1.0 / grid.points() as f64;
        let shells = n / 4; // up to half the Nyquist wave number
        let (mut measured, mut expected, mut count) =
            (vec![0.0; shells], vec![0.0; shells], vec![0usize; shells]);
        for (index, c) in real.iter().enumerate() {
            let m = grid.wave_vector(index);
            let r = ((m[0] * m[0] + m[1] * m[1] + m[2] * m[2]) as f64).sqrt();
            let shell = (r + 0.5) as usize;
            if shell == 0 || shell > shells {
                continue;
            }
            measured[shell - 1] += (c * norm).norm_sqr() * volume;
            expected[shell - 1] += power.power(r * grid.fundamental());
            count[shell - 1] += 1;
        }
        let mut ratio_sum = 0.0;
        let mut worst_sigmas: f64 = 0.0;
        for s in 0..shells {
            let ratio = measured[s] / expected[s];
            // |δ_k|² is exponential: relative variance 1 per independent mode (half of them).
            let sigma = (2.0 / count[s] as f64).sqrt();
            worst_sigmas = worst_sigmas.max((ratio - 1.0).abs() / sigma);
            ratio_sum += ratio;
        }
        let mean = ratio_sum / shells as f64;
        let total = measured.iter().sum::<f64>() / expected.iter().sum::<f64>();
        println!(
            "P_measured/P: mean over {shells} shells {mean:.4}, mode-weighted {total:.4}, \
             worst shell {worst_sigmas:.2} σ"
        );
        assert!((mean - 1.0).abs() < 0.05);
        assert!((total - 1.0).abs() < 0.01);
        assert!(worst_sigmas < 4.0);
    }

    /// Fixed amplitudes: the measured |δ_k|² of the field (δ(x) by the inverse transform, its
    /// real part transformed back, / n³) is P(k)/V for every mode but k = 0 and the Nyquist
    /// planes (zero), to rounding; every phase is the Gaussian field's of the same seed.
    #[test]
    fn fixed_amplitudes_have_the_power_of_every_mode_and_the_gaussian_phases() {
        let power = lcdm_power();
        let grid = Grid::new(16, 64.0).unwrap();
        let volume = grid.box_size().powi(3);
        let fixed = Realisation {
            amplitudes: Amplitudes::Fixed,
            ..Realisation::gaussian(3)
        };
        let modes = density_modes(&grid, |k| power.power(k), &fixed);
        let gaussian = density_modes(&grid, |k| power.power(k), &Realisation::gaussian(3));
        let mut field = modes.clone();
        fft3(&grid, &mut field, Direction::Inverse);
        let mut measured: Vec<Complex64> =
            field.iter().map(|c| Complex64::new(c.re, 0.0)).collect();
        fft3(&grid, &mut measured, Direction::Forward);
        let norm = 1.0 / grid.points() as f64;
        let (mut worst_power, mut worst_phase, mut largest_empty): (f64, f64, f64) =
            (0.0, 0.0, 0.0);
        for (index, c) in measured.iter().enumerate() {
            let m = grid.wave_vector(index);
            if m == [0, 0, 0] || m.contains(&-8) {
                assert_eq!(modes[index], Complex64::new(0.0, 0.0));
                largest_empty = largest_empty.max((c * norm).norm());
                continue;
            }
            let k = grid.fundamental() * ((m[0] * m[0] + m[1] * m[1] + m[2] * m[2]) as f64).sqrt();
            let ratio = (c * norm).norm_sqr() * volume / power.power(k);
            worst_power = worst_power.max((ratio - 1.0).abs());
            let phase =
                modes[index] / modes[index].norm() - gaussian[index] / gaussian[index].norm();
            worst_phase = worst_phase.max(phase.norm());
        }
        println!(
            "fixed amplitudes: |δ_k|² V/P − 1 within {worst_power:.1e}, phases within \
             {worst_phase:.1e} of the Gaussian field's, empty modes {largest_empty:.1e}"
        );
        assert!(worst_power < 1e-12 && worst_phase < 1e-14);
        assert!(largest_empty < 1e-12 * modes.iter().map(|c| c.norm()).fold(0.0, f64::max));
        // The Gaussian amplitudes do scatter.
        let scatter = gaussian
            .iter()
            .zip(&modes)
            .filter(|(_, f)| f.norm() > 0.0)
            .map(|(g, f)| (g.norm() / f.norm() - 1.0).abs())
            .fold(0.0, f64::max);
        assert!(scatter > 0.5);
    }

    #[test]
    fn modes_are_hermitian_and_zero_where_they_should_be() {
        let grid = Grid::new(8, 100.0).unwrap();
        let modes = density_modes(&grid, |k| 1.0 / k, &Realisation::gaussian(7));
        let n = grid.n();
        let index = |m: [i64; 3]| {
            let i = |c: i64| c.rem_euclid(n as i64) as usize;
            (i(m[0]) * n + i(m[1])) * n + i(m[2])
        };
        for (k, &c) in modes.iter().enumerate() {
            let m = grid.wave_vector(k);
            if m == [0, 0, 0] || m.contains(&-4) {
                assert_eq!(c, Complex64::new(0.0, 0.0));
            } else {
                assert!(c.norm() > 0.0);
                assert_eq!(c, modes[index(m.map(|c| -c))].conj());
            }
        }
    }

    #[test]
    fn same_seed_same_field_on_one_and_two_threads() {
        let power = lcdm_power();
        let grid = Grid::new(32, 64.0).unwrap();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut delta = density_modes(&grid, |k| power.power(k), &Realisation::gaussian(5));
                let psi = displacement(&grid, &delta);
                fft3(&grid, &mut delta, Direction::Inverse);
                (delta, psi)
            })
        };
        let (one, two) = (run(1), run(2));
        assert!(one == two);
        // Another seed gives another field; a larger grid of the same box shares the modes.
        let other = density_modes(&grid, |k| power.power(k), &Realisation::gaussian(6));
        let again = density_modes(&grid, |k| power.power(k), &Realisation::gaussian(5));
        assert!(other != again);
        let fine = Grid::new(64, 64.0).unwrap();
        let fine_modes = density_modes(&fine, |k| power.power(k), &Realisation::gaussian(5));
        let at = |g: &Grid, m: [i64; 3]| {
            let n = g.n() as i64;
            let i = |c: i64| c.rem_euclid(n) as usize;
            (i(m[0]) * g.n() + i(m[1])) * g.n() + i(m[2])
        };
        for m in [[1, 0, 0], [-3, 5, 2], [15, -15, 7]] {
            assert_eq!(again[at(&grid, m)], fine_modes[at(&fine, m)]);
        }
    }

    #[test]
    fn displacement_of_a_plane_wave() {
        // δ = A cos(k·x) with m = (3, −2, 5): δ_m = δ_{−m} = A/2, and
        // ψ = −A k/|k|² sin(k·x), i.e. ψ_x = −(A/k) sin(k x) for a wave along x.
        let grid = Grid::new(16, 50.0).unwrap();
        let n = grid.n();
        let amplitude = 0.3;
        for m in [[3i64, 0, 0], [3, -2, 5]] {
            let mut delta = vec![Complex64::new(0.0, 0.0); grid.points()];
            let at = |m: [i64; 3]| {
                let i = |c: i64| c.rem_euclid(n as i64) as usize;
                (i(m[0]) * n + i(m[1])) * n + i(m[2])
            };
            delta[at(m)] = Complex64::new(amplitude / 2.0, 0.0);
            delta[at(m.map(|c| -c))] = Complex64::new(amplitude / 2.0, 0.0);
            let psi = displacement(&grid, &delta);
            let k = m.map(|c| c as f64 * grid.fundamental());
            let k2: f64 = k.iter().map(|c| c * c).sum();
            let mut worst: f64 = 0.0;
            for index in 0..grid.points() {
                let x = [index / (n * n), index / n % n, index % n]
                    .map(|i| i as f64 * grid.box_size() / n as f64);
                let phase: f64 = (0..3).map(|a| k[a] * x[a]).sum();
                for (component, k_axis) in psi.iter().zip(k) {
                    let want = -amplitude * k_axis / k2 * phase.sin();
                    worst = worst.max((component[index] - want).abs());
                }
            }
            let scale = amplitude / k2.sqrt();
            println!(
                "plane wave m = {m:?}: max |ψ − ψ_exact| / (A/k) = {:.1e}",
                worst / scale
            );
            assert!(worst < 1e-10 * scale);
        }
    }

    #[test]
    fn bad_grids_are_input_errors() {
        for (n, l, needle) in [
            (100, 10.0, "n = 100"),
            (0, 10.0, "n = 0"),
            (1, 10.0, "n = 1"),
            (1024, 10.0, "n = 1024"),
            (64, 0.0, "L = 0"),
            (64, -5.0, "L = -5"),
            (64, f64::NAN, "L = NaN"),
            (64, f64::INFINITY, "L = inf"),
        ] {
            let err = Grid::new(n, l).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Input);
            assert!(err.message.contains(needle), "{}", err.message);
            assert!(!err.message.contains('\n'));
        }
    }
}
