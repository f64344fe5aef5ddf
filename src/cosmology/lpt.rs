//! Cosmological initial conditions by the Zel'dovich approximation: particles start on the
//! points of a periodic grid and move along the displacement of the linear density field.
//!
//! With ψ the displacement of the field realised at a = 1 (`field.rs`: ∇·ψ = −δ), a particle
//! of grid point q is at x = q + D(a) ψ(q) (comoving, Mpc/h, wrapped into [0, L)) with the
//! peculiar velocity v = a dx/dt = a H(a) f(a) D(a) ψ(q) in km/s, where H(a) = 100 E(a)
//! km/s/(Mpc/h), D is the linear growth factor (D(1) = 1) and f = d ln D/d ln a. Every
//! particle has the mass Ω_m ρ_crit L³/n³ with ρ_crit = 27.7536627 × 10¹⁰ M_sun/h per
//! (Mpc/h)³. (GADGET's snapshots store v/√a rather than v.)

use super::field::{displacement, gaussian_modes, Grid};
use super::{Cosmology, PowerSpectrum};
use crate::error::{Error, Result};
use glam::DVec3;
use rayon::prelude::*;

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

/// Zel'dovich initial conditions for `cosmology` with the linear power spectrum `power` (built
/// from the same cosmology): n³ particles (`n` a power of two, 2 … 512) in a periodic box of
/// side `box_size` (Mpc/h) at the scale factor `a_start` (in (0, 1]), the field drawn from
/// `seed` (the same particles for the same arguments, whatever the number of threads). Fails
/// with a one-line input error for a bad `n`, `box_size` or `a_start`, or a power spectrum of
/// another Ω_m or h.
pub fn zeldovich(
    cosmology: &Cosmology,
    power: &PowerSpectrum,
    n: usize,
    box_size: f64,
    a_start: f64,
    seed: u64,
) -> Result<CosmologicalIcs> {
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
    let growth = cosmology.growth(a_start)?;
    let rate = cosmology.growth_rate(a_start)?;
    let hubble = 100.0 * cosmology.e(a_start);
    let velocity_factor = a_start * hubble * rate * growth;

    let modes = gaussian_modes(&grid, |k| power.power(k), seed);
    let [psi_x, psi_y, psi_z] = displacement(&grid, &modes);
    drop(modes);
    let spacing = box_size / n as f64;
    let (positions, velocities): (Vec<DVec3>, Vec<DVec3>) = (0..grid.points())
        .into_par_iter()
        .map(|index| {
            let psi = DVec3::new(psi_x[index], psi_y[index], psi_z[index]);
            let q = DVec3::new(
                (index / (n * n)) as f64,
                (index / n % n) as f64,
                (index % n) as f64,
            ) * spacing;
            let x = q + growth * psi;
            let wrapped = DVec3::new(
                wrap(x.x, box_size),
                wrap(x.y, box_size),
                wrap(x.z, box_size),
            );
            (wrapped, velocity_factor * psi)
        })
        .unzip();
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

/// Bytes of host memory per particle that [`zeldovich`] and [`CosmologicalIcs::into_gadget`]
/// need at their peak: the modes (16), the three displacements (24), positions, velocities
/// and masses (56) and the ids (8).
pub const ZELDOVICH_BYTES: u64 = 104;

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
        let ics = zeldovich(&c, &p, n, l, a, 3).unwrap();
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

    #[test]
    fn velocities_follow_the_displacements() {
        // Einstein–de Sitter: D = a, f = 1, H = 100 a^{-3/2}, so v = a H (x − q) =
        // 100 (x − q)/√a km/s for particles that did not wrap.
        let c = Cosmology::new(1.0, 0.0, 0.7, 100.0).unwrap();
        let p = PowerSpectrum::new(&c, 0.05, 1.0, 0.8).unwrap();
        let (n, l, a) = (16, 100.0, 0.02);
        let ics = zeldovich(&c, &p, n, l, a, 9).unwrap();
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

    #[test]
    fn gadget_units() {
        let (c, p) = lcdm();
        let (n, l, a) = (8, 50.0, 0.25);
        let ics = zeldovich(&c, &p, n, l, a, 4).unwrap();
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
        let mut edge = zeldovich(&c, &p, 2, l, a, 4).unwrap();
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
            let err = zeldovich(cosmology, &p, n, l, a, 1).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Input);
            assert!(err.message.contains(needle), "{}", err.message);
            assert!(!err.message.contains('\n'));
        }
        // σ8 ≤ 0 is refused when the power spectrum is built.
        for s8 in [0.0, -0.8] {
            let err = PowerSpectrum::new(&c, 0.049, 0.9665, s8).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Input);
            assert!(err.message.contains("sigma8"), "{}", err.message);
        }
    }
}
