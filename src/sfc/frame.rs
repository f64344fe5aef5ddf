//! The float32 frame of a job: the trees, targets, LETs and regions of every rank hold their
//! positions as `(x − c) / L`, L the side of the cube around all particles (the trees' key
//! cube) and c a centre in the bulk of the particles, computed in float64 and rounded once to
//! float32, and lengths in units of L. Float32 keeps a coordinate to 2⁻²⁴ of its magnitude, so
//! particles near c keep nearly float64's resolution of their separations, whatever a common
//! offset of them all (c moves with them) and however far a few outliers stretch the cube
//! (they do not move c).
//!
//! c is the particle of a sample that lies nearest the sample's per-axis median
//! ([`centre_of`]): a point in the densest part of the set.

use super::GridBox;
use glam::DVec3;

/// Positions of the particles every rank contributes to the choice of a frame's centre.
pub const CENTRE_SAMPLES: usize = 256;

/// A job's float32 frame: its cube and its centre.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    /// The cube around all particles, the trees' key cube (length units).
    pub cube: GridBox,
    /// The frame's centre c, a point of the cube (length units).
    pub centre: DVec3,
    /// Whether the cube is a periodic box centred at c: every position is then taken to its
    /// image within half a side of c (frame coordinates in [−½, ½), [`Frame::to_frame`]).
    pub periodic: bool,
}

impl Frame {
    /// The frame of a set of (finite) points: their cube ([`GridBox::of_points`]), centred
    /// by a sample of them.
    pub fn of_points(pos: &[DVec3]) -> Self {
        Self {
            cube: GridBox::of_points(pos),
            centre: centre_of(&strided(pos, CENTRE_SAMPLES)),
            periodic: false,
        }
    }

    /// The frame of a periodic box of side `side` (length units) centred at `centre`: its
    /// cube is the box moved to [c − L/2, c + L/2)³, which holds one image of every point.
    pub fn periodic_box(side: f64, centre: DVec3) -> Self {
        Self {
            cube: GridBox {
                origin: centre - DVec3::splat(0.5 * side),
                side,
            },
            centre,
            periodic: true,
        }
    }

    /// The side L of the cube (length units), the frame's unit of length.
    pub fn side(&self) -> f64 {
        self.cube.side
    }

    /// A point in the frame: `r = (p − c) / L` computed in float64, in a periodic frame
    /// folded to `r − ⌊r + ½⌋` (its image nearest c), and rounded to float32 (the GPU's
    /// `frame_coord` does the same operations).
    #[inline]
    pub fn to_frame(&self, p: DVec3) -> [f32; 3] {
        let (c, s) = (self.centre, 1.0 / self.cube.side);
        let fold = |r: f64| match self.periodic {
            true => (r - (r + 0.5).floor()) as f32,
            false => r as f32,
        };
        [
            fold((p.x - c.x) * s),
            fold((p.y - c.y) * s),
            fold((p.z - c.z) * s),
        ]
    }

    /// The cube in the frame, where a tree's keys are computed from its frame positions: side
    /// 1, its lower corner at (origin − c) / L.
    pub fn key_grid(&self) -> GridBox {
        GridBox {
            origin: (self.cube.origin - self.centre) * (1.0 / self.cube.side),
            side: 1.0,
        }
    }
}

/// `count` of `points` at even strides (all of them where there are fewer): every
/// ⌈n / count⌉-th from the first (the device's `sample_positions` takes the same).
pub fn strided(points: &[DVec3], count: usize) -> Vec<DVec3> {
    let stride = points.len().div_ceil(count.max(1)).max(1);
    points.iter().step_by(stride).copied().collect()
}

/// A point in the densest part of the sample `points` (non-empty): the one nearest, in the
/// maximum norm, the per-axis lower median of them all (first of equals in order).
pub fn centre_of(points: &[DVec3]) -> DVec3 {
    let median = |k: usize| {
        let mut v: Vec<f64> = points.iter().map(|p| p[k]).collect();
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    let m = DVec3::new(median(0), median(1), median(2));
    let distance = |p: &DVec3| (*p - m).abs().max_element();
    *points
        .iter()
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))
        .expect("a sample of at least one point")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_centre_stays_in_the_bulk_and_moves_with_it() {
        // A cluster and a few outliers far away: the centre is a point of the cluster.
        let mut pos: Vec<DVec3> = (0..100)
            .map(|i| DVec3::new((i as f64 * 0.37).sin(), (i as f64).cos(), 0.01 * i as f64))
            .collect();
        pos.extend([DVec3::splat(1e20), DVec3::new(-1e15, 3.0, 0.0)]);
        let f = Frame::of_points(&pos);
        assert!(pos[..100].contains(&f.centre), "{:?}", f.centre);
        // A common offset moves the centre with the particles.
        let shifted: Vec<DVec3> = pos.iter().map(|x| *x + DVec3::splat(1e6)).collect();
        let g = Frame::of_points(&shifted);
        assert_eq!(g.centre, f.centre + DVec3::splat(1e6));
        // The key grid holds the cube's points.
        let k = f.key_grid();
        for x in &pos {
            let r = DVec3::from_array(f.to_frame(*x).map(f64::from));
            assert!(r.cmpge(k.origin - 1e-6).all() && r.cmple(k.origin + 1.0 + 1e-6).all());
        }
        assert_eq!(centre_of(&[DVec3::ONE]), DVec3::ONE);
    }
}
