//! Advice on the time step: the softening's dynamical time, and the warning a run logs when
//! its largest step (shared, or the top of the block hierarchy) is large against it
//! (`docs/design.md`, *Time steps*, says why this scale; `docs/performance.md`, *Energy error
//! and the default time steps*, has the measurements).

/// The softening's dynamical time √(ε³ / (G m)) (time units) for softening `eps` (length
/// units), gravitational constant `g` and particle mass `m` (mass units): the time scale of an
/// encounter of two particles of mass m at the softening length, where the softened force peaks.
pub fn softening_time(eps: f64, g: f64, m: f64) -> f64 {
    (eps.powi(3) / (g * m)).sqrt()
}

/// The largest step, as a fraction of [`softening_time`], that keeps |ΔE/E| ≤ 1e-4 over 20
/// crossing times of a Plummer sphere: shared steps (N = 16384, ε = 0.01: dt = 1/128 is 0.061
/// of it) and block steps alike, whose criterion η √(ε / |a|) sees the mean field, not the
/// encounters (N = 4096, ε = 0.01, η = 0.1, t = 57: dt_max = 1/128, 0.12 of it, drifts to
/// 4.5e-3; 1/256, 0.061 of it, keeps 7.7e-6).
pub const STEP_FRACTION: f64 = 1.0 / 16.0;

/// The largest step for a run that gives none: `dt` (the configured default, time units), or
/// where that exceeds [`STEP_FRACTION`] of the [`softening_time`] of softening `eps`,
/// gravitational constant `g` and heaviest particle mass `m`, the largest power of two within
/// it (a step of 1/2^k, whose multiples meet the round times of outputs). `dt` where there is
/// no softening or no mass.
pub fn top_step_within(dt: f64, eps: f64, g: f64, m: f64) -> f64 {
    let most = STEP_FRACTION * softening_time(eps, g, m);
    match most.is_finite() && most > 0.0 && dt > most {
        true => most.log2().floor().exp2(),
        false => dt,
    }
}

/// The warning for a largest step `dt` (time units; the shared step, or the top block step
/// when `block`) with softening `eps`, gravitational constant `g` and heaviest particle mass
/// `m`, or `None` when `dt` is at most [`STEP_FRACTION`] of [`softening_time`] (or there is no
/// softening, or no mass). One line: the numbers, and what to set instead.
pub fn step_warning(block: bool, dt: f64, eps: f64, g: f64, m: f64) -> Option<String> {
    let t = softening_time(eps, g, m);
    let most = STEP_FRACTION * t;
    if !(eps > 0.0 && m > 0.0 && dt > most) {
        return None;
    }
    let what = match block {
        true => "the largest block step dt_max",
        false => "the shared time step dt",
    };
    Some(format!(
        "{what} = {dt:.4e} is {:.2} of the softening's dynamical time sqrt(eps^3 / (G m)) = \
         {t:.4e} (eps = {eps}, G = {g}, heaviest particle m = {m:.4e}); above {STEP_FRACTION} \
         of it the energy drifts (|dE/E| of 1e-3 and more over 20 crossing times of a Plummer \
         sphere): set [time] dt_max <= {most:.3e}",
        dt / t
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_above_the_fraction_of_the_softening_time() {
        // eps = 0.01, m = 1/16384: t = sqrt(1e-6 * 16384) = 0.128.
        let m = 1.0 / 16384.0;
        assert!((softening_time(0.01, 1.0, m) - 0.128).abs() < 1e-12);
        let w = step_warning(false, 1.0 / 32.0, 0.01, 1.0, m).expect("1/32 is too large");
        assert!(w.contains("dt = 3.1250e-2"), "{w}");
        assert!(w.contains("is 0.24 of"), "{w}");
        assert!(w.contains("= 1.2800e-1"), "{w}");
        assert!(w.contains("dt_max <= 8.000e-3"), "{w}");
        assert!(!w.contains("block"), "{w}");
        // The top block step the same, named as such.
        let b = step_warning(true, 1.0 / 32.0, 0.01, 1.0, m).expect("1/32 is too large");
        assert!(
            b.starts_with("the largest block step dt_max = 3.1250e-2 is 0.24 of"),
            "{b}"
        );
        assert!(!w.contains('\n'));
        assert_eq!(step_warning(false, 1.0 / 128.0, 0.01, 1.0, m), None);
        // G and the mass enter as G m.
        assert!(step_warning(false, 1.0 / 128.0, 0.01, 4.0, m).is_some());
        assert!(step_warning(false, 1.0 / 128.0, 0.01, 1.0, 4.0 * m).is_some());
        // No softening, or massless particles: no scale, no warning.
        assert_eq!(step_warning(false, 1.0, 0.0, 1.0, m), None);
        assert_eq!(step_warning(false, 1.0, 0.01, 1.0, 0.0), None);
    }

    #[test]
    fn the_default_step_is_lowered_to_a_power_of_two_within_the_fraction() {
        let d = 1.0 / 128.0;
        // N = 65536 (m = 2^-16): t = 0.256, 1/16 of it 0.016, above the default: kept.
        assert_eq!(top_step_within(d, 0.01, 1.0, 1.0 / 65536.0), d);
        // N = 4096: t = 0.064, 1/16 of it 0.004: 1/256.
        assert_eq!(top_step_within(d, 0.01, 1.0, 1.0 / 4096.0), 1.0 / 256.0);
        // N = 1000: t = 0.0316, 1/16 of it 0.00198: 1/512.
        assert_eq!(top_step_within(d, 0.01, 1.0, 1e-3), 1.0 / 512.0);
        // Within the fraction, nothing to warn about.
        for m in [1.0 / 4096.0, 1e-3, 0.5] {
            let dt = top_step_within(d, 0.01, 1.0, m);
            assert_eq!(step_warning(true, dt, 0.01, 1.0, m), None, "m = {m}");
        }
        // No softening, or massless particles: the default.
        assert_eq!(top_step_within(d, 0.0, 1.0, 1e-3), d);
        assert_eq!(top_step_within(d, 0.01, 1.0, 0.0), d);
    }
}
