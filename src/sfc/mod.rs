//! Space-filling-curve keys: 63-bit Morton and Peano–Hilbert keys, 21 bits per axis, of positions
//! quantised on a 2²¹ grid spanning a cubic bounding box.

pub mod frame;
pub mod hilbert;
pub mod morton;

pub use frame::Frame;

/// The particle ordering used to build the tree and to order the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Peano–Hilbert order (the default; most compact groups).
    Hilbert,
    /// Morton (Z) order.
    Morton,
    /// Input order: the tree is still built on Morton keys, but the walk visits particles (and
    /// forms groups) in the order they were given, as the unordered runs of seeds 000/001.
    None,
}

use crate::error::{Error, Result};
use glam::DVec3;
use rayon::prelude::*;

/// Grid resolution per axis: 2²¹ cells, so that three coordinates fill a 63-bit key.
pub const GRID: u32 = 1 << 21;

/// The largest softening length a [`Frame`] holds, in units of its side: 2³² (its square
/// stays far inside float32).
pub const MAX_EPS_PER_SIDE: f64 = 4294967296.0;

/// A cube that contains every particle, quantised into a 2²¹ grid per axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridBox {
    /// Lower corner (length units).
    pub origin: DVec3,
    /// Side length (length units), > 0.
    pub side: f64,
}

impl GridBox {
    /// The smallest cube (slightly enlarged so that no point sits on the upper face) around the
    /// axis-aligned bounding box `[lo, hi]`; a cube of side 1 around a single point.
    pub fn around(lo: DVec3, hi: DVec3) -> Self {
        let extent = (hi - lo).max_element();
        let side = if extent > 0.0 {
            extent * (1.0 + 1e-6)
        } else {
            1.0
        };
        let centre = 0.5 * (lo + hi);
        Self {
            origin: centre - DVec3::splat(0.5 * side),
            side,
        }
    }

    /// This cube widened about its centre by `share` of its side (≥ 0).
    pub fn widened(&self, share: f64) -> Self {
        let side = self.side * (1.0 + share);
        Self {
            origin: self.centre() - DVec3::splat(0.5 * side),
            side,
        }
    }

    /// Whether the axis-aligned box `[lo, hi]` lies inside this cube (its upper faces
    /// excluded, as no grid cell holds them).
    pub fn holds(&self, lo: DVec3, hi: DVec3) -> bool {
        lo.cmpge(self.origin).all() && hi.cmplt(self.origin + DVec3::splat(self.side)).all()
    }

    /// The cube of the [`Frame`] that the float32 values of particles in the bounding box
    /// `[lo, hi]` are taken to, for a softening length `eps` (length units): the
    /// cube [`GridBox::around`] them, widened where needed to ε / [`MAX_EPS_PER_SIDE`] (its
    /// particles are then closer than float32 tells apart within ε anyway), so that ε² in the
    /// frame stays far inside float32. Fails, naming the box, when float64 cannot hold the
    /// distances between its corners.
    pub fn frame_for(lo: DVec3, hi: DVec3, eps: f64) -> Result<Self> {
        let mut g = Self::around(lo, hi);
        let least = eps / MAX_EPS_PER_SIDE;
        if g.side < least {
            g = Self {
                origin: g.centre() - DVec3::splat(0.5 * least),
                side: least,
            };
        }
        if !(g.origin.is_finite() && g.side.is_finite()) {
            return Err(Error::input(format!(
                "the particles span [{lo}, {hi}], farther than float64 arithmetic reaches: \
                 the distances between them cannot be computed"
            )));
        }
        Ok(g)
    }

    /// The cube's centre (length units).
    pub fn centre(&self) -> DVec3 {
        self.origin + DVec3::splat(0.5 * self.side)
    }

    /// The cube around a set of (finite) points.
    pub fn of_points(pos: &[DVec3]) -> Self {
        let (lo, hi) = bounding_box(pos);
        Self::around(lo, hi)
    }

    /// Grid coordinates of a point, clamped into the grid.
    #[inline]
    pub fn cell_of(&self, p: DVec3) -> [u32; 3] {
        let s = GRID as f64 / self.side;
        let q = (p - self.origin) * s;
        let c = |v: f64| (v.max(0.0) as u32).min(GRID - 1);
        [c(q.x), c(q.y), c(q.z)]
    }

    /// Side length of a cell at tree level `level` (root = 0).
    pub fn cell_side(&self, level: u32) -> f64 {
        self.side / (1u64 << level) as f64
    }
}

/// Axis-aligned bounding box `(min, max)` of a set of points, computed in parallel.
pub fn bounding_box(pos: &[DVec3]) -> (DVec3, DVec3) {
    bounds(pos.par_iter().copied())
}

/// Axis-aligned bounding box `(min, max)` of the points a parallel iterator yields.
pub fn bounds(points: impl ParallelIterator<Item = DVec3>) -> (DVec3, DVec3) {
    points
        .fold(
            || (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
            |(lo, hi), p| (lo.min(p), hi.max(p)),
        )
        .reduce(
            || (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
            |a, b| (a.0.min(b.0), a.1.max(b.1)),
        )
}

/// The key of grid cell `c` on the curve `order` (Morton for [`Order::None`], which builds the
/// tree on Morton keys).
#[inline]
pub fn key_of(order: Order, c: [u32; 3]) -> u64 {
    match order {
        Order::Hilbert => hilbert::encode(c[0], c[1], c[2]),
        Order::Morton | Order::None => morton::encode(c[0], c[1], c[2]),
    }
}

/// Grid cell of a key on the curve `order` (inverse of [`key_of`]).
#[inline]
pub fn cell_of_key(order: Order, key: u64) -> [u32; 3] {
    match order {
        Order::Hilbert => hilbert::decode(key),
        Order::Morton | Order::None => morton::decode(key),
    }
}

/// Keys of all points in `grid` on the curve `order`, in parallel (Hilbert keys eight at a
/// time, see [`hilbert::encode_lanes`]).
pub fn keys(order: Order, grid: &GridBox, pos: &[DVec3]) -> Vec<u64> {
    keys_by(order, grid, pos.len(), |i| pos[i])
}

/// Keys of the `n` points `at(0)`, …, `at(n − 1)` in `grid` on the curve `order`, in parallel.
pub fn keys_by(
    order: Order,
    grid: &GridBox,
    n: usize,
    at: impl Fn(usize) -> DVec3 + Sync,
) -> Vec<u64> {
    const L: usize = 8;
    // Written in place (an indexed parallel fill, no concatenation of pieces).
    let mut keys = vec![0u64; n];
    match order {
        Order::Hilbert => {
            keys.par_chunks_mut(L).enumerate().for_each(|(c, out)| {
                let first = c * L;
                let cells: [[u32; 3]; L] =
                    std::array::from_fn(|l| grid.cell_of(at(first + l.min(out.len() - 1))));
                let k = hilbert::encode_lanes(&cells);
                out.copy_from_slice(&k[..out.len()]);
            });
        }
        Order::Morton | Order::None => {
            keys.par_iter_mut()
                .enumerate()
                .for_each(|(i, k)| *k = key_of(order, grid.cell_of(at(i))));
        }
    }
    keys
}

/// The image of `x` in the periodic box [0, `side`)³ (length units): each coordinate modulo
/// the side, a result that rounds up to the side taken as 0.
pub fn wrap_into_box(x: DVec3, side: f64) -> DVec3 {
    let wrap = |v: f64| {
        let w = v.rem_euclid(side);
        if w >= side {
            0.0
        } else {
            w
        }
    };
    DVec3::new(wrap(x.x), wrap(x.y), wrap(x.z))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A widened cube keeps its centre and holds the boxes inside it, not those that reach
    /// its upper faces or beyond.
    #[test]
    fn widened_cubes_hold_what_lies_inside() {
        let g = GridBox::around(DVec3::ZERO, DVec3::ONE);
        let w = g.widened(0.5);
        assert!((w.centre() - g.centre()).length() < 1e-15);
        assert!((w.side - 1.5 * g.side).abs() < 1e-12);
        assert!(w.holds(DVec3::splat(-0.2), DVec3::splat(1.2)));
        assert!(!g.holds(DVec3::splat(-0.2), DVec3::splat(0.5)));
        let top = w.origin + DVec3::splat(w.side);
        assert!(!w.holds(DVec3::ZERO, top));
        assert!(w.holds(w.origin, top - DVec3::splat(1e-9)));
    }

    #[test]
    fn grid_box_contains_points() {
        let pts = vec![DVec3::new(-1.0, 2.0, 0.5), DVec3::new(3.0, -2.0, 0.5)];
        let g = GridBox::of_points(&pts);
        for p in &pts {
            let c = g.cell_of(*p);
            assert!(c.iter().all(|&v| v < GRID));
        }
        assert!(g.side >= 4.0);
        let single = GridBox::of_points(&[DVec3::ONE]);
        assert_eq!(single.side, 1.0);
        assert_eq!(single.cell_of(DVec3::ONE), [GRID / 2; 3]);
    }
}
