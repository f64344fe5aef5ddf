//! Refit: the tree of the last rebuild kept (its particle order `index` and its cells) and only
//! its geometry, moments and S_eff recomputed for the particles' current positions, which is
//! much cheaper than a rebuild (no keys, no sort, no topology).
//!
//! After the particles have drifted a cell's particles may have left the key cell it was built
//! as, so every cell's box becomes a cube that contains all of its particles: the box of the
//! last rebuild while the particles are still inside it (a refit of particles that did not move
//! is then the rebuild's tree, bit for bit), else the bounding cube of that box and the
//! particles (centre of their common bounding box, half side = its largest half-extent, rounded
//! up). Boxes only grow between rebuilds, so a refitted cell is never opened less carefully
//! than the rebuild's; nothing reads a box as a key cell (the walks, the LET export and the
//! GPU kernel only need a cube around the cell's particles, see `walk::mac`).

use super::moments::{
    cell_particles, combine, leaf_moment, store_moments, update_s_eff, upward, Moment,
};
use super::{Tree, TreeParams};
use glam::DVec3;
use rayon::prelude::*;

/// The axis-aligned bounding box of a cell's particles (float32, exact minima and maxima).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    lo: [f32; 3],
    hi: [f32; 3],
}

impl Default for Bounds {
    /// The empty box.
    fn default() -> Self {
        Self {
            lo: [f32::INFINITY; 3],
            hi: [f32::NEG_INFINITY; 3],
        }
    }
}

impl Bounds {
    fn of(particles: &[[f32; 4]]) -> Self {
        particles.iter().fold(Self::default(), |b, p| {
            let x = [p[0], p[1], p[2]];
            b.union(&Bounds { lo: x, hi: x })
        })
    }

    fn union(self, other: &Bounds) -> Self {
        Self {
            lo: [0, 1, 2].map(|k| self.lo[k].min(other.lo[k])),
            hi: [0, 1, 2].map(|k| self.hi[k].max(other.hi[k])),
        }
    }
}

/// The smallest float32 value ≥ `x`, for `x` ≥ 0.
fn round_up(x: f64) -> f32 {
    let f = x as f32;
    if (f as f64) < x {
        // The next float32 up: for non-negative floats, the next bit pattern.
        f32::from_bits(f.to_bits() + 1)
    } else {
        f
    }
}

/// The cube of a refitted cell: `built` (centre, half side) when it holds the particles of
/// `b`, else the bounding cube of `built` and `b`, which contains every point of both.
fn cube(built: [f32; 4], b: &Bounds) -> [f32; 4] {
    let h = built[3] as f64;
    let lo = |k: usize| built[k] as f64 - h;
    let hi = |k: usize| built[k] as f64 + h;
    if (0..3).all(|k| b.lo[k] as f64 >= lo(k) && b.hi[k] as f64 <= hi(k)) {
        return built;
    }
    let lo = [0, 1, 2].map(|k| lo(k).min(b.lo[k] as f64));
    let hi = [0, 1, 2].map(|k| hi(k).max(b.hi[k] as f64));
    bounding_cube(lo, hi)
}

/// The float32 cube (centre, half side) that holds the box from `lo` to `hi`: its centre
/// rounded to float32 and its half side measured from that centre, so that |centre − x| ≤
/// half for every x inside, rounded up.
pub(crate) fn bounding_cube(lo: [f64; 3], hi: [f64; 3]) -> [f32; 4] {
    let centre = [0, 1, 2].map(|k| (0.5 * (lo[k] + hi[k])) as f32);
    let half = (0..3)
        .map(|k| (hi[k] - centre[k] as f64).max(centre[k] as f64 - lo[k]))
        .fold(0.0, f64::max);
    [centre[0], centre[1], centre[2], round_up(half)]
}

impl Tree {
    /// Refits this tree to the particles at `pos` (length units) with masses `mass`, in the
    /// same input order as when it was built: gathers them in the tree's order (in the frame
    /// of its build), then
    /// recomputes every cell's box (see the module documentation; `built` holds the boxes of
    /// the last rebuild, one per cell), moments and S_eff (for `params.mac` and
    /// `params.theta`), in parallel. `pos.len()` must equal the tree's particle count.
    pub fn refit(&mut self, pos: &[DVec3], mass: &[f64], built: &[[f32; 4]], params: &TreeParams) {
        debug_assert_eq!(pos.len(), self.index.len());
        debug_assert_eq!(built.len(), self.cells.len());
        self.particles = self
            .index
            .par_iter()
            .map(|&i| {
                let [x, y, z] = self.frame.to_frame(pos[i as usize]);
                [x, y, z, mass[i as usize] as f32]
            })
            .collect();
        let (cells, particles) = (&self.cells, &self.particles);
        let both: Vec<(Moment, Bounds)> = upward(
            cells,
            |c| {
                let mine = cell_particles(cells, particles, c);
                (leaf_moment(mine), Bounds::of(mine))
            },
            |kids| {
                let mut moments = [Moment::default(); 8];
                for (m, k) in moments.iter_mut().zip(kids) {
                    *m = k.0;
                }
                let bounds = kids.iter().fold(Bounds::default(), |b, k| b.union(&k.1));
                (combine(&moments[..kids.len()]), bounds)
            },
        );
        self.cells.boxes = both
            .par_iter()
            .zip(built)
            .map(|((_, b), &bx)| cube(bx, b))
            .collect();
        let moments: Vec<Moment> = both.into_par_iter().map(|(m, _)| m).collect();
        store_moments(&mut self.cells, &moments);
        update_s_eff(&mut self.cells, params.mac, params.theta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::PhaseTimes;
    use crate::ics::{generate, Model};
    use crate::sfc::Order;
    use crate::walk::mac::Mac;

    fn params() -> TreeParams {
        TreeParams {
            order: Order::Hilbert,
            ncrit: 8,
            mac: Mac::Modified,
            theta: 0.5,
        }
    }

    #[test]
    fn a_refit_of_unmoved_particles_is_the_rebuild_bit_for_bit() {
        let p = generate(Model::Plummer, 20_000, 3).unwrap();
        let tree = Tree::build(&p.pos, &p.mass, &params(), &mut PhaseTimes::default());
        let mut refit = tree.clone();
        refit.refit(&p.pos, &p.mass, &tree.cells.boxes, &params());
        let bits = |v: &[[f32; 4]]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&refit.particles), bits(&tree.particles));
        assert_eq!(bits(&refit.cells.boxes), bits(&tree.cells.boxes));
        assert_eq!(bits(&refit.cells.com_mass), bits(&tree.cells.com_mass));
        assert_eq!(refit.cells.quad, tree.cells.quad);
        assert_eq!(refit.cells.s_eff, tree.cells.s_eff);
    }

    #[test]
    fn refitted_boxes_contain_their_particles_after_a_drift() {
        let mut p = generate(Model::Plummer, 20_000, 5).unwrap();
        let tree = Tree::build(&p.pos, &p.mass, &params(), &mut PhaseTimes::default());
        // A drift of a tenth of a crossing time moves most particles out of their leaves.
        for (x, v) in p.pos.iter_mut().zip(&p.vel) {
            *x += *v * 0.3;
        }
        let mut t = tree.clone();
        t.refit(&p.pos, &p.mass, &tree.cells.boxes, &params());
        let cells = &t.cells;
        let mut grown = 0;
        for c in 0..cells.len() {
            let [cx, cy, cz, h] = cells.boxes[c];
            // The walk's own test, in float32: the box overlaps each of its particles.
            for x in cell_particles(cells, &t.particles, c) {
                assert!(
                    (cx - x[0]).abs() <= h && (cy - x[1]).abs() <= h && (cz - x[2]).abs() <= h,
                    "cell {c}: particle {x:?} outside box {:?}",
                    cells.boxes[c]
                );
            }
            let m: f64 = cell_particles(cells, &t.particles, c)
                .iter()
                .map(|x| x[3] as f64)
                .sum();
            assert!((cells.com_mass[c][3] as f64 - m).abs() <= 1e-5 * m);
            assert!(h >= tree.cells.boxes[c][3]);
            grown += (h > tree.cells.boxes[c][3]) as usize;
        }
        assert!(grown > cells.len() / 2, "{grown} of {} grew", cells.len());
        // The particles are the drifted ones, in the tree's order.
        for (k, &i) in t.index.iter().enumerate() {
            assert_eq!(t.particles[k][..3], t.frame.to_frame(p.pos[i as usize]));
        }
    }

    #[test]
    fn cubes_round_outwards() {
        let b = Bounds {
            lo: [0.1, -3.3, 1e-7],
            hi: [0.7, 2.9, 1e7],
        };
        let c = cube([0.0, 0.0, 0.0, 0.0], &b);
        for k in 0..3 {
            assert!((c[k] - b.lo[k]).abs() <= c[3] && (c[k] - b.hi[k]).abs() <= c[3]);
        }
        let inside = [0.5, -0.5, 0.5, 10.0];
        let small = Bounds {
            hi: [0.7, 2.9, 1.0],
            ..b
        };
        assert_eq!(cube(inside, &small), inside);
    }
}
