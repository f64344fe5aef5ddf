//! The cartwheel collision (seed 002; Lynds & Toomre 1976): a compact galaxy falls nearly
//! head-on through a disk galaxy along the disk's axis, and the disk answers with an expanding
//! ring.
//!
//! Units as in [`super::galaxy`]: G = 1, lengths in kpc, masses in 10¹⁰ M☉ (velocities in
//! 207.4 km/s, times in 4.715 Myr). The target is [`TARGET`], the intruder a Plummer sphere of
//! a fifth of the target's mass ([`INTRUDER_MASS`], scale [`INTRUDER_SCALE`]); the intruder
//! starts [`START_HEIGHT`] above the disk plane and [`IMPACT_OFFSET`] off the axis (along +x),
//! moving straight down the axis direction (−z) at [`APPROACH_SPEED`] relative to the target,
//! a little faster than the mutual escape speed there (1.85), and reaches the disk after about
//! 6 time units at about 3.6 times the disk's circular speed. The particles are equal in mass
//! up to the rounding of the split (component masses are exact), the target's first; the set
//! is in the frame of the centre of mass, so the target drifts slowly along +z.

use super::compose::{component_seed, concatenate, displace, split_count};
use super::disk::ExponentialDisk;
use super::galaxy::Galaxy;
use super::plummer;
use super::spheroid::{Shape, Spheroid};
use crate::Particles;
use glam::DVec3;

/// The target: an exponential disk of 4·10¹⁰ M☉ (scale length 3 kpc, scale height 0.3 kpc,
/// Toomre Q = 1.5) in an NFW halo of 2·10¹¹ M☉ (scale radius 6 kpc, truncated at 60 kpc), no
/// bulge: total mass 24, circular speed about 0.82 (170 km/s) at the scale length, where a
/// rotation takes about 23 time units (110 Myr).
pub(super) const TARGET: Galaxy = Galaxy {
    disk: ExponentialDisk {
        mass: 4.0,
        scale_length: 3.0,
        scale_height: 0.3,
        toomre_q: 1.5,
    },
    spheroids: &[Spheroid {
        shape: Shape::Nfw,
        mass: 20.0,
        scale: 6.0,
        truncation: 60.0,
    }],
};

/// Mass of the intruder (mass units): a fifth of the target's.
pub(super) const INTRUDER_MASS: f64 = 4.8;
/// Plummer scale length of the intruder (kpc).
pub(super) const INTRUDER_SCALE: f64 = 1.0;
/// Height of the intruder's centre above the disk plane at the start (kpc).
pub(super) const START_HEIGHT: f64 = 15.0;
/// Distance of the intruder's path from the disk's axis (kpc, along +x): nearly head-on.
pub(super) const IMPACT_OFFSET: f64 = 0.5;
/// Speed of the intruder relative to the target at the start, along −z (207.4 km/s units).
pub(super) const APPROACH_SPEED: f64 = 2.0;

/// `n` particles of the collision at its start (see the module documentation); not yet moved
/// to the centre-of-mass frame.
pub(super) fn generate(n: usize, seed: u64) -> Particles {
    let counts = split_count(n, &[TARGET.total_mass(), INTRUDER_MASS]);
    let mut target = concatenate(TARGET.generate(counts[0], component_seed(seed, 0)));
    target.move_to_centre_of_mass_frame();
    let mut intruder = plummer::generate(counts[1], component_seed(seed, 1));
    intruder.move_to_centre_of_mass_frame();
    let length = INTRUDER_SCALE / plummer::scale_length();
    let speed = (INTRUDER_MASS / length).sqrt();
    intruder.pos.iter_mut().for_each(|x| *x *= length);
    intruder.vel.iter_mut().for_each(|v| *v *= speed);
    let mass = INTRUDER_MASS / counts[1] as f64;
    intruder.mass.iter_mut().for_each(|m| *m = mass);
    displace(
        &mut intruder,
        DVec3::new(IMPACT_OFFSET, 0.0, START_HEIGHT),
        DVec3::new(0.0, 0.0, -APPROACH_SPEED),
    );
    concatenate(vec![target, intruder])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intruder_falls_along_the_disk_axis() {
        let n = 20_000;
        let mut p = generate(n, 3);
        p.move_to_centre_of_mass_frame();
        let total = TARGET.total_mass() + INTRUDER_MASS;
        assert!((p.total_mass() / total - 1.0).abs() < 1e-10);
        let n_target = split_count(n, &[TARGET.total_mass(), INTRUDER_MASS])[0];
        let part = |range: std::ops::Range<usize>| Particles {
            pos: p.pos[range.clone()].to_vec(),
            vel: p.vel[range.clone()].to_vec(),
            mass: p.mass[range.clone()].to_vec(),
            id: p.id[range].to_vec(),
        };
        let (target, intruder) = (part(0..n_target), part(n_target..n));
        assert!((target.total_mass() / TARGET.total_mass() - 1.0).abs() < 1e-10);
        let dx = intruder.centre_of_mass() - target.centre_of_mass();
        let dv = intruder.centre_of_mass_velocity() - target.centre_of_mass_velocity();
        assert!(
            (dx - DVec3::new(IMPACT_OFFSET, 0.0, START_HEIGHT)).length() < 1e-9,
            "{dx}"
        );
        assert!(
            (dv - DVec3::new(0.0, 0.0, -APPROACH_SPEED)).length() < 1e-9,
            "{dv}"
        );
        // The disk (the target's first particles) spins about +z, the intruder's path.
        let n_disk = TARGET.counts(n_target)[0];
        let spin: DVec3 = (0..n_disk).map(|i| p.pos[i].cross(p.vel[i])).sum();
        assert!(spin.normalize().z > 0.999, "disk spin {spin}");
        // The mean |z| of a sech² layer is z_d ln 2 = 0.208 about the target's own plane.
        let z0 = target.centre_of_mass().z;
        let layer = (0..n_disk).map(|i| (p.pos[i].z - z0).abs()).sum::<f64>() / n_disk as f64;
        assert!((layer / 0.208 - 1.0).abs() < 0.1, "mean |z| = {layer}");
    }
}
