//! The linear matter power spectrum today (a = 1): P(k) = A kⁿˢ T²(k), with the transfer
//! function T(k) of Eisenstein & Hu (1998, ApJ 496, 605) — the full fit with baryon acoustic
//! oscillations (their eqs. 2–24), for cold dark matter and baryons, no neutrinos — and the
//! amplitude A fixed by σ8, the rms linear density contrast in top-hat spheres of radius
//! 8 Mpc/h. At another scale factor P(k, a) = D(a)² P(k) ([`Cosmology::growth`]).
//!
//! **Units.** k in h/Mpc, P in (Mpc/h)³, radii in Mpc/h. The fit itself is written in Mpc⁻¹
//! (as the paper has it): k[Mpc⁻¹] = h k[h/Mpc].
//!
//! σ²(R) = (1/2π²) ∫ k³ P(k) W²(kR) d ln k with W(x) = 3 (sin x − x cos x)/x³, integrated in
//! ln k from 10⁻⁶ to 10³ h/Mpc (the integrand is below 10⁻¹² of its peak outside for R ≳
//! 1 Mpc/h), one decade at a time with the shared Gauss–Legendre rule (to ~1e-13).

use super::quadrature::integrate;
use super::Cosmology;
use crate::error::{Error, Result};
use std::f64::consts::{E, PI};

/// The CMB temperature today in K (Fixsen 2009), which the transfer function depends on.
pub const T_CMB: f64 = 2.7255;

/// The top-hat radius of σ8, in Mpc/h.
pub const SIGMA8_RADIUS: f64 = 8.0;

/// The decades of k (in h/Mpc, as powers of ten) over which σ(R) is integrated.
const SIGMA_DECADES: std::ops::Range<i32> = -6..3;

/// The linear matter power spectrum of a cosmology at a = 1: the Eisenstein & Hu (1998)
/// transfer function with baryon wiggles, a primordial slope n_s, normalised to σ8.
/// Built by [`PowerSpectrum::new`]; k in h/Mpc, P in (Mpc/h)³.
#[derive(Clone, Debug)]
pub struct PowerSpectrum {
    omega_m: f64,
    omega_b: f64,
    h: f64,
    n_s: f64,
    sigma8: f64,
    /// A, in (Mpc/h)^{3 + n_s} (P = A kⁿˢ T² with k in h/Mpc).
    amplitude: f64,
    fit: EisensteinHu,
}

/// The k-independent quantities of the Eisenstein & Hu fit (lengths in Mpc, wave numbers in
/// Mpc⁻¹), computed once from Ω_m h², Ω_b h² and T_CMB.
#[derive(Clone, Debug)]
struct EisensteinHu {
    /// Baryon fraction Ω_b/Ω_m.
    f_b: f64,
    /// CDM fraction Ω_c/Ω_m.
    f_c: f64,
    /// k_eq, the wave number of the horizon at matter–radiation equality (eq. 3), Mpc⁻¹.
    k_eq: f64,
    /// s, the sound horizon at the drag epoch (eq. 6), Mpc.
    sound_horizon: f64,
    /// k_Silk, the Silk damping scale (eq. 7), Mpc⁻¹.
    k_silk: f64,
    /// α_c and β_c, the CDM suppression and log shift (eqs. 11, 12).
    alpha_c: f64,
    beta_c: f64,
    /// α_b and β_b, the baryon amplitude and shift (eqs. 14, 15, 24).
    alpha_b: f64,
    beta_b: f64,
    /// β_node, the shift of the oscillations' nodes (eq. 23).
    beta_node: f64,
}

impl EisensteinHu {
    /// The fit's constants for Ω_m h² = `omhh`, Ω_b h² = `obhh` (0 < obhh < omhh) and
    /// T_CMB = [`T_CMB`].
    fn new(omhh: f64, obhh: f64) -> Self {
        let theta = T_CMB / 2.7;
        let theta4 = theta.powi(4);
        let f_b = obhh / omhh;
        let f_c = 1.0 - f_b;
        // Equality (eqs. 2, 3) and the drag epoch (eq. 4).
        let z_eq = 2.50e4 * omhh / theta4;
        let k_eq = 7.46e-2 * omhh / (theta * theta);
        let b1 = 0.313 * omhh.powf(-0.419) * (1.0 + 0.607 * omhh.powf(0.674));
        let b2 = 0.238 * omhh.powf(0.223);
        let z_d = 1291.0 * omhh.powf(0.251) / (1.0 + 0.659 * omhh.powf(0.828))
            * (1.0 + b1 * obhh.powf(b2));
        // The baryon-to-photon momentum density ratio R(z) (eq. 5) and the sound horizon.
        let ratio = |z: f64| 31.5 * obhh / theta4 * (1e3 / z);
        let (r_d, r_eq) = (ratio(z_d), ratio(z_eq));
        let sound_horizon = 2.0 / (3.0 * k_eq)
            * (6.0 / r_eq).sqrt()
            * (((1.0 + r_d).sqrt() + (r_d + r_eq).sqrt()) / (1.0 + r_eq.sqrt())).ln();
        let k_silk = 1.6 * obhh.powf(0.52) * omhh.powf(0.73) * (1.0 + (10.4 * omhh).powf(-0.95));
        // CDM (eqs. 11, 12).
        let a1 = (46.9 * omhh).powf(0.670) * (1.0 + (32.1 * omhh).powf(-0.532));
        let a2 = (12.0 * omhh).powf(0.424) * (1.0 + (45.0 * omhh).powf(-0.582));
        let alpha_c = a1.powf(-f_b) * a2.powf(-f_b.powi(3));
        let c1 = 0.944 / (1.0 + (458.0 * omhh).powf(-0.708));
        let c2 = (0.395 * omhh).powf(-0.0266);
        let beta_c = 1.0 / (1.0 + c1 * (f_c.powf(c2) - 1.0));
        // Baryons (eqs. 14, 15, 23, 24).
        let y = (1.0 + z_eq) / (1.0 + z_d);
        let root = (1.0 + y).sqrt();
        let g = y * (-6.0 * root + (2.0 + 3.0 * y) * ((root + 1.0) / (root - 1.0)).ln());
        let alpha_b = 2.07 * k_eq * sound_horizon * (1.0 + r_d).powf(-0.75) * g;
        let beta_b = 0.5 + f_b + (3.0 - 2.0 * f_b) * ((17.2 * omhh).powi(2) + 1.0).sqrt();
        let beta_node = 8.41 * omhh.powf(0.435);
        Self {
            f_b,
            f_c,
            k_eq,
            sound_horizon,
            k_silk,
            alpha_c,
            beta_c,
            alpha_b,
            beta_b,
            beta_node,
        }
    }

    /// T̃₀(k; α_c, β_c) (eqs. 17, 19, 20): the pressureless transfer function shape, for
    /// q = k / (13.41 k_eq).
    fn t0(q: f64, alpha_c: f64, beta_c: f64) -> f64 {
        let log = (E + 1.8 * beta_c * q).ln();
        let c = 14.2 / alpha_c + 386.0 / (1.0 + 69.9 * q.powf(1.08));
        log / (log + c * q * q)
    }

    /// T(k) at k in Mpc⁻¹ (> 0): f_b T_b + f_c T_c (eq. 16).
    fn transfer(&self, k: f64) -> f64 {
        let q = k / (13.41 * self.k_eq);
        let ks = k * self.sound_horizon;
        // CDM (eqs. 17, 18).
        let f = 1.0 / (1.0 + (ks / 5.4).powi(4));
        let t_c =
            f * Self::t0(q, 1.0, self.beta_c) + (1.0 - f) * Self::t0(q, self.alpha_c, self.beta_c);
        // Baryons (eqs. 21, 22).
        let s_tilde = self.sound_horizon / (1.0 + (self.beta_node / ks).powi(3)).cbrt();
        let t_b = (Self::t0(q, 1.0, 1.0) / (1.0 + (ks / 5.2).powi(2))
            + self.alpha_b / (1.0 + (self.beta_b / ks).powi(3))
                * (-(k / self.k_silk).powf(1.4)).exp())
            * sinc(k * s_tilde);
        self.f_b * t_b + self.f_c * t_c
    }
}

/// sin x / x (the spherical Bessel function j₀), by its series near 0.
fn sinc(x: f64) -> f64 {
    if x.abs() < 1e-3 {
        let x2 = x * x;
        1.0 - x2 / 6.0 * (1.0 - x2 / 20.0)
    } else {
        x.sin() / x
    }
}

/// The Fourier transform of the top-hat of unit volume, W(x) = 3 (sin x − x cos x)/x³ for
/// x = kR (dimensionless), by its series 1 − x²/10 + x⁴/280 below x = 10⁻² where the closed
/// form cancels.
pub fn top_hat_window(x: f64) -> f64 {
    if x.abs() < 1e-2 {
        let x2 = x * x;
        1.0 - x2 / 10.0 + x2 * x2 / 280.0
    } else {
        3.0 * (x.sin() - x * x.cos()) / (x * x * x)
    }
}

impl PowerSpectrum {
    /// The linear power spectrum for the Ω_m and h of `cosmology`, baryon density `omega_b`
    /// (today, in units of the critical density; 0 < Ω_b < Ω_m), primordial spectral index
    /// `n_s` (finite) and normalisation `sigma8` (> 0, dimensionless; the rms linear density
    /// contrast at a = 1 in top-hat spheres of 8 Mpc/h). Fails with a one-line input error
    /// for a value out of range.
    pub fn new(cosmology: &Cosmology, omega_b: f64, n_s: f64, sigma8: f64) -> Result<Self> {
        let (omega_m, h) = (cosmology.omega_m(), cosmology.h());
        if !(omega_b.is_finite() && omega_b > 0.0 && omega_b < omega_m) {
            return Err(Error::input(format!(
                "power spectrum: omega_b = {omega_b} must be finite, > 0 and < omega_m = {omega_m}"
            )));
        }
        if !n_s.is_finite() {
            return Err(Error::input(format!(
                "power spectrum: n_s = {n_s} must be finite"
            )));
        }
        if !(sigma8.is_finite() && sigma8 > 0.0) {
            return Err(Error::input(format!(
                "power spectrum: sigma8 = {sigma8} must be finite and > 0"
            )));
        }
        let mut power = Self {
            omega_m,
            omega_b,
            h,
            n_s,
            sigma8,
            amplitude: 1.0,
            fit: EisensteinHu::new(omega_m * h * h, omega_b * h * h),
        };
        let unnormalised = power.sigma(SIGMA8_RADIUS);
        power.amplitude = (sigma8 / unnormalised).powi(2);
        Ok(power)
    }

    /// Ω_m (dimensionless), from the cosmology given to [`PowerSpectrum::new`].
    pub fn omega_m(&self) -> f64 {
        self.omega_m
    }

    /// Ω_b (dimensionless).
    pub fn omega_b(&self) -> f64 {
        self.omega_b
    }

    /// h (dimensionless), from the cosmology given to [`PowerSpectrum::new`].
    pub fn h(&self) -> f64 {
        self.h
    }

    /// n_s, the primordial spectral index (dimensionless).
    pub fn n_s(&self) -> f64 {
        self.n_s
    }

    /// σ8, the normalisation asked for (dimensionless).
    pub fn sigma8(&self) -> f64 {
        self.sigma8
    }

    /// The Eisenstein & Hu (1998) transfer function T(k) with baryon oscillations
    /// (dimensionless, → 1 as k → 0) at k in h/Mpc (> 0).
    pub fn transfer(&self, k: f64) -> f64 {
        self.fit.transfer(k * self.h)
    }

    /// The linear power spectrum at a = 1, P(k) = A kⁿˢ T²(k) in (Mpc/h)³, at k in h/Mpc
    /// (> 0). Multiply by D(a)² for another scale factor.
    pub fn power(&self, k: f64) -> f64 {
        let t = self.transfer(k);
        self.amplitude * k.powf(self.n_s) * t * t
    }

    /// σ(R), the rms linear density contrast at a = 1 in top-hat spheres of radius `radius`
    /// (Mpc/h, ≳ 1), dimensionless: √((1/2π²) ∫ k³ P(k) W²(kR) d ln k), integrated in ln k
    /// over k = 10⁻⁶ … 10³ h/Mpc.
    pub fn sigma(&self, radius: f64) -> f64 {
        let integrand = |ln_k: f64| {
            let k = ln_k.exp();
            let w = top_hat_window(k * radius);
            k * k * k * self.power(k) * w * w
        };
        let ln10 = std::f64::consts::LN_10;
        let variance: f64 = SIGMA_DECADES
            .map(|d| integrate(integrand, d as f64 * ln10, (d + 1) as f64 * ln10))
            .sum();
        (variance / (2.0 * PI * PI)).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// Planck-like flat ΛCDM.
    fn planck() -> (Cosmology, PowerSpectrum) {
        let c = Cosmology::new(0.3111, 0.6889, 0.6766, 100.0).unwrap();
        let p = PowerSpectrum::new(&c, 0.049, 0.9665, 0.8102).unwrap();
        (c, p)
    }

    #[test]
    fn transfer_tends_to_one_on_large_scales() {
        let (_, p) = planck();
        let t = p.transfer(1e-5);
        println!("T(1e-5 h/Mpc) - 1 = {:.1e}", t - 1.0);
        assert!((t - 1.0).abs() < 1e-4);
        // And it falls: T decreases monotonically on average.
        assert!(p.transfer(0.1) < p.transfer(0.01) && p.transfer(1.0) < p.transfer(0.1));
    }

    #[test]
    fn sound_horizon_agrees_with_its_approximation() {
        // EH98 eq. 26: s ≈ 44.5 ln(9.83/Ω_m h²) / √(1 + 10 (Ω_b h²)^{3/4}) Mpc, within 2 %.
        for (om, ob, h) in [
            (0.3111, 0.049, 0.6766),
            (0.25, 0.04, 0.72),
            (1.0, 0.05, 0.5),
        ] {
            let c = Cosmology::new(om, 1.0 - om, h, 100.0).unwrap();
            let p = PowerSpectrum::new(&c, ob, 1.0, 0.8).unwrap();
            let (omhh, obhh) = (om * h * h, ob * h * h);
            let approx = 44.5 * (9.83 / omhh).ln() / (1.0 + 10.0 * obhh.powf(0.75)).sqrt();
            let r = p.fit.sound_horizon / approx - 1.0;
            println!(
                "s = {:.2} Mpc, eq. 26 {approx:.2} Mpc: {r:+.4}",
                p.fit.sound_horizon
            );
            assert!(r.abs() < 0.02);
        }
    }

    /// BBKS (Bardeen, Bond, Kaiser & Szalay 1986, eq. G3) with the shape parameter of
    /// Sugiyama (1995), Γ = Ω_m h exp(−Ω_b (1 + √(2h)/Ω_m)); k in h/Mpc.
    fn bbks(k: f64, omega_m: f64, omega_b: f64, h: f64) -> f64 {
        let gamma = omega_m * h * (-omega_b * (1.0 + (2.0 * h).sqrt() / omega_m)).exp();
        let q = k / gamma;
        (1.0 + 2.34 * q).ln() / (2.34 * q)
            * (1.0 + 3.89 * q + (16.1 * q).powi(2) + (5.46 * q).powi(3) + (6.71 * q).powi(4))
                .powf(-0.25)
    }

    #[test]
    fn transfer_agrees_with_bbks() {
        let cases = [
            (0.3111, 0.049, 0.6766),
            (0.25, 0.04, 0.72),
            (0.3, 0.02, 0.7),
        ];
        let mut worst: f64 = 0.0;
        for (om, ob, h) in cases {
            let c = Cosmology::new(om, 1.0 - om, h, 100.0).unwrap();
            let p = PowerSpectrum::new(&c, ob, 1.0, 0.8).unwrap();
            for k in [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0] {
                let r = p.transfer(k) / bbks(k, om, ob, h) - 1.0;
                println!("Ω_m {om} Ω_b {ob} h {h}: k = {k}: T_EH/T_BBKS - 1 = {r:+.3}");
                worst = worst.max(r.abs());
            }
        }
        println!("EH98 vs BBKS (Sugiyama Γ), k = 0.01 … 1 h/Mpc: worst {worst:.3}");
        assert!(worst < 0.10);
    }

    /// ∫ f over [lo, hi] by adaptive Simpson with Richardson's correction, to an absolute
    /// `tol` (an integrator independent of the Gauss–Legendre rule of the code).
    fn simpson(f: &impl Fn(f64) -> f64, lo: f64, hi: f64, tol: f64) -> f64 {
        fn step(
            f: &impl Fn(f64) -> f64,
            (a, b): (f64, f64),
            (fa, fm, fb): (f64, f64, f64),
            whole: f64,
            tol: f64,
            depth: u32,
        ) -> f64 {
            let m = 0.5 * (a + b);
            let (lm, rm) = (0.5 * (a + m), 0.5 * (m + b));
            let (flm, frm) = (f(lm), f(rm));
            let left = (m - a) / 6.0 * (fa + 4.0 * flm + fm);
            let right = (b - m) / 6.0 * (fm + 4.0 * frm + fb);
            let diff = left + right - whole;
            if depth == 0 || diff.abs() <= 15.0 * tol {
                return left + right + diff / 15.0;
            }
            step(f, (a, m), (fa, flm, fm), left, 0.5 * tol, depth - 1)
                + step(f, (m, b), (fm, frm, fb), right, 0.5 * tol, depth - 1)
        }
        let pieces = 512;
        let width = (hi - lo) / pieces as f64;
        (0..pieces)
            .map(|i| {
                let (a, b) = (lo + i as f64 * width, lo + (i + 1) as f64 * width);
                let (fa, fm, fb) = (f(a), f(0.5 * (a + b)), f(b));
                let whole = (b - a) / 6.0 * (fa + 4.0 * fm + fb);
                step(f, (a, b), (fa, fm, fb), whole, tol / pieces as f64, 40)
            })
            .sum()
    }

    #[test]
    fn sigma8_is_the_one_asked_for() {
        for (om, ob, h, ns, s8) in [
            (0.3111, 0.049, 0.6766, 0.9665, 0.8102),
            (0.25, 0.04, 0.72, 1.0, 0.9),
        ] {
            let c = Cosmology::new(om, 1.0 - om, h, 100.0).unwrap();
            let p = PowerSpectrum::new(&c, ob, ns, s8).unwrap();
            // Independently: σ² = (1/2π²) ∫ k² P(k) W²(8k) dk over k, in its own variable,
            // with its own window (no series), from 1e-5 to 50 h/Mpc.
            let window = |x: f64| 3.0 * (x.sin() - x * x.cos()) / (x * x * x);
            let f = |k: f64| k * k * p.power(k) * window(8.0 * k).powi(2) / (2.0 * PI * PI);
            let variance = simpson(&f, 1e-5, 0.5, 1e-12)
                + simpson(&f, 0.5, 5.0, 1e-12)
                + simpson(&f, 5.0, 50.0, 1e-12);
            let got = variance.sqrt();
            println!("σ8 asked {s8}, recomputed {got:.9}, {:.1e}", got / s8 - 1.0);
            assert!((got / s8 - 1.0).abs() < 1e-6);
            assert!((p.sigma(SIGMA8_RADIUS) / s8 - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn top_hat_window_series_joins_the_closed_form() {
        for x in [9.9e-3_f64, 1e-2, 1.01e-2] {
            let closed = 3.0 * (x.sin() - x * x.cos()) / (x * x * x);
            assert!((top_hat_window(x) - closed).abs() < 1e-9);
        }
        assert_eq!(top_hat_window(0.0), 1.0);
    }

    #[test]
    fn bad_parameters_are_input_errors() {
        let c = Cosmology::new(0.3, 0.7, 0.7, 100.0).unwrap();
        for (ob, ns, s8, needle) in [
            (0.0, 1.0, 0.8, "omega_b = 0"),
            (0.3, 1.0, 0.8, "omega_b = 0.3"),
            (f64::NAN, 1.0, 0.8, "omega_b = NaN"),
            (0.05, f64::INFINITY, 0.8, "n_s = inf"),
            (0.05, 1.0, 0.0, "sigma8 = 0"),
            (0.05, 1.0, -0.8, "sigma8 = -0.8"),
            (0.05, 1.0, f64::NAN, "sigma8 = NaN"),
        ] {
            let err = PowerSpectrum::new(&c, ob, ns, s8).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Input);
            assert!(err.message.contains(needle), "{}", err.message);
            assert!(!err.message.contains('\n'));
        }
    }
}
