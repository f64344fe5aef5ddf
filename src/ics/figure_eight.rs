//! Plummer galaxies on periodic choreographies of the equal-mass three- and four-body problems:
//! the "figure-eight galaxies" test problems of Fujiwara & Nakasato (seed 002).
//!
//! In a choreography all bodies run along one closed curve, a fixed fraction of the period
//! apart. Each point mass is replaced by a Plummer galaxy of the same mass whose centre of mass
//! starts at the body's position with the body's velocity; while the galaxies stay well
//! separated their centres follow the point-mass orbit.
//!
//! Units: G = 1, total mass 1 (each of the `k` galaxies has mass `1/k`), lengths those of the
//! published initial conditions (unit masses, G = 1), so velocities are the published ones
//! times `sqrt(1/k)` and periods the published ones times `sqrt(k)`. The orbit lies in the
//! plane z = 0. Galaxy `j` is the Hénon-unit Plummer sphere of [`super::plummer`], recentred,
//! with its length scaled to the choreography's Plummer scale `b` (chosen so that the closest
//! approach of two centres is 10 to 14 b) and its velocities to its mass; it gets the particles
//! with ids in the `j`-th of `k` nearly equal blocks (every particle has mass `1/N`; when `k`
//! does not divide `N` the galaxy masses differ from `1/k` by at most `1/N`).

use super::compose::{component_seed, concatenate, displace, split_count};
use super::plummer;
use crate::Particles;
use glam::DVec3;

/// A periodic orbit of `k` equal point masses in the plane, in the published units (G = 1,
/// every mass 1), with the Plummer scale of the galaxies put on it (its period is in the
/// documentation of each orbit, and checked in the tests).
pub(super) struct Choreography {
    /// Initial positions (x, y) of the bodies (length units).
    pos: &'static [[f64; 2]],
    /// Initial velocities (v_x, v_y) of the bodies (published units: unit masses).
    vel: &'static [[f64; 2]],
    /// Plummer scale length `b` of each galaxy (length units).
    galaxy_scale: f64,
}

/// The figure-eight of Chenciner & Montgomery (2000) for three bodies, with Simó's initial
/// conditions (body 3 at the centre, bodies 1 and 2 opposite): period 6.32591398 (10.957 with
/// masses 1/3), closest approach of two bodies 0.690, galaxies of scale `b = 0.05`. The orbit is
/// linearly stable, but the galaxies raise tides on each other at every close passage: in runs
/// their centres keep to the curve to within 0.08 for half a period, then drift off it and
/// along it (up to 0.18 off and a tenth of a period ahead after one period; see
/// docs/test-problems.md).
pub(super) const FIGURE_EIGHT: Choreography = Choreography {
    pos: &[
        [0.97000436, -0.24308753],
        [-0.97000436, 0.24308753],
        [0.0, 0.0],
    ],
    vel: &[
        [0.466203685, 0.43236573],
        [0.466203685, 0.43236573],
        [-0.93240737, -0.86473146],
    ],
    galaxy_scale: 0.05,
};

/// Gerver's "super-eight" for four bodies (Simó 2000; proved by Kapela & Simó 2007): the four
/// run along a figure-eight with an extra loop round each lobe, a quarter period apart. Bodies
/// 1, 3 start on the x axis at ±1.382857 moving along ±y, bodies 2, 4 on the y axis at
/// ±0.157030 moving along ±x. Period ≈ 6.2833 (12.567 with masses 1/4, measured by integrating
/// these six-digit initial conditions), closest approach 0.292, galaxies of scale
/// `b = 0.03`. Unlike the three-body eight the super-eight is linearly unstable: the galaxies
/// follow it for about one period, then go their own ways.
pub(super) const SUPER_EIGHT: Choreography = Choreography {
    pos: &[
        [1.382857, 0.0],
        [0.0, 0.157030],
        [-1.382857, 0.0],
        [0.0, -0.157030],
    ],
    vel: &[
        [0.0, 0.584873],
        [1.871935, 0.0],
        [0.0, -0.584873],
        [-1.871935, 0.0],
    ],
    galaxy_scale: 0.03,
};

impl Choreography {
    /// Number of bodies (galaxies).
    fn bodies(&self) -> usize {
        self.pos.len()
    }

    /// Start position of body `j` (length units).
    fn position(&self, j: usize) -> DVec3 {
        DVec3::new(self.pos[j][0], self.pos[j][1], 0.0)
    }

    /// Start velocity of body `j` when every body has mass `1/k` (velocity units, G = 1).
    fn velocity(&self, j: usize) -> DVec3 {
        let scale = (1.0 / self.bodies() as f64).sqrt();
        DVec3::new(self.vel[j][0], self.vel[j][1], 0.0) * scale
    }
}

/// `n` particles: the galaxies of `orbit` at their start positions and velocities (G = 1,
/// total mass 1; see the module documentation); the centre of mass is at rest at the origin up
/// to rounding.
pub(super) fn generate(orbit: &Choreography, n: usize, seed: u64) -> Particles {
    let k = orbit.bodies();
    let b_henon = plummer::scale_length();
    let galaxies = split_count(n, &vec![1.0; k])
        .into_iter()
        .enumerate()
        .map(|(j, count)| {
            let mut g = plummer::generate(count, component_seed(seed, j));
            g.move_to_centre_of_mass_frame();
            let mass = count as f64 / n as f64;
            let length = orbit.galaxy_scale / b_henon;
            let speed = (mass / length).sqrt();
            g.pos.iter_mut().for_each(|x| *x *= length);
            g.vel.iter_mut().for_each(|v| *v *= speed);
            g.mass.iter_mut().for_each(|m| *m = 1.0 / n as f64);
            displace(&mut g, orbit.position(j), orbit.velocity(j));
            g
        })
        .collect();
    concatenate(galaxies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::drift;
    use crate::walk::direct::direct_forces;

    /// The period of `orbit` when every body has mass `1/k` (time units): the published period
    /// (unit masses) times `sqrt(k)`.
    fn period(orbit: &Choreography) -> f64 {
        let published = if orbit.bodies() == 3 {
            6.32591398
        } else {
            6.2833
        };
        published * (orbit.bodies() as f64).sqrt()
    }

    /// v ← v + a·dt for every particle.
    fn kick(p: &mut Particles, a: &[DVec3], dt: f64) {
        p.vel.iter_mut().zip(a).for_each(|(v, a)| *v += *a * dt);
    }

    /// Leapfrog with exact direct-summation forces (softening `eps`): `steps` steps of `dt`.
    fn integrate(p: &mut Particles, eps: f64, dt: f64, steps: usize) {
        let all: Vec<usize> = (0..p.len()).collect();
        let acc = |p: &Particles| direct_forces(&p.pos, &p.mass, eps, &all).0;
        let mut a = acc(p);
        for _ in 0..steps {
            kick(p, &a, 0.5 * dt);
            drift(p, dt);
            a = acc(p);
            kick(p, &a, 0.5 * dt);
        }
    }

    /// The point masses of `orbit` (mass `1/k` each) as a particle set.
    fn point_masses(orbit: &Choreography) -> Particles {
        let k = orbit.bodies();
        let mut p = Particles::default();
        for j in 0..k {
            let (x, v) = (orbit.position(j), orbit.velocity(j));
            p.push(x, v, 1.0 / k as f64, j as u64);
        }
        p
    }

    /// Centre of mass of each of the `k` galaxies (ids in `k` equal blocks).
    fn centres(p: &Particles, k: usize) -> Vec<DVec3> {
        let per = p.len() / k;
        (0..k)
            .map(|j| {
                let ids = j * per..(j + 1) * per;
                let x: DVec3 =
                    p.id.iter()
                        .zip(&p.pos)
                        .filter(|(id, _)| ids.contains(&(**id as usize)))
                        .map(|(_, x)| *x)
                        .sum();
                x / per as f64
            })
            .collect()
    }

    #[test]
    fn point_masses_are_choreographies() {
        // Over a k-th of the period each body moves to where the next one started (the
        // published digits hold the orbit to about 1e-5 over that time).
        for (orbit, next) in [
            (&FIGURE_EIGHT, [2, 0, 1].as_slice()),
            (&SUPER_EIGHT, &[3, 0, 1, 2]),
        ] {
            let k = orbit.bodies();
            let mut p = point_masses(orbit);
            let steps = 20_000;
            integrate(&mut p, 0.0, period(orbit) / k as f64 / steps as f64, steps);
            for (j, &m) in next.iter().enumerate() {
                let miss = (p.pos[j] - orbit.position(m)).length();
                assert!(
                    miss < 1e-3,
                    "k = {k}: body {j} missed body {m}'s start by {miss}"
                );
            }
        }
    }

    #[test]
    fn galaxies_start_on_the_orbit() {
        for orbit in [&FIGURE_EIGHT, &SUPER_EIGHT] {
            let k = orbit.bodies();
            let n = 400 * k;
            let p = generate(orbit, n, 5);
            assert_eq!(p.id, (0..n as u64).collect::<Vec<_>>());
            assert!((p.total_mass() - 1.0).abs() < 1e-12);
            assert!(p.centre_of_mass().length() < 1e-12);
            assert!(p.centre_of_mass_velocity().length() < 1e-12);
            for (j, c) in centres(&p, k).into_iter().enumerate() {
                assert!(
                    (c - orbit.position(j)).length() < 1e-12,
                    "k = {k}, galaxy {j}"
                );
                // The half-mass radius of each galaxy is 1.305 b.
                let ids = (j * 400) as u64..((j + 1) * 400) as u64;
                let mut r: Vec<f64> =
                    p.id.iter()
                        .zip(&p.pos)
                        .filter(|(id, _)| ids.contains(id))
                        .map(|(_, x)| (*x - c).length())
                        .collect();
                r.sort_by(f64::total_cmp);
                let half = r[200] / orbit.galaxy_scale;
                assert!(
                    (half / 1.305 - 1.0).abs() < 0.15,
                    "k = {k}: r_half = {half} b"
                );
            }
        }
    }

    #[test]
    fn galaxy_centres_follow_the_orbit() {
        // Self-gravitating galaxies of 200 particles, run with exact forces for an eighth of
        // the period next to the point masses: the centres stay on the point-mass orbit.
        for orbit in [&FIGURE_EIGHT, &SUPER_EIGHT] {
            let k = orbit.bodies();
            let mut p = generate(orbit, 200 * k, 2);
            let mut points = point_masses(orbit);
            let dt = orbit.galaxy_scale / 25.0;
            let steps = (period(orbit) / 8.0 / dt) as usize;
            integrate(&mut p, orbit.galaxy_scale / 5.0, dt, steps);
            integrate(&mut points, 0.0, dt, steps);
            for (j, c) in centres(&p, k).into_iter().enumerate() {
                let miss = (c - points.pos[j]).length();
                let moved = (points.pos[j] - orbit.position(j)).length();
                // Measured: 1 to 3% of the distance moved (tides between the extended
                // galaxies, strongest at the close start of the super-eight); a wrong velocity
                // scale would be off by a good part of it.
                assert!(
                    miss < moved / 20.0,
                    "k = {k}, galaxy {j}: {miss} off the orbit after moving {moved}"
                );
            }
        }
    }
}
