//! The pair of particles that the float32 frame of a job (see [`Frame`]) resolves worst,
//! among those near each other along a tree's curve: float32 keeps a coordinate to 2⁻²⁴ of
//! its magnitude, here its distance m from the frame's centre, so a pair at separation s with
//! softening ε is resolved to about 2⁻²⁴ m / λ of its scale λ = max(s, ε); and near the centre,
//! where that resolution is finer, float32's exponent range bounds the frame instead: the
//! interactions form (L / λ)³ for a cube of side L, which must stay far below float32's 2¹²⁸,
//! so a pair counts as at least [`NEAR`] L from the centre. The pair of the largest
//! max(m, [`NEAR`] L) / λ is the one the frame serves worst (`forces::resolution` decides what
//! to make of it).
//!
//! Neighbours on the curve are neighbours in space (the curve is local down to the level-21
//! key cells, whose particles are consecutive), so every particle compared with the [`WINDOW`]
//! that follow it finds the closest pairs of the set in one pass: exactly where no key cell
//! holds more than [`WINDOW`] + 1 particles, and otherwise pairs closer than a key cell. The
//! device finds the same pair (`closest_pair` in `cuda/build.cu`).

use super::{Cells, MAX_LEVEL};
use crate::sfc::Frame;
use glam::DVec3;
use rayon::prelude::*;

/// How many particles that follow it along the curve each particle is compared with.
pub const WINDOW: usize = 8;

/// The least distance from the frame's centre a pair counts as at, in units of the cube's
/// side: 2⁻¹⁸, so that max(m, NEAR L) / λ ≤ 2²² (the limit of `forces::resolution`) keeps
/// L / λ ≤ 2⁴⁰: the interactions' (L / λ)³ below 2¹²⁰ and their squared separations above
/// float32's smallest normal number.
pub const NEAR: f64 = 1.0 / 262_144.0;

/// Two particles of one rank close to each other.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClosePair {
    /// Their separation (length units), > 0.
    pub s: f64,
    /// Their larger distance m from the frame's centre, in the maximum norm (length units).
    pub m: f64,
    /// Their positions (length units).
    pub at: [DVec3; 2],
    /// Their indices in the rank's particles.
    pub index: [usize; 2],
    /// Their ids, where the rank holds them.
    pub id: Option<[u64; 2]>,
}

impl ClosePair {
    /// How much finer than the frame's resolution at the pair (2⁻²⁴ m) it needs to be
    /// resolved with softening `eps`: m / max(s, ε).
    pub fn range(&self, eps: f64) -> f64 {
        self.m / self.s.max(eps)
    }

    /// The range that decides which pair a frame with a cube of side `side` serves worst
    /// with softening `eps`: max(m, [`NEAR`] L) / max(s, ε).
    pub fn worst(&self, side: f64, eps: f64) -> f64 {
        self.m.max(NEAR * side) / self.s.max(eps)
    }
}

/// What a rank's tree finds of its particles close together: the pair its frame resolves
/// worst ([`closest_pair`]) and its most crowded deepest cell ([`crowded`]), found together so
/// that the device brings both down at once.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Closeness {
    /// The pair its frame resolves worst with the softening; `None` without a tree, or where
    /// all its particles coincide and are softened.
    pub pair: Option<ClosePair>,
    /// The most particles at distinct positions sharing one of its deepest cells; 0 without a
    /// tree.
    pub crowded: u32,
}

/// The order of the pair of sorted slots `k`, `k + j` (1 ≤ j ≤ [`WINDOW`]) with
/// (max(s, ε) / m)² = `q` among all pairs: by the upper 28 bits of `q` (sign, exponent and 16
/// bits of mantissa, monotone for positive doubles), then by `j` and `k`, packed into one word
/// that an atomic minimum can reduce on the device (`pair_key` in `cuda/build.cu`).
pub fn pair_key(q: f64, k: usize, j: usize) -> u64 {
    (q.to_bits() >> 36) << 36 | ((j - 1) as u64) << 32 | k as u64
}

/// The sorted slots `(k, k + j)` of a [`pair_key`].
pub fn pair_slots(key: u64) -> (usize, usize) {
    let k = (key & 0xffff_ffff) as usize;
    (k, k + 1 + ((key >> 32) & 0xf) as usize)
}

/// The distance of `a` from the frame's centre `c` in the maximum norm (the device's
/// `centre_distance` does the same operations).
#[inline]
fn distance(a: DVec3, c: DVec3) -> f64 {
    (a - c).abs().max_element()
}

/// The sorted slots of the pair that `frame` resolves worst with softening `eps`
/// (length units), among the particles at distinct positions `pos` (length units) within
/// [`WINDOW`] of each other in the tree's order `index` (for each sorted slot, its particle):
/// the smallest [`pair_key`]. Without softening (`eps` 0) coincident particles count too (at
/// separation 0, the worst pair of all: their force is infinite). `None` when all particles
/// coincide and are softened (or there are fewer than two).
pub fn closest_pair(
    index: &[u32],
    pos: &[DVec3],
    frame: &Frame,
    eps: f64,
) -> Option<(usize, usize)> {
    const CHUNK: usize = 4096;
    let (n, eps2) = (index.len(), eps * eps);
    (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|chunk| {
            // The chunk's particles and the window after it, gathered once in curve order.
            let first = chunk * CHUNK;
            let x: Vec<DVec3> = index[first..(first + CHUNK + WINDOW).min(n)]
                .iter()
                .map(|&i| pos[i as usize])
                .collect();
            // Each one's distance from the centre, at least NEAR L.
            let near = NEAR * frame.side();
            let m: Vec<f64> = x
                .iter()
                .map(|&a| distance(a, frame.centre).max(near))
                .collect();
            let mut best = u64::MAX;
            for k in 0..CHUNK.min(n - first) {
                for j in 1..=WINDOW.min(x.len() - 1 - k) {
                    let d = x[k + j] - x[k];
                    let s2 = d.x * d.x + d.y * d.y + d.z * d.z;
                    if s2 > 0.0 || eps2 == 0.0 {
                        let mm = m[k].max(m[k + j]);
                        best = best.min(pair_key(s2.max(eps2) / (mm * mm), first + k, j));
                    }
                }
            }
            best
        })
        .min()
        .filter(|&key| key != u64::MAX)
        .map(pair_slots)
}

/// The pair at sorted slots `slots` of the tree's order `index` in `frame`: positions `pos`,
/// ids `id` where the rank holds them.
pub fn pair_at(
    slots: (usize, usize),
    index: &[u32],
    pos: &[DVec3],
    frame: &Frame,
    id: Option<&[u64]>,
) -> ClosePair {
    let [a, b] = [index[slots.0] as usize, index[slots.1] as usize];
    ClosePair::of([pos[a], pos[b]], [a, b], frame, id.map(|id| [id[a], id[b]]))
}

/// The most particles at distinct positions that share one of the tree's deepest cells (a
/// leaf at [`MAX_LEVEL`], side 2⁻²¹ of the cube's): particles the tree cannot separate, whose
/// forces on each other are summed directly, K² interactions for K of them. A far-away
/// particle stretches the cube until the bulk of the set fits in a few such cells, and the walk
/// turns into a direct summation. A leaf counts when its first and last particles in the
/// tree's order `index` (positions `pos`, length units) lie apart, so that coincident particles
/// (which one cell rightly holds) do not. 0 where no deepest leaf holds distinct particles. The
/// device counts the same (`crowded_leaves` in `cuda/build.cu`).
pub fn crowded(cells: &Cells, index: &[u32], pos: &[DVec3]) -> u32 {
    (0..cells.len())
        .into_par_iter()
        .filter(|&c| cells.nchild[c] == 0 && cells.level[c] == MAX_LEVEL && cells.count[c] > 1)
        .filter(|&c| {
            let first = cells.first[c] as usize;
            let last = first + cells.count[c] as usize - 1;
            pos[index[first] as usize] != pos[index[last] as usize]
        })
        .map(|c| cells.count[c])
        .max()
        .unwrap_or(0)
}

impl ClosePair {
    /// The pair of particles `index` at `at` (length units) with ids `id`, in `frame`.
    pub fn of(at: [DVec3; 2], index: [usize; 2], frame: &Frame, id: Option<[u64; 2]>) -> Self {
        Self {
            s: (at[1] - at[0]).length(),
            m: distance(at[0], frame.centre).max(distance(at[1], frame.centre)),
            at,
            index,
            id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_resolved_pair_is_the_closest_farthest_from_the_centre() {
        let pos = [
            DVec3::ZERO,
            DVec3::ZERO,
            DVec3::new(1e-9, 0.0, 0.0),
            DVec3::new(1.0, 0.0, 0.0),
            DVec3::new(1.0, 1e-8, 0.0),
        ];
        let frame = Frame {
            cube: crate::sfc::GridBox::around(DVec3::splat(-1.0), DVec3::splat(1.0)),
            centre: DVec3::ZERO,
            periodic: false,
        };
        // The worst pair two slots apart, with a third particle between them: 1e-8 apart at
        // 1 from the centre is worse resolved than 1e-9 apart at 1e-9.
        let index = [3, 0, 4, 1, 2];
        let slots = closest_pair(&index, &pos, &frame, 1e-12).unwrap();
        assert_eq!(slots, (0, 2));
        // Without softening the coincident pair is the worst of all.
        assert_eq!(closest_pair(&index, &pos, &frame, 0.0), Some((1, 3)));
        let pair = pair_at(slots, &index, &pos, &frame, Some(&[10, 11, 12, 13, 14]));
        assert_eq!(pair.index, [3, 4]);
        assert_eq!(pair.id, Some([13, 14]));
        assert_eq!((pair.s, pair.m), (1e-8, 1.0));
        assert_eq!(pair.range(0.0), 1e8);
        assert_eq!(pair.range(1e-4), 1e4);
        assert_eq!(pair_slots(pair_key(0.5, 7, WINDOW)), (7, 7 + WINDOW));
        assert_eq!(closest_pair(&[0, 1], &[DVec3::ONE; 2], &frame, 1e-12), None);
        assert_eq!(
            closest_pair(&[0, 1], &[DVec3::ONE; 2], &frame, 0.0),
            Some((0, 1))
        );
        assert_eq!(closest_pair(&[0], &[DVec3::ONE], &frame, 0.0), None);
    }

    #[test]
    fn a_far_particle_crowds_the_bulk_into_the_deepest_cells() {
        use crate::diag::PhaseTimes;
        use crate::ics::{generate, Model};
        use crate::tree::{Tree, TreeParams};
        let params = TreeParams {
            order: crate::sfc::Order::Hilbert,
            ncrit: 8,
            mac: crate::walk::mac::Mac::Modified,
            theta: 0.5,
        };
        let build = |pos: &[DVec3], mass: &[f64]| {
            let t = Tree::build(pos, mass, &params, &mut PhaseTimes::default());
            crowded(&t.cells, &t.index, pos)
        };
        // A Plummer sphere alone: no deepest cell holds distinct particles.
        let p = generate(Model::Plummer, 2000, 1).unwrap();
        assert_eq!(build(&p.pos, &p.mass), 0);
        // With a particle 1e8 away the deepest cells are 48 wide: the sphere's core shares one.
        let (mut pos, mut mass) = (p.pos.clone(), p.mass.clone());
        pos.push(DVec3::new(1e8, 0.0, 0.0));
        mass.push(mass[0]);
        let k = build(&pos, &mass);
        assert!(k > 1000, "{k}");
        // Coincident particles share a deepest cell rightly: not counted.
        let one_point = vec![DVec3::new(0.3, 0.2, 0.1); 500];
        let with_outlier = [one_point, vec![DVec3::ONE]].concat();
        assert_eq!(build(&with_outlier, &vec![1.0; 501]), 0);
    }
}
