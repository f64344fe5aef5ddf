//! The exponential disk of a galaxy: `ρ(R, z) = Σ(R) sech²(z/z_d) / (2 z_d)` with
//! `Σ(R) = M₀/(2π R_d²) e^{−R/R_d}`, truncated at [`DISK_TRUNCATION`] scale lengths and at
//! [`HEIGHT_TRUNCATION`] scale heights, and its velocities in the epicyclic approximation
//! (Hernquist 1993, ApJS 86, 389, §2.2.3) with a constant Toomre Q:
//!
//! * the rotation curve `v_c² = G M(R)/R` and the epicyclic frequency
//!   `κ² = G M'(R)/R² + G M(R)/R³` from the galaxy's total enclosed mass `M` (the disk's mass
//!   counted as if it were spherical: the mass inside the cylinder of radius `R`);
//! * the radial dispersion from Toomre's criterion for stars, `σ_R = 3.36 Q G Σ / κ`;
//! * the azimuthal dispersion from the epicyclic ratio, `σ_φ = σ_R κ / (2Ω)`, `Ω = v_c/R`;
//! * the vertical dispersion of an isothermal sheet of scale height `z_d`, `σ_z² = π G Σ z_d`
//!   (the disk's own gravity only);
//! * the mean rotation from the asymmetric drift (Jeans equation in R),
//!   `v̄_φ² = v_c² + σ_R² (1 − κ²/(4Ω²) + d ln(Σ σ_R²)/d ln R)` (zero where negative);
//! * Gaussian velocities about the mean with these dispersions.
//!
//! Units are the galaxy's (G = 1). The disk rotates counter-clockwise seen from +z (its angular
//! momentum points along +z).

use super::sampling::ChunkRng;
use super::spheroid::radius_enclosing;
use glam::DVec3;
use rand::Rng;
use rand_distr::StandardNormal;
use std::f64::consts::PI;

/// Radius of the disk's edge in scale lengths (10 R_d holds 99.95% of the mass).
const DISK_TRUNCATION: f64 = 10.0;
/// Height of the disk's faces in scale heights (`tanh 8 = 1 − 2·10⁻⁷` of the mass inside).
const HEIGHT_TRUNCATION: f64 = 8.0;

/// An exponential disk (lengths and masses in the galaxy's units, G = 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ExponentialDisk {
    /// Mass inside the edge (mass units): the mass its particles carry.
    pub(super) mass: f64,
    /// Scale length `R_d` (length units).
    pub(super) scale_length: f64,
    /// Scale height `z_d` of the `sech²(z/z_d)` profile (length units).
    pub(super) scale_height: f64,
    /// Toomre's stability parameter Q at every radius (dimensionless).
    pub(super) toomre_q: f64,
}

/// The galaxy's mass inside a sphere (here also: a cylinder) of radius `r`, `M(r)`, and its
/// derivative `dM/dr` (mass units, mass per length), from which the disk's rotation is set.
pub(super) trait RotationCurve {
    /// `(M(r), dM/dr)` at radius `r > 0`.
    fn mass_and_slope(&self, r: f64) -> (f64, f64);
}

/// `1 − (1 + u) e^{−u}`: the fraction of an untruncated exponential disk's mass inside
/// `R = u R_d`.
fn mass_fraction(u: f64) -> f64 {
    1.0 - (1.0 + u) * (-u).exp()
}

/// The velocity moments of the disk at one radius (velocity units).
#[derive(Clone, Copy, Debug)]
pub(super) struct Moments {
    /// Mean azimuthal (rotation) velocity `v̄_φ`.
    pub(super) rotation: f64,
    /// Radial dispersion `σ_R`.
    pub(super) sigma_r: f64,
    /// Azimuthal dispersion `σ_φ`.
    pub(super) sigma_phi: f64,
    /// Vertical dispersion `σ_z`.
    pub(super) sigma_z: f64,
}

impl ExponentialDisk {
    /// The mass unit `M₀` of the untruncated disk (mass units).
    fn mass_unit(&self) -> f64 {
        self.mass / mass_fraction(DISK_TRUNCATION)
    }

    /// Surface density `Σ(R)` of the untruncated disk (mass / length²).
    pub(super) fn surface_density(&self, r: f64) -> f64 {
        let rd = self.scale_length;
        self.mass_unit() / (2.0 * PI * rd * rd) * (-r / rd).exp()
    }

    /// The disk's mass inside radius `r` counted as spherical, and its derivative `dM/dr`
    /// (mass units, mass per length).
    pub(super) fn mass_and_slope(&self, r: f64) -> (f64, f64) {
        let u = r / self.scale_length;
        let m0 = self.mass_unit();
        (
            m0 * mass_fraction(u),
            m0 * u * (-u).exp() / self.scale_length,
        )
    }

    /// Relative potential of the disk's mass taken as spherical, `Ψ(r) = M(r)/r + M₀ e^{−u}/R_d`
    /// (velocity² units, G = 1), `r > 0`.
    pub(super) fn potential(&self, r: f64) -> f64 {
        let u = r / self.scale_length;
        self.mass_and_slope(r).0 / r + self.mass_unit() * (-u).exp() / self.scale_length
    }

    /// Epicyclic frequency `κ` and angular velocity `Ω` at radius `r` of a galaxy with
    /// rotation curve `curve` (per time unit).
    pub(super) fn frequencies(curve: &impl RotationCurve, r: f64) -> (f64, f64) {
        let (m, dm) = curve.mass_and_slope(r);
        (
            (dm / (r * r) + m / r.powi(3)).sqrt(),
            (m / r.powi(3)).sqrt(),
        )
    }

    /// Radial dispersion `σ_R = 3.36 Q Σ / κ` at radius `r` (velocity units).
    fn sigma_r(&self, curve: &impl RotationCurve, r: f64) -> f64 {
        let (kappa, _) = Self::frequencies(curve, r);
        3.36 * self.toomre_q * self.surface_density(r) / kappa
    }

    /// The velocity moments at radius `r > 0` in a galaxy of rotation curve `curve`.
    pub(super) fn moments(&self, curve: &impl RotationCurve, r: f64) -> Moments {
        let (kappa, omega) = Self::frequencies(curve, r);
        let sigma_r = self.sigma_r(curve, r);
        // d ln(Σ σ_R²) / d ln R by central differences in ln R.
        let h: f64 = 1e-4;
        let log_pressure = |r: f64| (self.surface_density(r) * self.sigma_r(curve, r).powi(2)).ln();
        let slope = (log_pressure(r * h.exp()) - log_pressure(r * (-h).exp())) / (2.0 * h);
        let epicyclic = kappa * kappa / (4.0 * omega * omega);
        let vc2 = (omega * r).powi(2);
        let rotation2 = vc2 + sigma_r * sigma_r * (1.0 - epicyclic + slope);
        Moments {
            rotation: rotation2.max(0.0).sqrt(),
            sigma_r,
            sigma_phi: sigma_r * epicyclic.sqrt(),
            sigma_z: (PI * self.surface_density(r) * self.scale_height).sqrt(),
        }
    }

    /// One disk particle: a position drawn from the truncated density and a velocity from the
    /// epicyclic moments at its radius in a galaxy of rotation curve `curve` (length and
    /// velocity units).
    pub(super) fn sample(&self, rng: &mut ChunkRng, curve: &impl RotationCurve) -> (DVec3, DVec3) {
        let rd = self.scale_length;
        let target = mass_fraction(DISK_TRUNCATION) * (1.0 - rng.random::<f64>());
        let r = radius_enclosing(|r| mass_fraction(r / rd), target, DISK_TRUNCATION * rd);
        let (sin, cos) = (2.0 * PI * rng.random::<f64>()).sin_cos();
        let t = HEIGHT_TRUNCATION.tanh() * (2.0 * rng.random::<f64>() - 1.0);
        let z = self.scale_height * t.atanh();
        let m = self.moments(curve, r);
        let mut normal = || rng.sample::<f64, _>(StandardNormal);
        let v_r = m.sigma_r * normal();
        let v_phi = m.rotation + m.sigma_phi * normal();
        let v_z = m.sigma_z * normal();
        (
            DVec3::new(r * cos, r * sin, z),
            DVec3::new(v_r * cos - v_phi * sin, v_r * sin + v_phi * cos, v_z),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The disk in a singular isothermal halo of circular speed 1: `M(r) = r` added.
    struct InHalo;

    impl RotationCurve for InHalo {
        fn mass_and_slope(&self, r: f64) -> (f64, f64) {
            let (m, dm) = DISK.mass_and_slope(r);
            (m + r, dm + 1.0)
        }
    }

    const DISK: ExponentialDisk = ExponentialDisk {
        mass: 1.0,
        scale_length: 1.0,
        scale_height: 0.1,
        toomre_q: 1.5,
    };

    #[test]
    fn surface_density_integrates_to_the_mass() {
        let (steps, edge) = (100_000, DISK_TRUNCATION);
        let dr = edge / steps as f64;
        let m: f64 = (0..steps)
            .map(|i| {
                let r = (i as f64 + 0.5) * dr;
                2.0 * PI * r * DISK.surface_density(r) * dr
            })
            .sum();
        assert!((m - 1.0).abs() < 1e-6, "{m}");
        // The spherical potential's slope is −M(r)/r².
        for r in [0.1, 1.0, 4.0] {
            let h = 1e-5;
            let dpsi = (DISK.potential(r + h) - DISK.potential(r - h)) / (2.0 * h);
            let expected = -DISK.mass_and_slope(r).0 / (r * r);
            assert!((dpsi / expected - 1.0).abs() < 1e-6, "r = {r}");
        }
    }

    #[test]
    fn moments_meet_their_definitions() {
        for r in [0.5, 1.0, 2.0, 4.0] {
            let m = DISK.moments(&InHalo, r);
            let (kappa, omega) = ExponentialDisk::frequencies(&InHalo, r);
            let q = m.sigma_r * kappa / (3.36 * DISK.surface_density(r));
            assert!((q - 1.5).abs() < 1e-12);
            assert!((m.sigma_phi / m.sigma_r - kappa / (2.0 * omega)).abs() < 1e-12);
            // Asymmetric drift: where the pressure Σσ_R² falls outwards (R ≥ 2 R_d here) the
            // disk rotates slower than the circular speed; inside it may rotate faster.
            let vc = omega * r;
            assert!(
                m.rotation > 0.8 * vc && (r < 2.0 || m.rotation < vc),
                "r = {r}"
            );
        }
    }
}
