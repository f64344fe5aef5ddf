//! Conserved quantities of a particle set: kinetic, potential and total energy, linear and
//! angular momentum (G folded into the potentials the caller passes).

use crate::particles::Particles;
use rayon::prelude::*;
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
    /// Summed in parallel over fixed chunks whose partial sums are added in order, so the
    /// result does not depend on the number of threads.
    pub fn of(p: &Particles, pot: &[f64]) -> Self {
        const CHUNK: usize = 1 << 14;
        let n = p.len().min(pot.len());
        let partial: Vec<[f64; 8]> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|k| {
                let range = k * CHUNK..((k + 1) * CHUNK).min(n);
                let mut s = [0.0; 8];
                for i in range {
                    let (x, v, m) = (p.pos[i], p.vel[i], p.mass[i]);
                    let l = m * x.cross(v);
                    s[0] += 0.5 * m * v.length_squared();
                    s[1] += 0.5 * m * pot[i];
                    for d in 0..3 {
                        s[2 + d] += m * v[d];
                        s[5 + d] += l[d];
                    }
                }
                s
            })
            .collect();
        let mut s = [0.0; 8];
        for c in &partial {
            for (a, b) in s.iter_mut().zip(c) {
                *a += b;
            }
        }
        Self::from_sums(s)
    }

    /// The sums this is made of, in the order kinetic, potential, momentum (x, y, z), angular
    /// momentum (x, y, z); the total is their sum. What is reduced over ranks and saved.
    pub fn sums(&self) -> [f64; 8] {
        let [px, py, pz] = self.momentum;
        let [lx, ly, lz] = self.angular_momentum;
        [self.kinetic, self.potential, px, py, pz, lx, ly, lz]
    }

    /// The quantities from their [`Conserved::sums`], the total recomputed.
    pub fn from_sums(s: [f64; 8]) -> Self {
        Self {
            kinetic: s[0],
            potential: s[1],
            total: s[0] + s[1],
            momentum: [s[2], s[3], s[4]],
            angular_momentum: [s[5], s[6], s[7]],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::DVec3;

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
