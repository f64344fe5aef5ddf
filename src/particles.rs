//! Particle storage: a structure of arrays in float64.
//!
//! Positions, velocities and masses are kept in float64 because the integrator accumulates many
//! small kicks and drifts and the diagnostics (energy, momentum) need the extra digits. The tree
//! walk copies positions and masses to float32 (see [`crate::tree`]), which is all the force
//! kernels need: their error budget is set by the multipole expansion, far above f32 rounding.
//! Units are whatever the run uses (N-body units, G = 1, by default).
//!
//! **Particle types.** Each particle keeps its GADGET type (0 gas, 1 halo, 2 disk, 3 bulge,
//! 4 stars, 5 boundary) without an array of its own: the type travels in the top three bits of
//! its 64-bit id ([`Particles::id`]), so it follows the particle through everything that moves
//! ids (sorting, domain decomposition, the device arrays, checkpoints). The bits hold the type
//! XOR 1, so that an id whose top bits are zero, as every id hinoki generates, is a type 1
//! (collisionless halo) particle, the type hinoki's own particles always had. A snapshot's ids
//! must therefore be below 2^61 ([`MAX_FILE_ID`]); [`tagged_id`] puts the type in,
//! [`particle_type`] and [`file_id`] take the two apart.

use crate::error::{Error, Result};
use glam::DVec3;

/// The first bit of a particle's type in its id ([`Particles::id`]): bits 61 … 63.
pub const TYPE_SHIFT: u32 = 61;
/// The largest id a particle of a file may have (2^61 − 1): the bits above hold its type.
pub const MAX_FILE_ID: u64 = (1 << TYPE_SHIFT) - 1;
/// The number of particle types (GADGET's: 0 gas, 1 halo, 2 disk, 3 bulge, 4 stars,
/// 5 boundary).
pub const PARTICLE_TYPES: usize = 6;
/// GADGET's type 1, collisionless halo (dark-matter) particles: the type of every particle
/// whose id has no type bits set.
pub const HALO_TYPE: u8 = 1;

/// The id of a particle of type `ptype` (0 … 5) whose id in its file is `id` (at most
/// [`MAX_FILE_ID`]): `id` with the type in its top three bits (stored as `ptype` XOR 1, so that
/// `tagged_id(id, 1) == id`). Callers check both ranges first (the snapshot reader makes an id
/// above [`MAX_FILE_ID`] an input error); bits outside them are cut off.
pub fn tagged_id(id: u64, ptype: u8) -> u64 {
    debug_assert!(id <= MAX_FILE_ID && usize::from(ptype) < PARTICLE_TYPES);
    (id & MAX_FILE_ID) | (u64::from((ptype ^ HALO_TYPE) & 7) << TYPE_SHIFT)
}

/// The particle type (0 … 5) that the id `tagged` carries; 6 or 7 for bits that no
/// [`tagged_id`] sets (the snapshot writer refuses such ids).
pub fn particle_type(tagged: u64) -> u8 {
    (tagged >> TYPE_SHIFT) as u8 ^ HALO_TYPE
}

/// The id of `tagged` as its file holds it: without the type bits.
pub fn file_id(tagged: u64) -> u64 {
    tagged & MAX_FILE_ID
}

/// How messages name the particle `tagged`: "id 42" for a halo particle, "id 42 of type 0"
/// for the others.
pub fn id_label(tagged: u64) -> String {
    match particle_type(tagged) {
        HALO_TYPE => format!("id {tagged}"),
        t => format!("id {} of type {t}", file_id(tagged)),
    }
}

/// A set of particles, one entry per particle in each array (all arrays have the same length).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Particles {
    /// Positions (length units).
    pub pos: Vec<DVec3>,
    /// Velocities (length / time units).
    pub vel: Vec<DVec3>,
    /// Masses (mass units), finite and non-negative.
    pub mass: Vec<f64>,
    /// Unique particle identifiers, kept through every reordering; the top three bits hold the
    /// particle's type ([`tagged_id`], [`particle_type`], [`file_id`]).
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
        self.mass_moment() / m
    }

    /// Σ m x over the particles (mass × length units): the centre of mass times the mass.
    pub fn mass_moment(&self) -> DVec3 {
        self.pos
            .iter()
            .zip(&self.mass)
            .map(|(p, &w)| *p * w)
            .sum::<DVec3>()
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
                    "particle {} ({}) has a non-finite position {:?}",
                    i,
                    id_label(self.id[i]),
                    self.pos[i]
                )));
            }
            if !self.vel[i].is_finite() {
                return Err(Error::input(format!(
                    "particle {} ({}) has a non-finite velocity {:?}",
                    i,
                    id_label(self.id[i]),
                    self.vel[i]
                )));
            }
            let m = self.mass[i];
            if !m.is_finite() || m < 0.0 {
                return Err(Error::input(format!(
                    "particle {} ({}) has an invalid mass {} (must be finite and >= 0)",
                    i,
                    id_label(self.id[i]),
                    m
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

    /// The type travels in the id's top bits: every type and the ids at both ends of the range
    /// come back apart as they went in; an untagged id is a halo particle; the bits are exactly
    /// the top three (type XOR 1).
    #[test]
    fn ids_carry_their_type() {
        for ptype in 0..PARTICLE_TYPES as u8 {
            for id in [0, 1, 12_345, 1 << 60, MAX_FILE_ID] {
                let t = tagged_id(id, ptype);
                assert_eq!((particle_type(t), file_id(t)), (ptype, id), "{id} {ptype}");
                assert_eq!(t >> 61, u64::from(ptype ^ 1));
            }
        }
        assert_eq!(tagged_id(77, HALO_TYPE), 77);
        assert_eq!(particle_type(123), 1);
        assert_eq!(tagged_id(5, 0), (1 << 61) + 5);
        assert_eq!(particle_type(u64::MAX), 6);
        assert_eq!(id_label(42), "id 42");
        assert_eq!(id_label(tagged_id(42, 0)), "id 42 of type 0");
        assert_eq!(MAX_FILE_ID, (1 << 61) - 1);
    }

    #[test]
    fn permute_keeps_ids_with_data() {
        let mut p = two();
        p.permute(&[1, 0]);
        assert_eq!(p.id, vec![1, 0]);
        assert_eq!(p.mass, vec![3.0, 1.0]);
    }
}
