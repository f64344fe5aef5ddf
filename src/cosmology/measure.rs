//! The matter power spectrum of particles in a periodic box, measured on a grid.
//!
//! **Estimator.** The particles' masses go onto an n³ periodic grid (`field.rs`'s layout: point
//! (i, j, l) at L (i, j, l)/n) by cloud-in-cell assignment; the density contrast
//! δ = ρ/ρ̄ − 1 is transformed forward ([`fft3`]) and normalised by 1/n³, so that δ_k has the
//! convention of `field.rs` and P = |δ_k|² V (V = L³) estimates the power spectrum. Per mode
//! the estimate is
//!
//! P̂(k) = (|δ_k|² V − S C(k)) / W²(k),
//!
//! W(k) = Π_axes sinc²(π m_i/n), the cloud-in-cell window (sinc x = sin x / x, m the integer
//! wave vector), squared in P; S the shot noise V Σm²/(Σm)² (V/N for equal masses) and
//! C(k) = Π_axes (1 − ⅔ sin²(π m_i/n)) the sum of W² over the aliased images of a flat (white)
//! spectrum (Jing 2005, eq. 20 for CIC). With C the Poisson noise is removed at every k; a bare
//! S/W² instead would over-subtract up to a factor 1/(1 − ⅔)³ = 27 at the grid's corner. The
//! subtraction is optional ([`ShotNoise`]): a perturbed lattice, such as Zel'dovich initial
//! conditions, has far less than Poisson noise at scales larger than its spacing, and there
//! subtracting S would remove more than the whole signal.
//!
//! **Shells.** Modes of 0 < |m| ≤ n/2 (|k| up to the grid's Nyquist wave number
//! k_N = π n/L), other than those on a Nyquist plane (a component −n/2, whose partner −m is not
//! on the grid), are averaged in shells of width k_f = 2π/L centred on integer multiples of
//! k_f: shell s holds s − ½ ≤ |m| < s + ½. Each shell reports the mean |k| of its modes, the
//! mean P̂ and its number of wave vectors (m and −m both counted: half of them are
//! independent).

use super::field::{fft3, Direction, Grid};
use crate::error::{Error, Result};
use glam::DVec3;
use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use std::f64::consts::PI;

/// The largest grid [`default_grid`] picks.
pub const MAX_DEFAULT_GRID: usize = 256;

/// Whether [`measured_power`] subtracts the Poisson shot noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShotNoise {
    /// Subtract S C(k)/W²(k) (see the module docs): right for particles that sample the
    /// density as a Poisson process (evolved, shell-crossed matter; random points).
    Subtract,
    /// Keep it: right for a perturbed lattice or glass (initial conditions), whose
    /// discreteness noise at k below the particle Nyquist wave number is far below S.
    Keep,
}

/// One spherical shell of the measured spectrum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerBin {
    /// The mean |k| of the shell's modes (inverse length units of the box, e.g. h/Mpc).
    pub k: f64,
    /// The mean estimated power P̂ (length³, e.g. (Mpc/h)³); may be ≤ 0 after shot-noise
    /// subtraction.
    pub power: f64,
    /// The number of wave vectors in the shell (m and −m both counted).
    pub modes: usize,
}

/// The default grid for `particles` particles: the largest power of two ≤ 2 N^{1/3}, at least
/// 8 and at most [`MAX_DEFAULT_GRID`] (twice the particle spacing resolves the particle
/// Nyquist wave number with the grid's Nyquist one to spare).
pub fn default_grid(particles: usize) -> usize {
    let target = 2.0 * (particles as f64).cbrt() * (1.0 + 1e-12);
    let mut n = 8;
    while n * 2 <= MAX_DEFAULT_GRID && (n * 2) as f64 <= target {
        n *= 2;
    }
    n
}

/// Per shell of |k|: the sum of |k|, of the power, and the number of modes.
type Shells = (Vec<f64>, Vec<f64>, Vec<usize>);

/// The power spectrum of the particles at `positions` (any length unit, the box's; wrapped
/// periodically into [0, `box_size`)) with `masses` (> 0, any unit) in a periodic box of side
/// `box_size`, measured on an `n`³ grid as the module docs describe, with or without the
/// shot noise. Returns the non-empty shells in order of k (k in inverse length units, P in
/// length³). Fails with a one-line input error for a bad grid or box, no particles, lengths
/// that differ, or a mass that is not finite and > 0.
pub fn measured_power(
    positions: &[DVec3],
    masses: &[f64],
    box_size: f64,
    n: usize,
    shot_noise: ShotNoise,
) -> Result<Vec<PowerBin>> {
    let grid = Grid::new(n, box_size)?;
    if positions.is_empty() || positions.len() != masses.len() {
        return Err(Error::input(format!(
            "power spectrum: {} positions and {} masses (need the same number, at least one)",
            positions.len(),
            masses.len()
        )));
    }
    if let Some(i) = masses.iter().position(|m| !(m.is_finite() && *m > 0.0)) {
        return Err(Error::input(format!(
            "power spectrum: particle {i} has mass {} (must be finite and > 0)",
            masses[i]
        )));
    }
    let mut field = cic_density(&grid, positions, masses);
    fft3(&grid, &mut field, Direction::Forward);

    let volume = box_size.powi(3);
    let total: f64 = masses.iter().sum();
    let squares: f64 = masses.iter().map(|m| m * m).sum();
    let shot = match shot_noise {
        ShotNoise::Subtract => volume * squares / (total * total),
        ShotNoise::Keep => 0.0,
    };
    let norm = 1.0 / grid.points() as f64;
    // Per axis: sinc²(π m/n) (the CIC window) and 1 − ⅔ sin²(π m/n) (its aliased white sum).
    let axis: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let x = PI * grid.wave_number(i) as f64 / n as f64;
            let sinc = if x == 0.0 { 1.0 } else { x.sin() / x };
            (sinc * sinc, 1.0 - 2.0 / 3.0 * x.sin().powi(2))
        })
        .collect();
    let half = n / 2;
    let shells = half + 1;
    let kf = grid.fundamental();
    // Each plane of the grid is summed on its own, and the planes in order: the same sums,
    // bit for bit, however the threads share the planes.
    let planes: Vec<Shells> = field
        .par_chunks(n * n)
        .enumerate()
        .map(|(i, plane)| {
            let mut t: Shells = (vec![0.0; shells], vec![0.0; shells], vec![0usize; shells]);
            let mi = grid.wave_number(i);
            for (j, values) in plane.chunks(n).enumerate() {
                let mj = grid.wave_number(j);
                for (l, value) in values.iter().enumerate() {
                    let ml = grid.wave_number(l);
                    let m = [mi, mj, ml];
                    if m.contains(&-(half as i64)) {
                        continue;
                    }
                    let r = ((mi * mi + mj * mj + ml * ml) as f64).sqrt();
                    if r == 0.0 || r > half as f64 {
                        continue;
                    }
                    let s = (r + 0.5) as usize;
                    let w = axis[i].0 * axis[j].0 * axis[l].0;
                    let c_alias = axis[i].1 * axis[j].1 * axis[l].1;
                    let raw = (value * norm).norm_sqr() * volume;
                    t.0[s] += r * kf;
                    t.1[s] += (raw - shot * c_alias) / (w * w);
                    t.2[s] += 1;
                }
            }
            t
        })
        .collect();
    let (mut sum_k, mut sum_p, mut count) =
        (vec![0.0; shells], vec![0.0; shells], vec![0usize; shells]);
    for (k, p, c) in &planes {
        for s in 0..shells {
            sum_k[s] += k[s];
            sum_p[s] += p[s];
            count[s] += c[s];
        }
    }
    Ok((1..shells)
        .filter(|&s| count[s] > 0)
        .map(|s| PowerBin {
            k: sum_k[s] / count[s] as f64,
            power: sum_p[s] / count[s] as f64,
            modes: count[s],
        })
        .collect())
}

/// The density contrast δ = ρ/ρ̄ − 1 of the particles on `grid` by cloud-in-cell assignment,
/// as complex values (imaginary parts 0) in the grid's layout.
fn cic_density(grid: &Grid, positions: &[DVec3], masses: &[f64]) -> Vec<Complex64> {
    let n = grid.n();
    let scale = n as f64 / grid.box_size();
    let mut rho = vec![0.0f64; grid.points()];
    for (x, &m) in positions.iter().zip(masses) {
        let mut base = [0usize; 3];
        let mut frac = [0.0f64; 3];
        for a in 0..3 {
            // The position in grid spacings, wrapped into [0, n).
            let u = (x[a] * scale).rem_euclid(n as f64);
            let cell = u.floor();
            frac[a] = u - cell;
            base[a] = (cell as usize) % n;
        }
        for (di, wi) in [(0, 1.0 - frac[0]), (1, frac[0])] {
            let i = (base[0] + di) % n;
            for (dj, wj) in [(0, 1.0 - frac[1]), (1, frac[1])] {
                let j = (base[1] + dj) % n;
                let row = (i * n + j) * n;
                let wij = m * wi * wj;
                rho[row + base[2]] += wij * (1.0 - frac[2]);
                rho[row + (base[2] + 1) % n] += wij * frac[2];
            }
        }
    }
    let mean = masses.iter().sum::<f64>() / grid.points() as f64;
    rho.into_par_iter()
        .map(|r| Complex64::new(r / mean - 1.0, 0.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosmology::{cosmological_ics, Cosmology, IcsOptions, LptOrder, PowerSpectrum};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn default_grids() {
        assert_eq!(default_grid(1), 8);
        assert_eq!(default_grid(32 * 32 * 32), 64);
        assert_eq!(default_grid(64 * 64 * 64), 128);
        assert_eq!(default_grid(100_000), 64);
        assert_eq!(default_grid(512 * 512 * 512), 256);
    }

    /// Zel'dovich initial conditions (64³ particles, 256 Mpc/h, z = 49) have the linear
    /// spectrum D(a)² P(k) on large scales. Their shot noise is kept: V/N = 64 (Mpc/h)³ is
    /// several times the signal at z = 49, but a perturbed lattice does not carry it.
    #[test]
    fn zeldovich_particles_have_the_linear_spectrum() {
        let cosmology = Cosmology::new(0.3, 0.7, 0.7, 100.0).unwrap();
        let power = PowerSpectrum::new(&cosmology, 0.045, 0.96, 0.8).unwrap();
        let a = 1.0 / 50.0;
        let (n, box_size) = (64, 256.0);
        let options = IcsOptions {
            order: LptOrder::Zeldovich,
            ..IcsOptions::new(n, box_size, a, 7)
        };
        let ics = cosmological_ics(&cosmology, &power, &options).unwrap();
        let mesh = default_grid(ics.positions.len());
        assert_eq!(mesh, 128);
        let d2 = cosmology.growth(a).unwrap().powi(2);
        let bins =
            measured_power(&ics.positions, &ics.masses, box_size, mesh, ShotNoise::Keep).unwrap();
        let nyquist = PI * mesh as f64 / box_size;
        assert!(bins.iter().all(|b| b.power.is_finite() && b.k.is_finite()));
        assert!(bins.last().unwrap().k <= nyquist);
        let low: Vec<f64> = bins
            .iter()
            .filter(|b| b.k < nyquist / 4.0)
            .map(|b| b.power / (d2 * power.power(b.k)))
            .collect();
        let mean = low.iter().sum::<f64>() / low.len() as f64;
        println!(
            "{} shells below k_N/4 = {:.3} h/Mpc: mean P/P_lin = {mean:.4}, ratios {:?}",
            low.len(),
            nyquist / 4.0,
            low.iter()
                .map(|r| (r * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
        assert!(low.len() >= 10);
        assert!((mean - 1.0).abs() < 0.1, "mean P/P_lin = {mean}");
        // With the Poisson term subtracted the same shells go far below the linear spectrum:
        // the subtraction is wrong for a lattice, as the module docs say.
        let subtracted = measured_power(
            &ics.positions,
            &ics.masses,
            box_size,
            mesh,
            ShotNoise::Subtract,
        )
        .unwrap();
        let low_sub = subtracted
            .iter()
            .filter(|b| b.k < nyquist / 4.0)
            .map(|b| b.power / (d2 * power.power(b.k)))
            .sum::<f64>()
            / low.len() as f64;
        println!("with V/N subtracted: mean P/P_lin = {low_sub:.3}");
        assert!(low_sub < 0.0);
    }

    /// Randomly placed (Poisson) particles have no power: after the shot noise is subtracted
    /// every shell is 0 within its sampling scatter, up to the Nyquist wave number.
    #[test]
    fn poisson_particles_have_no_power_after_shot_noise_subtraction() {
        let box_size = 100.0;
        let count = 40_000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let positions: Vec<DVec3> = (0..count)
            .map(|_| DVec3::new(rng.random(), rng.random(), rng.random()) * box_size)
            .collect();
        // Unequal masses: the shot noise is V Σm²/(Σm)².
        let masses: Vec<f64> = (0..count).map(|i| 1.0 + (i % 3) as f64).collect();
        let mesh = 32;
        let bins =
            measured_power(&positions, &masses, box_size, mesh, ShotNoise::Subtract).unwrap();
        let total: f64 = masses.iter().sum();
        let shot = box_size.powi(3) * masses.iter().map(|m| m * m).sum::<f64>() / total.powi(2);
        let kept = measured_power(&positions, &masses, box_size, mesh, ShotNoise::Keep).unwrap();
        let (mut chi2, mut worst) = (0.0, 0.0f64);
        for (b, raw) in bins.iter().zip(&kept) {
            // Each wave vector's estimate is exponential with standard deviation equal to its
            // mean, the subtracted S C/W²; half of the shell's wave vectors are independent.
            // The shell's subtracted term is raw − P̂, and its scatter about 1/√(modes/2)
            // of it (the per-mode terms vary little within a shell).
            let noise = raw.power - b.power;
            let sigma = noise / (b.modes as f64 / 2.0).sqrt();
            let z = b.power / sigma;
            chi2 += z * z;
            worst = worst.max(z.abs());
            assert!(b.power.is_finite());
        }
        let chi2 = chi2 / bins.len() as f64;
        println!(
            "Poisson: S = {shot:.2}, {} shells, worst |P|/σ = {worst:.2}, χ²/shell = {chi2:.2}",
            bins.len()
        );
        assert!(worst < 4.5);
        assert!(chi2 < 2.0);
        // The raw power at low k is the bare shot noise (C ≈ W² ≈ 1 there).
        assert!((kept[0].power / shot - 1.0).abs() < 0.5);
    }

    /// The spectrum is the same, bit for bit, on one thread and on several (a run's power is
    /// compared with its initial conditions' shell by shell).
    #[test]
    fn the_spectrum_does_not_depend_on_the_threads() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let positions: Vec<DVec3> = (0..5000)
            .map(|_| DVec3::new(rng.random(), rng.random(), rng.random()) * 10.0)
            .collect();
        let masses = vec![1.0; positions.len()];
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let bins = pool
                .install(|| measured_power(&positions, &masses, 10.0, 16, ShotNoise::Keep))
                .unwrap();
            bins.iter()
                .map(|b| (b.k.to_bits(), b.power.to_bits(), b.modes))
                .collect::<Vec<_>>()
        };
        assert_eq!(on(1), on(3));
    }

    #[test]
    fn bad_inputs_are_input_errors() {
        let p = [DVec3::ZERO];
        assert!(measured_power(&p, &[1.0], 10.0, 12, ShotNoise::Keep).is_err());
        assert!(measured_power(&p, &[1.0], 0.0, 8, ShotNoise::Keep).is_err());
        assert!(measured_power(&p, &[], 10.0, 8, ShotNoise::Keep).is_err());
        assert!(measured_power(&[], &[], 10.0, 8, ShotNoise::Keep).is_err());
        let err = measured_power(&p, &[f64::NAN], 10.0, 8, ShotNoise::Keep).unwrap_err();
        assert!(err.message.contains("particle 0"), "{}", err.message);
    }
}
