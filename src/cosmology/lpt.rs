//! Cosmological initial conditions by Lagrangian perturbation theory: particles start on the
//! points of a periodic grid, displaced along the linear density field (Zel'dovich, 1LPT) and
//! its second-order correction (2LPT: Scoccimarro 1998; Crocce, Pueblas & Scoccimarro 2006,
//! as 2LPTic and GADGET-4's N-GenIC make them).
//!
//! With δ the density modes realised at a = 1 (`field.rs`), ψ₁ their displacement
//! (∇·ψ₁ = −δ) and ψ₂ the second-order one (`field/second_order.rs`: ψ₂ = ∇φ₂,
//! ∇²φ₂ = Σ_{i>j} (φ,ii φ,jj − φ,ij²), ∇²φ = −δ), a particle of grid point q is at
//! x = q + D₁ ψ₁(q) + D₂ ψ₂(q) (comoving, Mpc/h, wrapped into [0, L)) with the peculiar
//! velocity v = a dx/dt = a H(a) (f₁ D₁ ψ₁ + f₂ D₂ ψ₂) in km/s, where H(a) = 100 E(a)
//! km/s/(Mpc/h), D₁ = D(a) is the linear growth factor (D(1) = 1), f₁ = d ln D/d ln a, and
//! D₂ ≈ −(3/7) D₁² Ω_m(a)^{−1/143}, f₂ ≈ 2 Ω_m(a)^{6/11} (`growth.rs`). Zel'dovich initial
//! conditions leave out the ψ₂ terms. Every particle has the mass Ω_m ρ_crit L³/n³ with
//! ρ_crit = 27.7536627 × 10¹⁰ M_sun/h per (Mpc/h)³. (GADGET's snapshots store v/√a rather
//! than v.)
//!
//! Both orders go one way: the modes of the displacement, D₁ δ + D₂ δ₂, and of the velocity,
//! a H (f₁ D₁ δ + f₂ D₂ δ₂) (δ₂ = 0 for Zel'dovich), are formed in place of δ and δ₂, and
//! each is turned into its three components by [`displacement`], the first dropped before
//! the second is transformed.

use super::field::{density_modes, displacement, second_order_modes, Grid, Realisation};
use super::{Cosmology, PowerSpectrum};
use crate::error::{Error, Result};
use glam::DVec3;
use rayon::prelude::*;
use rustfft::num_complex::Complex64;

/// The critical density today, 3H0²/(8πG), in 10¹⁰ M_sun/h per (Mpc/h)³.
pub const RHO_CRIT: f64 = 27.7536627;

/// Particles of cosmological initial conditions in a periodic box (see the module docs for
/// units): comoving positions in [0, L)³ in Mpc/h, peculiar velocities in km/s, masses in
/// 10¹⁰ M_sun/h, in grid order (point (i, j, l) is particle (i n + j) n + l).
#[derive(Clone, Debug, PartialEq)]
pub struct CosmologicalIcs {
    /// Comoving positions in Mpc/h, each component in [0, L).
    pub positions: Vec<DVec3>,
    /// Peculiar velocities a dx/dt in km/s.
    pub velocities: Vec<DVec3>,
    /// Masses in 10¹⁰ M_sun/h (all equal).
    pub masses: Vec<f64>,
    /// The box side L in Mpc/h.
    pub box_size: f64,
    /// The starting scale factor a (dimensionless).
    pub scale_factor: f64,
    /// The starting redshift z = 1/a − 1.
    pub redshift: f64,
}

/// The order of Lagrangian perturbation theory the particles are displaced by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LptOrder {
    /// First order: the Zel'dovich approximation, x = q + D₁ ψ₁.
    Zeldovich,
    /// Second order (2LPT): x = q + D₁ ψ₁ + D₂ ψ₂, what N-GenIC and 2LPTic make; transients
    /// from the start decay as a⁻² rather than Zel'dovich's a⁻¹ (Crocce et al. 2006).
    #[default]
    Second,
}

/// What [`cosmological_ics`] makes: n³ particles in a box of side L at the scale factor
/// a_start, the order of the displacements and the realisation of the field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IcsOptions {
    /// n, particles per side: a power of two, 2 … 512.
    pub grid: usize,
    /// L, the side of the periodic box in Mpc/h (comoving).
    pub box_size: f64,
    /// The starting scale factor, in (0, 1].
    pub a_start: f64,
    /// Zel'dovich or 2LPT.
    pub order: LptOrder,
    /// The seed, Gaussian or fixed amplitudes, paired or not.
    pub realisation: Realisation,
}

impl IcsOptions {
    /// 2LPT initial conditions of the Gaussian field of `seed` (not paired), n = `grid`
    /// particles per side in a box of side `box_size` (Mpc/h) at the scale factor `a_start`.
    pub fn new(grid: usize, box_size: f64, a_start: f64, seed: u64) -> Self {
        Self {
            grid,
            box_size,
            a_start,
            order: LptOrder::Second,
            realisation: Realisation::gaussian(seed),
        }
    }
}

/// Initial conditions for `cosmology` with the linear power spectrum `power` (built from the
/// same cosmology), as `options` say: n³ particles displaced by Zel'dovich or 2LPT (module
/// docs), the same particles for the same arguments whatever the number of threads. Fails
/// with a one-line input error for a bad n, box size or a_start, or a power spectrum of
/// another Ω_m or h. Needs [`COSMOLOGICAL_ICS_BYTES`] per particle at its peak.
pub fn cosmological_ics(
    cosmology: &Cosmology,
    power: &PowerSpectrum,
    options: &IcsOptions,
) -> Result<CosmologicalIcs> {
    let IcsOptions {
        grid: n,
        box_size,
        a_start,
        order,
        realisation,
    } = *options;
    let grid = Grid::new(n, box_size)?;
    if !(a_start.is_finite() && a_start > 0.0 && a_start <= 1.0) {
        return Err(Error::input(format!(
            "initial conditions: starting scale factor a = {a_start} must be in (0, 1]"
        )));
    }
    if power.omega_m() != cosmology.omega_m() || power.h() != cosmology.h() {
        return Err(Error::input(format!(
            "initial conditions: the power spectrum has omega_m = {}, h = {} but the cosmology \
             omega_m = {}, h = {}",
            power.omega_m(),
            power.h(),
            cosmology.omega_m(),
            cosmology.h()
        )));
    }
    let d1 = cosmology.growth(a_start)?;
    let f1 = cosmology.growth_rate(a_start)?;
    let a_hubble = a_start * 100.0 * cosmology.e(a_start);

    // δ and δ₂ (zero for Zel'dovich), then in their places the modes of the displacement,
    // D₁ δ + D₂ δ₂, and of the velocity, a H (f₁ D₁ δ + f₂ D₂ δ₂).
    let mut first = density_modes(&grid, |k| power.power(k), &realisation);
    let (mut second, d2, f2) = match order {
        LptOrder::Zeldovich => (vec![Complex64::new(0.0, 0.0); grid.points()], 0.0, 0.0),
        LptOrder::Second => (
            second_order_modes(&grid, &first),
            cosmology.second_order_growth(a_start)?,
            cosmology.second_order_growth_rate(a_start)?,
        ),
    };
    first
        .par_iter_mut()
        .zip(&mut second)
        .for_each(|(delta, delta2)| {
            let (x, v) = (
                d1 * *delta + d2 * *delta2,
                a_hubble * (f1 * d1 * *delta + f2 * d2 * *delta2),
            );
            (*delta, *delta2) = (x, v);
        });
    let spacing = box_size / n as f64;
    let [dx, dy, dz] = displacement(&grid, &first);
    drop(first);
    let positions: Vec<DVec3> = (0..grid.points())
        .into_par_iter()
        .map(|index| {
            let q = DVec3::new(
                (index / (n * n)) as f64,
                (index / n % n) as f64,
                (index % n) as f64,
            ) * spacing;
            let x = q + DVec3::new(dx[index], dy[index], dz[index]);
            DVec3::new(
                wrap(x.x, box_size),
                wrap(x.y, box_size),
                wrap(x.z, box_size),
            )
        })
        .collect();
    drop((dx, dy, dz));
    let [vx, vy, vz] = displacement(&grid, &second);
    drop(second);
    let velocities: Vec<DVec3> = (0..grid.points())
        .into_par_iter()
        .map(|index| DVec3::new(vx[index], vy[index], vz[index]))
        .collect();
    drop((vx, vy, vz));
    let mass = cosmology.omega_m() * RHO_CRIT * spacing.powi(3);
    Ok(CosmologicalIcs {
        positions,
        velocities,
        masses: vec![mass; grid.points()],
        box_size,
        scale_factor: a_start,
        redshift: 1.0 / a_start - 1.0,
    })
}

/// Bytes of host memory per particle that [`cosmological_ics`] and
/// [`CosmologicalIcs::into_gadget`] need at their peak, Zel'dovich or 2LPT: while the
/// velocity field's last component is transformed, the positions (24), the velocity modes
/// (16), two velocity components (16), [`displacement`]'s field and its FFT's second array
/// (32). (The second-order source peaks lower, at 64: the density modes, two complex and two
/// real grids; the finished particles with their ids take 64, and at most 80 while
/// `cut_sphere` cuts a sphere from them.)
pub const COSMOLOGICAL_ICS_BYTES: u64 = 88;

impl CosmologicalIcs {
    /// The particles in GADGET's default units, as GADGET reads initial conditions: comoving
    /// positions in kpc/h (1000 × Mpc/h, wrapped into [0, 1000 L)), velocities in GADGET's
    /// snapshot convention u = v/√a (km/s, v the peculiar velocity), masses in 10¹⁰ M_sun/h,
    /// ids 1 … n³ in grid order (GADGET's initial conditions count from 1). The box side in
    /// kpc/h is `1000 * box_size`.
    pub fn into_gadget(self) -> crate::particles::Particles {
        let box_kpc = 1000.0 * self.box_size;
        let to_u = 1.0 / self.scale_factor.sqrt();
        let n = self.masses.len();
        let mut pos = self.positions;
        pos.par_iter_mut().for_each(|x| {
            // x < L, so 1000 x rounds to at most 1000 L, which wraps to 0.
            *x = (*x * 1000.0).to_array().map(|c| wrap(c, box_kpc)).into();
        });
        let mut vel = self.velocities;
        vel.par_iter_mut().for_each(|v| *v *= to_u);
        crate::particles::Particles {
            pos,
            vel,
            mass: self.masses,
            id: (1..=n as u64).collect(),
        }
    }
}

/// `x` wrapped into [0, `period`): `rem_euclid`, whose result rounds up to `period` itself
/// for a tiny negative `x`, which is then taken as 0.
fn wrap(x: f64, period: f64) -> f64 {
    let r = x.rem_euclid(period);
    if r < period {
        r
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosmology::field::Amplitudes;
    use crate::error::ErrorKind;

    fn lcdm() -> (Cosmology, PowerSpectrum) {
        let c = Cosmology::new(0.3111, 0.6889, 0.6766, 100.0).unwrap();
        let p = PowerSpectrum::new(&c, 0.049, 0.9665, 0.8102).unwrap();
        (c, p)
    }

    #[test]
    fn wrap_stays_below_the_period() {
        assert_eq!(wrap(-1e-18, 100.0), 0.0);
        assert_eq!(wrap(100.0, 100.0), 0.0);
        assert_eq!(wrap(-25.0, 100.0), 75.0);
        assert_eq!(wrap(230.5, 100.0), 30.5);
    }

    #[test]
    fn particles_in_the_box_with_zero_momentum() {
        let (c, p) = lcdm();
        // A small box at a = 1: displacements of several cells, many particles cross the edge.
        let (n, l, a) = (32, 20.0, 1.0);
        let ics = cosmological_ics(&c, &p, &IcsOptions::new(n, l, a, 3)).unwrap();
        assert_eq!(ics.positions.len(), n * n * n);
        assert_eq!(
            (ics.scale_factor, ics.redshift, ics.box_size),
            (1.0, 0.0, l)
        );
        for x in &ics.positions {
            for v in x.to_array() {
                assert!((0.0..l).contains(&v), "{x}");
            }
        }
        // Some particles moved by more than their distance to the edge.
        let spacing = l / n as f64;
        let crossed = ics
            .positions
            .iter()
            .enumerate()
            .filter(|&(i, x)| {
                let q = (i / (n * n)) as f64 * spacing;
                (x.x - q).abs() > 0.5 * l
            })
            .count();
        println!("{crossed} particles wrapped along x");
        assert!(crossed > 0);
        // Σ m v = 0 to rounding: the k = 0 mode of ψ is zero.
        let momentum: DVec3 = ics
            .velocities
            .iter()
            .zip(&ics.masses)
            .map(|(v, m)| *v * *m)
            .sum();
        let scale: f64 = ics
            .velocities
            .iter()
            .zip(&ics.masses)
            .map(|(v, m)| v.length() * m)
            .sum();
        println!("|Σ m v| / Σ m |v| = {:.1e}", momentum.length() / scale);
        assert!(momentum.length() < 1e-12 * scale);
        // Mass: Ω_m ρ_crit L³ in all.
        let total: f64 = ics.masses.iter().sum();
        assert!((total / (0.3111 * RHO_CRIT * l * l * l) - 1.0).abs() < 1e-12);
    }

    /// Zel'dovich initial conditions of `seed`, n = 16 in a box of 100 Mpc/h at a = 0.02.
    fn zeldovich(c: &Cosmology, p: &PowerSpectrum, seed: u64) -> CosmologicalIcs {
        let options = IcsOptions {
            order: LptOrder::Zeldovich,
            ..IcsOptions::new(16, 100.0, 0.02, seed)
        };
        cosmological_ics(c, p, &options).unwrap()
    }

    /// `x` − `y` at its nearest periodic image in a box of side `l`.
    fn separation(x: DVec3, y: DVec3, l: f64) -> DVec3 {
        let d = x - y;
        d - l * (d / l).round()
    }

    #[test]
    fn velocities_follow_the_displacements() {
        // Einstein–de Sitter: D = a, f = 1, H = 100 a^{-3/2}, so v = a H (x − q) =
        // 100 (x − q)/√a km/s for particles that did not wrap.
        let c = Cosmology::new(1.0, 0.0, 0.7, 100.0).unwrap();
        let p = PowerSpectrum::new(&c, 0.05, 1.0, 0.8).unwrap();
        let (n, l, a) = (16, 100.0, 0.02_f64);
        let ics = zeldovich(&c, &p, 9);
        assert!((ics.redshift - 49.0).abs() < 1e-12);
        let spacing = l / n as f64;
        let (mut worst, mut largest): (f64, f64) = (0.0, 0.0);
        let mut checked = 0;
        for (i, (x, v)) in ics.positions.iter().zip(&ics.velocities).enumerate() {
            let q = DVec3::new((i / (n * n)) as f64, (i / n % n) as f64, (i % n) as f64) * spacing;
            let d = *x - q;
            if d.abs().max_element() < 0.25 * l {
                let want = 100.0 / a.sqrt() * d;
                worst = worst.max((*v - want).length());
                largest = largest.max(want.length());
                checked += 1;
            }
        }
        println!(
            "EdS: v vs 100 (x − q)/√a over {checked} particles: {:.1e} of the largest",
            worst / largest
        );
        assert!(checked > n * n * n / 2 && worst < 1e-8 * largest);
    }

    /// 2LPT adds D₂ ψ₂ to Zel'dovich's positions and a H f₂ D₂ ψ₂ to its velocities, with
    /// ψ₂ quadratic in the field: halving σ8 halves Zel'dovich's displacement and quarters
    /// the difference, which is a small correction (Einstein–de Sitter at z = 49: D₂ = −(3/7)
    /// a², and a H f₂ = 2 · 100/√a km/s per Mpc/h). The paired field's 2LPT displacement is
    /// −D₁ ψ₁ + D₂ ψ₂.
    #[test]
    fn second_order_is_a_quadratic_correction_to_zeldovich() {
        let c = Cosmology::new(1.0, 0.0, 0.7, 100.0).unwrap();
        let (n, l, a, seed) = (16, 100.0, 0.02, 9);
        let spacing = l / n as f64;
        let q = |i: usize| {
            DVec3::new((i / (n * n)) as f64, (i / n % n) as f64, (i % n) as f64) * spacing
        };
        // For σ8 and σ8/2: Zel'dovich's x − q and v, 2LPT's x and v minus them.
        let run = |sigma8: f64| {
            let p = PowerSpectrum::new(&c, 0.05, 1.0, sigma8).unwrap();
            let first = zeldovich(&c, &p, seed);
            let second = cosmological_ics(&c, &p, &IcsOptions::new(n, l, a, seed)).unwrap();
            let paired = IcsOptions {
                realisation: Realisation {
                    paired: true,
                    ..Realisation::gaussian(seed)
                },
                ..IcsOptions::new(n, l, a, seed)
            };
            let paired = cosmological_ics(&c, &p, &paired).unwrap();
            let zeldovich: Vec<DVec3> = (0..n * n * n)
                .map(|i| separation(first.positions[i], q(i), l))
                .collect();
            let dx: Vec<DVec3> = (0..n * n * n)
                .map(|i| separation(second.positions[i], first.positions[i], l))
                .collect();
            let dv: Vec<DVec3> = (0..n * n * n)
                .map(|i| second.velocities[i] - first.velocities[i])
                .collect();
            // Paired: −D₁ ψ₁ + D₂ ψ₂ = −(Zel'dovich) + (the 2LPT correction).
            let largest = zeldovich.iter().map(|d| d.length()).fold(0.0, f64::max);
            let worst = (0..n * n * n)
                .map(|i| (separation(paired.positions[i], q(i), l) + zeldovich[i] - dx[i]).length())
                .fold(0.0, f64::max);
            println!(
                "σ8 = {sigma8}: paired 2LPT − (−D1 ψ1 + D2 ψ2): {:.1e}",
                worst / largest
            );
            assert!(worst < 1e-12 * largest);
            (zeldovich, dx, dv)
        };
        let (z1, dx1, dv1) = run(0.8);
        let (z2, dx2, dv2) = run(0.4);
        let max = |v: &[DVec3]| v.iter().map(|d| d.length()).fold(0.0, f64::max);
        let misfit = |big: &[DVec3], small: &[DVec3], ratio: f64| {
            big.iter()
                .zip(small)
                .map(|(b, s)| (*b - ratio * *s).length())
                .fold(0.0, f64::max)
                / max(big)
        };
        let (linear, quadratic, velocity) = (
            misfit(&z1, &z2, 2.0),
            misfit(&dx1, &dx2, 4.0),
            misfit(&dv1, &dv2, 4.0),
        );
        let (share1, share2) = (max(&dx1) / max(&z1), max(&dx2) / max(&z2));
        println!(
            "halving σ8: Zel'dovich ×1/2 to {linear:.1e}, the 2LPT correction ×1/4 to \
             {quadratic:.1e} (velocities {velocity:.1e}); the correction is {share1:.2e} then \
             {share2:.2e} of the displacement"
        );
        assert!(linear < 1e-12 && quadratic < 1e-9 && velocity < 1e-9);
        assert!(share1 > 1e-3 && share1 < 0.05 && (share2 / share1 - 0.5).abs() < 1e-6);
        // Einstein–de Sitter: v₂ = a H f₂ D₂ ψ₂ = 2 · 100/√a (x₂ − x₁).
        let factor = 2.0 * 100.0 / a.sqrt();
        let worst = dx1
            .iter()
            .zip(&dv1)
            .map(|(x, v)| (*v - factor * *x).length())
            .fold(0.0, f64::max);
        println!(
            "EdS: 2LPT velocity correction vs 200 Δx/√a: {:.1e}",
            worst / max(&dv1)
        );
        assert!(worst < 1e-9 * max(&dv1));
        // D₂ ψ₂ with D₂ = −(3/7) a², ψ₂ from the library's source at a = 1.
        let p = PowerSpectrum::new(&c, 0.05, 1.0, 0.8).unwrap();
        let grid = Grid::new(n, l).unwrap();
        let delta = density_modes(&grid, |k| p.power(k), &Realisation::gaussian(seed));
        let psi2 = displacement(&grid, &second_order_modes(&grid, &delta));
        let d2 = -3.0 / 7.0 * a * a;
        let worst = (0..n * n * n)
            .map(|i| (dx1[i] - d2 * DVec3::new(psi2[0][i], psi2[1][i], psi2[2][i])).length())
            .fold(0.0, f64::max);
        println!(
            "EdS: 2LPT position correction vs −(3/7) a² ψ₂: {:.1e}",
            worst / max(&dx1)
        );
        assert!(worst < 1e-9 * max(&dx1));
    }

    /// The same initial conditions, bit for bit, on one and on two threads, for both orders
    /// and every kind of field.
    #[test]
    fn same_particles_on_one_and_two_threads() {
        let (c, p) = lcdm();
        let cases = [
            (LptOrder::Second, Amplitudes::Gaussian, false),
            (LptOrder::Second, Amplitudes::Fixed, true),
            (LptOrder::Zeldovich, Amplitudes::Fixed, false),
        ];
        for (order, amplitudes, paired) in cases {
            let options = IcsOptions {
                order,
                realisation: Realisation {
                    seed: 21,
                    amplitudes,
                    paired,
                },
                ..IcsOptions::new(32, 64.0, 0.05, 21)
            };
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| cosmological_ics(&c, &p, &options).unwrap())
            };
            let (one, two) = (run(1), run(2));
            assert!(one == two, "{options:?}");
        }
    }

    #[test]
    fn gadget_units() {
        let (c, p) = lcdm();
        let (n, l, a) = (8, 50.0, 0.25);
        let ics = cosmological_ics(&c, &p, &IcsOptions::new(n, l, a, 4)).unwrap();
        let g = ics.clone().into_gadget();
        assert_eq!(g.len(), n * n * n);
        assert_eq!(g.id, (1..=512).collect::<Vec<u64>>());
        assert_eq!(g.mass, ics.masses);
        for (i, (x, y)) in g.pos.iter().zip(&ics.positions).enumerate() {
            for (gx, mx) in x.to_array().into_iter().zip(y.to_array()) {
                assert!((0.0..50_000.0).contains(&gx), "{i}: {x}");
                let same = (gx - 1000.0 * mx).abs() < 1e-9 || (gx == 0.0 && 1000.0 * mx == 5e4);
                assert!(same, "{i}: {x} vs {y}");
            }
            assert_eq!(g.vel[i], ics.velocities[i] * 2.0);
        }
        // A position just below L that rounds up to 1000 L in kpc/h wraps to 0.
        let l = 41.49550004702527;
        let mut edge = cosmological_ics(&c, &p, &IcsOptions::new(2, l, a, 4)).unwrap();
        edge.positions[0].x = f64::from_bits(l.to_bits() - 1);
        assert!(edge.positions[0].x < l && edge.positions[0].x * 1000.0 == l * 1000.0);
        assert_eq!(edge.into_gadget().pos[0].x, 0.0);
    }

    #[test]
    fn bad_input_is_an_input_error() {
        let (c, p) = lcdm();
        let other = Cosmology::new(0.25, 0.75, 0.6766, 100.0).unwrap();
        let cases: [(&Cosmology, usize, f64, f64, &str); 9] = [
            (&c, 48, 100.0, 0.02, "n = 48"),
            (&c, 0, 100.0, 0.02, "n = 0"),
            (&c, 16, 0.0, 0.02, "L = 0"),
            (&c, 16, -1.0, 0.02, "L = -1"),
            (&c, 16, 100.0, 0.0, "a = 0"),
            (&c, 16, 100.0, 1.5, "a = 1.5"),
            (&c, 16, 100.0, -0.1, "a = -0.1"),
            (&c, 16, 100.0, f64::NAN, "a = NaN"),
            (&other, 16, 100.0, 0.02, "omega_m = 0.3111"),
        ];
        for (cosmology, n, l, a, needle) in cases {
            for order in [LptOrder::Zeldovich, LptOrder::Second] {
                let options = IcsOptions {
                    order,
                    ..IcsOptions::new(n, l, a, 1)
                };
                let err = cosmological_ics(cosmology, &p, &options).unwrap_err();
                assert_eq!(err.kind, ErrorKind::Input);
                assert!(err.message.contains(needle), "{}", err.message);
                assert!(!err.message.contains('\n'));
            }
        }
        // σ8 ≤ 0 is refused when the power spectrum is built.
        for s8 in [0.0, -0.8] {
            let err = PowerSpectrum::new(&c, 0.049, 0.9665, s8).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Input);
            assert!(err.message.contains("sigma8"), "{}", err.message);
        }
    }
}
