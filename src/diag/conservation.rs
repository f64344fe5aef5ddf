//! Conserved quantities of a particle set: kinetic, potential and total energy, linear and
//! angular momentum (G folded into the potentials the caller passes).

use crate::particles::Particles;
use glam::DVec3;
use serde::Serialize;

/// Energies (mass × velocity² units) and momenta of a particle set at one time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Conserved {
    /// Kinetic energy Σ ½ m v².
    pub kinetic: f64,
    /// Potential energy ½ Σ m φ.
    pub potential: f64,
    /// Total energy.
    pub total: f64,
    /// Total linear momentum Σ m v.
    pub momentum: [f64; 3],
    /// Total angular momentum Σ m x × v about the origin.
    pub angular_momentum: [f64; 3],
}

impl Conserved {
    /// The quantities of `p`, with `pot` the potential per particle (energy per mass units).
    pub fn of(p: &Particles, pot: &[f64]) -> Self {
        let mut kinetic = 0.0;
        let mut potential = 0.0;
        let mut mom = DVec3::ZERO;
        let mut ang = DVec3::ZERO;
        for (((x, v), &m), &phi) in p.pos.iter().zip(&p.vel).zip(&p.mass).zip(pot) {
            kinetic += 0.5 * m * v.length_squared();
            potential += 0.5 * m * phi;
            mom += m * *v;
            ang += m * x.cross(*v);
        }
        Self {
            kinetic,
            potential,
            total: kinetic + potential,
            momentum: mom.to_array(),
            angular_momentum: ang.to_array(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circular_pair() {
        let mut p = Particles::default();
        p.push(DVec3::new(0.5, 0.0, 0.0), DVec3::new(0.0, 0.5, 0.0), 1.0, 0);
        p.push(
            DVec3::new(-0.5, 0.0, 0.0),
            DVec3::new(0.0, -0.5, 0.0),
            1.0,
            1,
        );
        let c = Conserved::of(&p, &[-1.0, -1.0]);
        assert_eq!(c.kinetic, 0.25);
        assert_eq!(c.potential, -1.0);
        assert_eq!(c.total, -0.75);
        assert_eq!(c.momentum, [0.0; 3]);
        assert_eq!(c.angular_momentum, [0.0, 0.0, 0.5]);
    }
}
