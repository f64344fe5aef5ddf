//! Projected surface density on a pixel grid: the particles' masses deposited with the
//! cloud-in-cell weights of their projected positions, divided by the pixel area.

use crate::error::{Error, Result};
use crate::particles::Particles;
use glam::DVec3;
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

/// The radius (length units) of the smallest sphere around `center` that holds at least
/// `fraction` of the total mass of `p`; 0 for a massless or empty set.
pub fn mass_radius(p: &Particles, center: DVec3, fraction: f64) -> f64 {
    let mut by_radius: Vec<(f64, f64)> = p
        .pos
        .iter()
        .zip(&p.mass)
        .map(|(x, &m)| ((*x - center).length(), m))
        .collect();
    by_radius.sort_by(|a, b| a.0.total_cmp(&b.0));
    let goal = fraction * p.total_mass();
    let mut enclosed = 0.0;
    for (r, m) in by_radius {
        enclosed += m;
        if enclosed >= goal {
            return r;
        }
    }
    0.0
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

/// The surface density of `p` seen in `view` on `nx` × `ny` pixels: each particle's mass is
/// shared among the four pixels nearest its projected position with cloud-in-cell (bilinear)
/// weights, then each pixel's mass is divided by its area. Mass that falls outside the view is
/// dropped, so the picture's total is the mass in view up to half a pixel at the edges.
pub fn surface_density(p: &Particles, view: &View, nx: usize, ny: usize) -> DensityMap {
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
        let map = surface_density(&one(DVec3::new(0.5, 1.5, 9.0), 3.0), &view(Axis::Z), 4, 4);
        assert_eq!(map.sigma[2], 3.0);
        assert_eq!(map.sigma.iter().sum::<f64>(), 3.0);
        assert_eq!(map.positive_range(), Some((3.0, 3.0)));
    }

    #[test]
    fn mass_is_shared_bilinearly_and_conserved() {
        let map = surface_density(&one(DVec3::new(0.0, 0.0, 0.0), 1.0), &view(Axis::Z), 4, 4);
        // Midway between four pixel centres: a quarter each.
        for k in [5, 6, 9, 10] {
            assert_eq!(map.sigma[k], 0.25, "pixel {k}");
        }
        let map = surface_density(&one(DVec3::new(0.75, -0.1, 0.0), 2.0), &view(Axis::Z), 4, 4);
        assert!((map.sigma.iter().sum::<f64>() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn axes_map_to_right_and_up() {
        // Seen along x, +y is to the right and +z is up: the top-right pixel.
        let p = one(DVec3::new(-7.0, 1.5, 1.5), 1.0);
        let map = surface_density(&p, &view(Axis::X), 4, 4);
        assert_eq!(map.sigma[3], 1.0);
        // Seen along y, +x is right and +z up: x = -1.5, z = -1.5 is the bottom-left pixel.
        let p = one(DVec3::new(-1.5, 5.0, -1.5), 1.0);
        let map = surface_density(&p, &view(Axis::Y), 4, 4);
        assert_eq!(map.sigma[12], 1.0);
    }

    #[test]
    fn mass_outside_the_view_is_dropped() {
        let map = surface_density(&one(DVec3::new(2.6, 0.0, 0.0), 1.0), &view(Axis::Z), 4, 4);
        assert_eq!(map.positive_range(), None);
        // Half a pixel beyond the edge still gives half its mass to the edge pixel.
        let map = surface_density(&one(DVec3::new(2.0, 1.5, 0.0), 1.0), &view(Axis::Z), 4, 4);
        assert_eq!(map.sigma[3], 0.5);
    }

    #[test]
    fn mass_radius_encloses_the_fraction() {
        let mut p = Particles::default();
        for r in 1..=100 {
            p.push(DVec3::new(0.0, r as f64, 0.0), DVec3::ZERO, 1.0, r);
        }
        assert_eq!(mass_radius(&p, DVec3::ZERO, 0.99), 99.0);
        assert_eq!(mass_radius(&p, DVec3::ZERO, 0.5), 50.0);
        assert_eq!(mass_radius(&p, DVec3::new(0.0, 100.0, 0.0), 0.01), 0.0);
        assert_eq!(mass_radius(&Particles::default(), DVec3::ZERO, 0.99), 0.0);
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
