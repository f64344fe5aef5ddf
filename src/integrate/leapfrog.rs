//! Leapfrog kick–drift–kick, second order and symplectic:
//! v ← v + a·dt/2;  x ← x + v·dt;  a ← a(x);  v ← v + a·dt/2.

use crate::particles::Particles;
use glam::DVec3;
use rayon::prelude::*;

/// Kick: v ← v + a·dt for every particle (`dt` in time units; pass dt/2 for a half kick).
pub fn kick(p: &mut Particles, acc: &[DVec3], dt: f64) {
    p.vel
        .par_iter_mut()
        .zip(acc)
        .for_each(|(v, a)| *v += *a * dt);
}

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

    /// A particle in a harmonic potential a = −x: leapfrog keeps the energy bounded and
    /// returns close to the start after one period.
    #[test]
    fn harmonic_oscillator_period() {
        let mut p = Particles::default();
        p.push(DVec3::X, DVec3::ZERO, 1.0, 0);
        let steps = 1000;
        let dt = 2.0 * std::f64::consts::PI / steps as f64;
        let mut a = vec![-p.pos[0]];
        for _ in 0..steps {
            kick(&mut p, &a, 0.5 * dt);
            drift(&mut p, dt);
            a[0] = -p.pos[0];
            kick(&mut p, &a, 0.5 * dt);
            let e = 0.5 * p.vel[0].length_squared() + 0.5 * p.pos[0].length_squared();
            assert!((e - 0.5).abs() < 1e-5);
        }
        assert!((p.pos[0] - DVec3::X).length() < 1e-4);
    }
}
