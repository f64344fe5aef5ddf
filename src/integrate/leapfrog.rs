//! Leapfrog kick–drift–kick, second order and symplectic:
//! v ← v + a·dt/2;  x ← x + v·dt;  a ← a(x);  v ← v + a·dt/2.
//! The drift moves every particle; the kicks, per particle and time bin, are
//! [`super::IntegratorState::half_kick`].

use crate::particles::Particles;
use glam::DVec3;
use rayon::prelude::*;

/// Drift: x ← x + v·dt for every particle (`dt` in time units; for comoving runs the drift
/// factor ∫dt/a², with v the momentum p = a² dx/dt).
pub fn drift(p: &mut Particles, dt: f64) {
    let vel = &p.vel;
    p.pos
        .par_iter_mut()
        .zip(vel)
        .for_each(|(x, v)| *x += *v * dt);
}

/// Wraps every position into the periodic box [0, `period`)³ (length units; 0: no box, nothing
/// changes): x − L⌊x/L⌋, and 0 where that rounds up to L. `cuda/integrate.cu`'s `drift` does the
/// same operations.
pub fn wrap(p: &mut Particles, period: f64) {
    if period > 0.0 {
        p.pos.par_iter_mut().for_each(|x| *x = wrapped(*x, period));
    }
}

/// One position wrapped into [0, `period`)³ (see [`wrap`]).
fn wrapped(x: DVec3, period: f64) -> DVec3 {
    let one = |c: f64| {
        let w = c - period * (c / period).floor();
        if w >= period {
            0.0
        } else {
            w
        }
    };
    DVec3::new(one(x.x), one(x.y), one(x.z))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::{IntegratorState, Stepping, Timeline};

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
            s.half_kick(&mut p, &t.half_steps(), &all);
            drift(&mut p, t.dt(0));
            s.acc[0] = -p.pos[0];
            s.half_kick(&mut p, &t.half_steps(), &all);
            let e = 0.5 * p.vel[0].length_squared() + 0.5 * p.pos[0].length_squared();
            assert!((e - 0.5).abs() < 1e-5);
        }
        assert!((p.pos[0] - DVec3::X).length() < 1e-4);
    }

    #[test]
    fn wrapping_keeps_positions_in_the_box() {
        let mut p = Particles::default();
        let l = 10.0;
        for x in [-0.5, 0.0, 3.0, 10.0, 25.5, -1e-300, -20.0] {
            p.push(DVec3::new(x, 1.0, 9.999), DVec3::ZERO, 1.0, 0);
        }
        let before = p.pos.clone();
        wrap(&mut p, 0.0);
        assert_eq!(p.pos, before);
        wrap(&mut p, l);
        let xs: Vec<f64> = p.pos.iter().map(|x| x.x).collect();
        // -1e-300 + 10 rounds to 10: it is put at 0.
        assert_eq!(xs, [9.5, 0.0, 3.0, 0.0, 5.5, 0.0, 0.0]);
        assert!(p.pos.iter().all(|x| x.y == 1.0 && x.z == 9.999));
    }
}
