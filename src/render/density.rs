//! Projected surface density on a pixel grid: the particles' masses deposited with the
//! cloud-in-cell weights of their projected positions, divided by the pixel area.

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::particles::Particles;
use glam::DVec3;
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;

/// The axis along which the particles are projected (the line of sight).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Axis {
    /// Along x: the picture shows (y, z).
    X,
    /// Along y: the picture shows (x, z).
    Y,
    /// Along z: the picture shows (x, y).
    #[default]
    Z,
}

impl Axis {
    /// The coordinates (0 = x, 1 = y, 2 = z) that run right and up in the picture.
    pub fn plane(self) -> (usize, usize) {
        match self {
            Self::X => (1, 2),
            Self::Y => (0, 2),
            Self::Z => (0, 1),
        }
    }

    /// The coordinate (0 = x, 1 = y, 2 = z) along the line of sight.
    pub fn line_of_sight(self) -> usize {
        let (h, v) = self.plane();
        3 - h - v
    }

    /// The names of the coordinates that run right and up in the picture.
    pub fn plane_names(self) -> (&'static str, &'static str) {
        const NAMES: [&str; 3] = ["x", "y", "z"];
        let (h, v) = self.plane();
        (NAMES[h], NAMES[v])
    }
}

impl FromStr for Axis {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "x" => Ok(Self::X),
            "y" => Ok(Self::Y),
            "z" => Ok(Self::Z),
            _ => Err(Error::input(format!(
                "unknown projection axis {s:?} (expected x, y or z)"
            ))),
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::X => "x",
            Self::Y => "y",
            Self::Z => "z",
        };
        f.write_str(name)
    }
}

/// What a picture shows: the square of half-width `half_width` (length units) around `center`,
/// seen along `axis`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    /// The point at the middle of the picture (length units).
    pub center: DVec3,
    /// Half the side of the square shown (length units), > 0.
    pub half_width: f64,
    /// The line of sight.
    pub axis: Axis,
}

impl View {
    /// The picture's horizontal and vertical ranges (length units): (left, right), (bottom, top).
    pub fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let (h, v) = self.axis.plane();
        let c = self.center.to_array();
        let l = self.half_width;
        ((c[h] - l, c[h] + l), (c[v] - l, c[v] + l))
    }
}

/// Particles whose radii [`mass_radius`] gathers and sorts, at most: it halves the range of
/// radii that holds the answer until no more of them lie in it.
const CANDIDATES: usize = 4096;

/// The radius (length units) of the smallest sphere around `center` that holds at least
/// `fraction` (less 1e-12 of it) of the total mass of the particles `p` of every rank of
/// `comm`; 0 for a massless or empty set. Collective: the range of radii that holds it is
/// halved (a sum over the ranks each time) until at most a few thousand particles lie in it,
/// whose radii are then gathered and summed in order; no rank holds more than its own
/// particles' radii.
pub fn mass_radius(comm: &dyn Comm, p: &Particles, center: DVec3, fraction: f64) -> f64 {
    mass_radius_among(comm, p, center, fraction, CANDIDATES)
}

/// [`mass_radius`], gathering at most `candidates` radii.
fn mass_radius_among(
    comm: &dyn Comm,
    p: &Particles,
    center: DVec3,
    fraction: f64,
    candidates: usize,
) -> f64 {
    let radii: Vec<(f64, f64)> = p
        .pos
        .par_iter()
        .zip(&p.mass)
        .map(|(x, &m)| ((*x - center).length(), m))
        .collect();
    // Mass and number of the particles with radii in (lo, hi], over all ranks.
    let within = |lo: f64, hi: f64| {
        let mut s = radii
            .par_iter()
            .filter(|&&(r, _)| r > lo && r <= hi)
            .map(|&(_, m)| [m, 1.0])
            .reduce(|| [0.0; 2], |a, b| [a[0] + b[0], a[1] + b[1]]);
        comm.allreduce_sum_f64(&mut s);
        (s[0], s[1] as usize)
    };
    let mut top = [radii.iter().map(|x| x.0).fold(0.0, f64::max)];
    comm.allreduce_max_f64(&mut top);
    // The answer lies in (lo, hi]: `below`, the mass within lo, is short of the goal.
    let (mut lo, mut hi, mut below) = (-1.0, top[0], 0.0);
    let (total, mut count) = within(lo, hi);
    // A hair under the fraction: where it falls on a particle's edge (a round fraction of
    // equal masses), sums in any order, over any ranks, stop at that particle.
    let goal = fraction * total * (1.0 - 1e-12);
    if total.is_nan() || total <= 0.0 {
        return 0.0;
    }
    while count > candidates {
        let mid = if lo < 0.0 {
            hi / 2.0
        } else {
            lo + (hi - lo) / 2.0
        };
        if !(mid > lo && mid < hi) {
            // No radius between lo and hi: every candidate lies at hi.
            return hi;
        }
        let (mass, n) = within(lo, mid);
        if below + mass >= goal {
            (hi, count) = (mid, n);
        } else {
            (lo, below, count) = (mid, below + mass, count - n);
        }
    }
    let mine: Vec<f64> = radii
        .iter()
        .filter(|&&(r, _)| r > lo && r <= hi)
        .flat_map(|&(r, m)| [r, m])
        .collect();
    let mut all: Vec<(f64, f64)> = match comm.allgatherv_f64(&mine) {
        Ok(v) => v.chunks_exact(2).map(|c| (c[0], c[1])).collect(),
        // Too many to gather (not for a few thousand): the range's upper end.
        Err(_) => return hi,
    };
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut enclosed = below;
    for (r, m) in all {
        enclosed += m;
        if enclosed >= goal {
            return r;
        }
    }
    hi
}

/// Surface density on a grid of `nx` × `ny` pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityMap {
    /// Pixels across.
    pub nx: usize,
    /// Pixels down.
    pub ny: usize,
    /// Σ of each pixel (mass / length² units), row by row from the top row, left to right.
    pub sigma: Vec<f64>,
}

impl DensityMap {
    /// The largest Σ and the smallest positive Σ, or `None` when no pixel holds mass.
    pub fn positive_range(&self) -> Option<(f64, f64)> {
        let positive = self.sigma.iter().copied().filter(|&s| s > 0.0);
        let min = positive.clone().reduce(f64::min)?;
        let max = positive.reduce(f64::max)?;
        Some((min, max))
    }
}

/// The surface density of the particles `p` of every rank of `comm` seen in `view` on `nx` ×
/// `ny` pixels: each particle's mass is shared among the four pixels nearest its projected
/// position with cloud-in-cell (bilinear) weights, the ranks' masses are summed, then each
/// pixel's mass is divided by its area. Mass that falls outside the view is dropped, so the
/// picture's total is the mass in view up to half a pixel at the edges. Collective.
pub fn surface_density(
    comm: &dyn Comm,
    p: &Particles,
    view: &View,
    nx: usize,
    ny: usize,
) -> DensityMap {
    let ((x0, x1), (y0, y1)) = view.ranges();
    let (dx, dy) = ((x1 - x0) / nx as f64, (y1 - y0) / ny as f64);
    let (h, v) = view.axis.plane();
    let mut mass = vec![0.0; nx * ny];
    let mut deposit = |i: i64, j: i64, m: f64| {
        if (0..nx as i64).contains(&i) && (0..ny as i64).contains(&j) {
            // Row 0 is the top of the picture: the largest vertical coordinate.
            let row = ny - 1 - j as usize;
            mass[row * nx + i as usize] += m;
        }
    };
    for (x, &m) in p.pos.iter().zip(&p.mass) {
        let x = x.to_array();
        // Position in pixel units, measured from the centre of pixel (0, 0).
        let fx = (x[h] - x0) / dx - 0.5;
        let fy = (x[v] - y0) / dy - 0.5;
        if !(fx > -1.0 && fx < nx as f64 && fy > -1.0 && fy < ny as f64) {
            continue;
        }
        let (i, j) = (fx.floor(), fy.floor());
        let (wx, wy) = (fx - i, fy - j);
        let (i, j) = (i as i64, j as i64);
        deposit(i, j, m * (1.0 - wx) * (1.0 - wy));
        deposit(i + 1, j, m * wx * (1.0 - wy));
        deposit(i, j + 1, m * (1.0 - wx) * wy);
        deposit(i + 1, j + 1, m * wx * wy);
    }
    comm.allreduce_sum_f64(&mut mass);
    let area = dx * dy;
    DensityMap {
        nx,
        ny,
        sigma: mass.into_iter().map(|m| m / area).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    fn one(x: DVec3, m: f64) -> Particles {
        let mut p = Particles::default();
        p.push(x, DVec3::ZERO, m, 0);
        p
    }

    fn view(axis: Axis) -> View {
        View {
            center: DVec3::ZERO,
            half_width: 2.0,
            axis,
        }
    }

    #[test]
    fn a_particle_at_a_pixel_centre_fills_that_pixel() {
        // 4 × 4 pixels of side 1 over [-2, 2]²: pixel (i = 2, row 0) is centred on (0.5, 1.5).
        let map = surface_density(
            &SingleProcess,
            &one(DVec3::new(0.5, 1.5, 9.0), 3.0),
            &view(Axis::Z),
            4,
            4,
        );
        assert_eq!(map.sigma[2], 3.0);
        assert_eq!(map.sigma.iter().sum::<f64>(), 3.0);
        assert_eq!(map.positive_range(), Some((3.0, 3.0)));
    }

    #[test]
    fn mass_is_shared_bilinearly_and_conserved() {
        let map = surface_density(
            &SingleProcess,
            &one(DVec3::new(0.0, 0.0, 0.0), 1.0),
            &view(Axis::Z),
            4,
            4,
        );
        // Midway between four pixel centres: a quarter each.
        for k in [5, 6, 9, 10] {
            assert_eq!(map.sigma[k], 0.25, "pixel {k}");
        }
        let map = surface_density(
            &SingleProcess,
            &one(DVec3::new(0.75, -0.1, 0.0), 2.0),
            &view(Axis::Z),
            4,
            4,
        );
        assert!((map.sigma.iter().sum::<f64>() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn axes_map_to_right_and_up() {
        // Seen along x, +y is to the right and +z is up: the top-right pixel.
        let p = one(DVec3::new(-7.0, 1.5, 1.5), 1.0);
        let map = surface_density(&SingleProcess, &p, &view(Axis::X), 4, 4);
        assert_eq!(map.sigma[3], 1.0);
        // Seen along y, +x is right and +z up: x = -1.5, z = -1.5 is the bottom-left pixel.
        let p = one(DVec3::new(-1.5, 5.0, -1.5), 1.0);
        let map = surface_density(&SingleProcess, &p, &view(Axis::Y), 4, 4);
        assert_eq!(map.sigma[12], 1.0);
    }

    #[test]
    fn mass_outside_the_view_is_dropped() {
        let map = surface_density(
            &SingleProcess,
            &one(DVec3::new(2.6, 0.0, 0.0), 1.0),
            &view(Axis::Z),
            4,
            4,
        );
        assert_eq!(map.positive_range(), None);
        // Half a pixel beyond the edge still gives half its mass to the edge pixel.
        let map = surface_density(
            &SingleProcess,
            &one(DVec3::new(2.0, 1.5, 0.0), 1.0),
            &view(Axis::Z),
            4,
            4,
        );
        assert_eq!(map.sigma[3], 0.5);
    }

    #[test]
    fn mass_radius_encloses_the_fraction() {
        let mut p = Particles::default();
        for r in 1..=100 {
            p.push(DVec3::new(0.0, r as f64, 0.0), DVec3::ZERO, 1.0, r);
        }
        // All radii gathered at once, or the range halved down to 4, 2 and 1 of them.
        for candidates in [CANDIDATES, 4, 2, 1] {
            let radius = |p: &Particles, c: DVec3, f: f64| {
                mass_radius_among(&SingleProcess, p, c, f, candidates)
            };
            assert_eq!(radius(&p, DVec3::ZERO, 0.99), 99.0);
            assert_eq!(radius(&p, DVec3::ZERO, 0.5), 50.0);
            assert_eq!(radius(&p, DVec3::ZERO, 1.0), 100.0);
            assert_eq!(radius(&p, DVec3::new(0.0, 100.0, 0.0), 0.01), 0.0);
            assert_eq!(radius(&Particles::default(), DVec3::ZERO, 0.99), 0.0);
        }
        // Many particles at one radius: the range cannot be halved below it.
        let mut same = Particles::default();
        for k in 0..10 {
            same.push(DVec3::new(0.0, 0.0, 3.0), DVec3::ZERO, 1.0, k);
        }
        assert_eq!(
            mass_radius_among(&SingleProcess, &same, DVec3::ZERO, 0.5, 2),
            3.0
        );
        // Unequal masses: the radius that holds the fraction of the mass, not of the count.
        let mut heavy = Particles::default();
        heavy.push(DVec3::new(1.0, 0.0, 0.0), DVec3::ZERO, 8.0, 0);
        for k in 2..=5 {
            heavy.push(DVec3::new(k as f64, 0.0, 0.0), DVec3::ZERO, 0.5, k);
        }
        for candidates in [CANDIDATES, 1] {
            let r = |f| mass_radius_among(&SingleProcess, &heavy, DVec3::ZERO, f, candidates);
            assert_eq!((r(0.8), r(0.9), r(1.0)), (1.0, 3.0, 5.0));
        }
    }

    #[test]
    fn axis_names_parse_and_print() {
        for a in [Axis::X, Axis::Y, Axis::Z] {
            assert_eq!(a.to_string().parse::<Axis>().unwrap(), a);
        }
        assert!("w"
            .parse::<Axis>()
            .unwrap_err()
            .message
            .contains("x, y or z"));
        assert_eq!(Axis::Y.plane_names(), ("x", "z"));
    }
}
