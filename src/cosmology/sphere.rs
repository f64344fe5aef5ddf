//! A sphere cut from a periodic box: the initial conditions of a cosmological run with open
//! boundaries (vacuum around a spherical region, as Nakasato 2009 ran its 2.87 M particles).

use crate::error::{Error, Result};
use crate::particles::Particles;
use glam::DVec3;

/// Checks that a sphere of `radius` can be cut from a periodic box of side `box_size` (same
/// length unit): the box finite and > 0, 0 < `radius` ≤ `box_size`/2 (the sphere inside one
/// box). The error is one line.
pub fn check_sphere(box_size: f64, radius: f64) -> Result<()> {
    if !(box_size.is_finite() && box_size > 0.0) {
        return Err(Error::input(format!(
            "cannot cut a sphere from a box of side {box_size} (must be finite and > 0)"
        )));
    }
    if !(radius > 0.0 && radius <= box_size / 2.0) {
        return Err(Error::input(format!(
            "--sphere radius {radius} must be > 0 and at most half the box, {}",
            box_size / 2.0
        )));
    }
    Ok(())
}

/// The particles of `p` (positions in [0, `box_size`)³, any length unit) that lie within
/// `radius` of the box centre, moved so that the centre is the origin; velocities, masses and
/// ids unchanged, the order kept. Positions are taken as wrapped into the box, so each
/// particle is at its nearest image of the centre (`radius` ≤ `box_size`/2 keeps the sphere
/// inside one box). `p` is reused: besides it, the list of the kept particles and one of
/// their arrays at a time (at most 16 bytes a particle of `p`, for the largest sphere).
/// Fails as [`check_sphere`] does.
pub fn cut_sphere(mut p: Particles, box_size: f64, radius: f64) -> Result<Particles> {
    check_sphere(box_size, radius)?;
    let centre = DVec3::splat(box_size / 2.0);
    let inside: Vec<u32> = (0..p.len())
        .filter(|&i| p.pos[i].distance_squared(centre) <= radius * radius)
        .map(|i| i as u32)
        .collect();
    p.permute(&inside);
    p.pos.iter_mut().for_each(|x| *x -= centre);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unperturbed n³ lattice in a box of side `l`, ids 1 … n³.
    fn lattice(n: usize, l: f64) -> Particles {
        let mut p = Particles::default();
        for i in 0..n {
            for j in 0..n {
                for k in 0..n {
                    let q = DVec3::new(i as f64, j as f64, k as f64) * (l / n as f64);
                    p.push(q, DVec3::new(1.0, 2.0, 3.0), 0.5, p.len() as u64 + 1);
                }
            }
        }
        p
    }

    /// The lattice points within `r` of the centre, counted in integers: (i − n/2)² + … ≤
    /// (r n / l)², for a box whose centre is a lattice point.
    fn lattice_count(n: i64, l: f64, r: f64) -> usize {
        let limit = (r * n as f64 / l).powi(2);
        let mut count = 0;
        for i in 0..n {
            for j in 0..n {
                for k in 0..n {
                    let d2 = (i - n / 2).pow(2) + (j - n / 2).pow(2) + (k - n / 2).pow(2);
                    count += usize::from(d2 as f64 <= limit);
                }
            }
        }
        count
    }

    #[test]
    fn a_sphere_of_the_lattice_about_the_origin() {
        // 100/16 = 6.25 per cell: 40²/6.25² = 40.96, between the shells 40 and 41.
        let (n, l, r) = (16, 100.0, 40.0);
        let s = cut_sphere(lattice(n, l), l, r).unwrap();
        assert_eq!(s.len(), lattice_count(n as i64, l, r));
        // About the sphere's share of the box: 4π/3 0.4³ of 16³ points, 1098.
        let volume = 4.0 / 3.0 * std::f64::consts::PI * (r / l).powi(3) * 4096.0;
        assert!((s.len() as f64 / volume - 1.0).abs() < 0.06, "{}", s.len());
        assert!(s.pos.iter().all(|x| x.length() <= r));
        // The lattice is symmetric about the centre point (but for the far faces, outside r).
        assert!(s.pos.iter().sum::<DVec3>().length() < 1e-9);
        assert!(s.vel.iter().all(|v| *v == DVec3::new(1.0, 2.0, 3.0)));
        let mut ids = s.id.clone();
        ids.dedup();
        assert_eq!(ids.len(), s.len());
        // The largest sphere reaches the centres of the near faces (i = 0), L/2 away.
        let half = cut_sphere(lattice(n, l), l, l / 2.0).unwrap();
        assert_eq!(half.len(), lattice_count(n as i64, l, l / 2.0));
    }

    #[test]
    fn bad_radii_and_boxes_are_refused() {
        let p = lattice(4, 10.0);
        for r in [0.0, -1.0, 5.0001, f64::NAN, f64::INFINITY] {
            let e = cut_sphere(p.clone(), 10.0, r).unwrap_err();
            assert!(e.message.contains("at most half the box, 5"), "{r}: {e}");
        }
        assert!(cut_sphere(p.clone(), 0.0, 1.0).is_err());
        assert_eq!(
            cut_sphere(p.clone(), 10.0, 5.0).unwrap().len(),
            lattice_count(4, 10.0, 5.0)
        );
    }
}
