//! Leapfrog kick–drift–kick, second order and symplectic:
//! v ← v + a·dt/2;  x ← x + v·dt;  a ← a(x);  v ← v + a·dt/2.
//! The drift moves every particle; the kicks, per particle and time bin, are
//! [`super::IntegratorState::half_kick`].

use crate::particles::Particles;
use rayon::prelude::*;

/// Drift: x ← x + v·dt for every particle (`dt` in time units).
pub fn drift(p: &mut Particles, dt: f64) {
    let vel = &p.vel;
    p.pos
        .par_iter_mut()
        .zip(vel)
        .for_each(|(x, v)| *x += *v * dt);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::{IntegratorState, Stepping, Timeline};
    use glam::DVec3;

    /// A particle in a harmonic potential a = −x with a shared step: leapfrog keeps the energy
    /// bounded and returns close to the start after one period.
    #[test]
    fn harmonic_oscillator_period() {
        let mut p = Particles::default();
        p.push(DVec3::X, DVec3::ZERO, 1.0, 0);
        let period = 2.0 * std::f64::consts::PI;
        let t = Timeline::new(Stepping::Shared, period / 1000.0, 0.0, period);
        let mut s = IntegratorState::new(vec![-p.pos[0]], vec![0.0]);
        let all = [true];
        for _ in 0..t.ti_end {
            s.half_kick(&mut p, &t, &all);
            drift(&mut p, t.dt(0));
            s.acc[0] = -p.pos[0];
            s.half_kick(&mut p, &t, &all);
            let e = 0.5 * p.vel[0].length_squared() + 0.5 * p.pos[0].length_squared();
            assert!((e - 0.5).abs() < 1e-5);
        }
        assert!((p.pos[0] - DVec3::X).length() < 1e-4);
    }
}
