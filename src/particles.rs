//! Particle storage: a structure of arrays in float64.
//!
//! Positions, velocities and masses are kept in float64 because the integrator accumulates many
//! small kicks and drifts and the diagnostics (energy, momentum) need the extra digits. The tree
//! walk copies positions and masses to float32 (see [`crate::tree`]), which is all the force
//! kernels need: their error budget is set by the multipole expansion, far above f32 rounding.
//! Units are whatever the run uses (N-body units, G = 1, by default).

use crate::error::{Error, Result};
use glam::DVec3;

/// A set of particles, one entry per particle in each array (all arrays have the same length).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Particles {
    /// Positions (length units).
    pub pos: Vec<DVec3>,
    /// Velocities (length / time units).
    pub vel: Vec<DVec3>,
    /// Masses (mass units), finite and non-negative.
    pub mass: Vec<f64>,
    /// Unique particle identifiers, kept through every reordering.
    pub id: Vec<u64>,
}

impl Particles {
    /// An empty set with room for `n` particles.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            pos: Vec::with_capacity(n),
            vel: Vec::with_capacity(n),
            mass: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
        }
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// True when there are no particles.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// Appends one particle.
    pub fn push(&mut self, pos: DVec3, vel: DVec3, mass: f64, id: u64) {
        self.pos.push(pos);
        self.vel.push(vel);
        self.mass.push(mass);
        self.id.push(id);
    }

    /// Total mass (mass units).
    pub fn total_mass(&self) -> f64 {
        self.mass.iter().sum()
    }

    /// Mass-weighted centre of mass (length units); the origin for a massless set.
    pub fn centre_of_mass(&self) -> DVec3 {
        let m = self.total_mass();
        if m <= 0.0 {
            return DVec3::ZERO;
        }
        self.pos
            .iter()
            .zip(&self.mass)
            .map(|(p, &w)| *p * w)
            .sum::<DVec3>()
            / m
    }

    /// Mass-weighted mean velocity (velocity units); zero for a massless set.
    pub fn centre_of_mass_velocity(&self) -> DVec3 {
        let m = self.total_mass();
        if m <= 0.0 {
            return DVec3::ZERO;
        }
        self.vel
            .iter()
            .zip(&self.mass)
            .map(|(v, &w)| *v * w)
            .sum::<DVec3>()
            / m
    }

    /// Shifts positions and velocities so the centre of mass rests at the origin.
    pub fn move_to_centre_of_mass_frame(&mut self) {
        let x0 = self.centre_of_mass();
        let v0 = self.centre_of_mass_velocity();
        self.pos.iter_mut().for_each(|p| *p -= x0);
        self.vel.iter_mut().for_each(|v| *v -= v0);
    }

    /// Checks a whole particle set: equal array lengths, at least one particle, finite
    /// positions and velocities, finite non-negative masses and a positive total mass.
    pub fn validate(&self) -> Result<()> {
        self.check_values()?;
        if self.is_empty() {
            return Err(Error::input("the particle set is empty (N = 0)"));
        }
        if self.total_mass() <= 0.0 {
            return Err(Error::input("the total mass is zero"));
        }
        Ok(())
    }

    /// [`Particles::validate`] for this rank's share of a set spread over the ranks of `comm`
    /// (a share may be empty; the set as a whole may not). Collective: every rank returns the
    /// same result.
    pub fn validate_share(&self, comm: &dyn crate::comm::Comm) -> Result<()> {
        crate::comm::agree(comm, self.check_values())?;
        let mut n = [self.len() as u64];
        comm.allreduce_sum_u64(&mut n);
        let mut m = [self.total_mass()];
        comm.allreduce_sum_f64(&mut m);
        if n[0] == 0 {
            return Err(Error::input("the particle set is empty (N = 0)"));
        }
        if m[0] <= 0.0 {
            return Err(Error::input("the total mass is zero"));
        }
        Ok(())
    }

    /// Equal array lengths, finite positions and velocities, finite non-negative masses.
    fn check_values(&self) -> Result<()> {
        let n = self.pos.len();
        if self.vel.len() != n || self.mass.len() != n || self.id.len() != n {
            return Err(Error::input(format!(
                "particle arrays differ in length (pos {}, vel {}, mass {}, id {})",
                n,
                self.vel.len(),
                self.mass.len(),
                self.id.len()
            )));
        }
        for i in 0..n {
            if !self.pos[i].is_finite() {
                return Err(Error::input(format!(
                    "particle {} (id {}) has a non-finite position {:?}",
                    i, self.id[i], self.pos[i]
                )));
            }
            if !self.vel[i].is_finite() {
                return Err(Error::input(format!(
                    "particle {} (id {}) has a non-finite velocity {:?}",
                    i, self.id[i], self.vel[i]
                )));
            }
            let m = self.mass[i];
            if !m.is_finite() || m < 0.0 {
                return Err(Error::input(format!(
                    "particle {} (id {}) has an invalid mass {} (must be finite and >= 0)",
                    i, self.id[i], m
                )));
            }
        }
        Ok(())
    }

    /// Reorders (or selects from) all arrays so that new index `k` holds old particle
    /// `order[k]`; the set then has `order.len()` particles.
    pub fn permute(&mut self, order: &[u32]) {
        self.pos = order.iter().map(|&i| self.pos[i as usize]).collect();
        self.vel = order.iter().map(|&i| self.vel[i as usize]).collect();
        self.mass = order.iter().map(|&i| self.mass[i as usize]).collect();
        self.id = order.iter().map(|&i| self.id[i as usize]).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Particles {
        let mut p = Particles::default();
        p.push(DVec3::new(1.0, 0.0, 0.0), DVec3::new(0.0, 1.0, 0.0), 1.0, 0);
        p.push(
            DVec3::new(-1.0, 0.0, 0.0),
            DVec3::new(0.0, 3.0, 0.0),
            3.0,
            1,
        );
        p
    }

    #[test]
    fn centre_of_mass_frame() {
        let mut p = two();
        assert_eq!(p.centre_of_mass(), DVec3::new(-0.5, 0.0, 0.0));
        p.move_to_centre_of_mass_frame();
        assert!(p.centre_of_mass().length() < 1e-15);
        assert!(p.centre_of_mass_velocity().length() < 1e-15);
    }

    #[test]
    fn validate_rejects_bad_values() {
        assert!(two().validate().is_ok());
        let mut p = two();
        p.mass[1] = -1.0;
        assert!(p.validate().unwrap_err().to_string().contains("mass"));
        let mut p = two();
        p.pos[0].x = f64::NAN;
        assert!(p.validate().unwrap_err().to_string().contains("position"));
        assert!(Particles::default()
            .validate()
            .unwrap_err()
            .to_string()
            .contains("N = 0"));
    }

    #[test]
    fn permute_keeps_ids_with_data() {
        let mut p = two();
        p.permute(&[1, 0]);
        assert_eq!(p.id, vec![1, 0]);
        assert_eq!(p.mass, vec![3.0, 1.0]);
    }
}
