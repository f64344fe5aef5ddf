//! Where a rank's particles are, as the other ranks see it: a set of tight boxes around them
//! and their smallest previous acceleration (for the acceleration criterion).
//!
//! The boxes are the particle bounding boxes of the rank's own tree cut where cells hold at
//! most `n / pieces` particles, so a sparse halo is described by small boxes around its few
//! particles rather than by one box spanning it (seed 001's single bounding box makes every
//! remote cell near any part of that box count as near, and the LETs grow with it).

use crate::tree::Tree;

/// An axis-aligned box: centre and half-extents (length units).
pub type TargetBox = ([f32; 3], [f32; 3]);

/// Boxes of a region per group: a LET export tests a cell against a group's bound before its
/// boxes, as against the region's bound before its groups.
pub const GROUP_BOXES: usize = 8;

/// The region a rank's particles occupy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    /// The smallest previous acceleration magnitude |a_old| of the rank's particles (G
    /// included; 0 before the first evaluation).
    pub amin: f32,
    /// One box around all particles (unused for a rank without particles).
    pub bound: TargetBox,
    /// One box around each [`GROUP_BOXES`] boxes in a row (the last group around the rest),
    /// each inside `bound`.
    pub groups: Vec<TargetBox>,
    /// Boxes that together contain every particle of the rank (none for a rank without
    /// particles), each inside its group's box.
    pub boxes: Vec<TargetBox>,
}

/// Words per box in the allgathered encoding (centre, half-extents).
const BOX_WORDS: usize = 6;

impl Region {
    /// The region of the particles of `tree`: the tight boxes of its cells cut at
    /// `n / pieces` particles (one box for `pieces = 1`: seed 001's bounding box), with `amin`
    /// the smallest previous acceleration of its particles.
    pub fn of_tree(tree: &Tree, amin: f32, pieces: usize) -> Self {
        let cells = &tree.cells;
        let cut = (tree.particles.len() / pieces.max(1)).max(1) as u32;
        let mut boxes = Vec::new();
        let mut c = 0;
        while c < cells.len() {
            if cells.count[c] <= cut || cells.is_leaf(c) {
                let a = cells.first[c] as usize;
                boxes.push(tight_box(&tree.particles[a..a + cells.count[c] as usize]));
                c += cells.subtree[c] as usize;
            } else {
                c += 1;
            }
        }
        Self::from_boxes(amin, boxes)
    }

    /// The region made of `boxes` (its bound and its groups' computed around them).
    pub fn from_boxes(amin: f32, boxes: Vec<TargetBox>) -> Self {
        Self {
            amin,
            bound: bound_of(&boxes),
            groups: boxes.chunks(GROUP_BOXES).map(bound_of).collect(),
            boxes,
        }
    }

    /// The encoding for an allgatherv: `amin`, the number of boxes, then the boxes, so that
    /// the regions of all ranks, concatenated, can be read one after the other.
    pub fn encode(&self) -> Vec<f64> {
        let mut v = Vec::with_capacity(2 + self.boxes.len() * BOX_WORDS);
        v.push(self.amin as f64);
        v.push(self.boxes.len() as f64);
        for (c, h) in &self.boxes {
            v.extend(c.iter().chain(h).map(|&x| x as f64));
        }
        v
    }

    /// The region that [`Region::encode`] wrote at the start of `words`, and the words it
    /// took; `None` where `words` does not start with one.
    pub fn decode(words: &[f64]) -> Option<(Self, usize)> {
        let (&amin, &n) = (words.first()?, words.get(1)?);
        // A count that is no whole number of boxes within the words is no region (and never
        // an overflow: the words bound it).
        let boxes =
            (n >= 0.0 && n.fract() == 0.0 && n <= words.len() as f64).then_some(n as usize)?;
        let len = Some(2 + boxes * BOX_WORDS).filter(|&len| len <= words.len())?;
        let boxes = words[2..len]
            .chunks_exact(BOX_WORDS)
            .map(|b| {
                (
                    [b[0] as f32, b[1] as f32, b[2] as f32],
                    [b[3] as f32, b[4] as f32, b[5] as f32],
                )
            })
            .collect();
        Some((Self::from_boxes(amin as f32, boxes), len))
    }
}

/// The box around `boxes`.
fn bound_of(boxes: &[TargetBox]) -> TargetBox {
    spanning(boxes.iter().map(|(c, h)| {
        (
            [0, 1, 2].map(|k| c[k] - h[k]),
            [0, 1, 2].map(|k| c[k] + h[k]),
        )
    }))
}

/// The bounding box of `particles` (x, y, z, m).
fn tight_box(particles: &[[f32; 4]]) -> TargetBox {
    spanning(
        particles
            .iter()
            .map(|p| ([p[0], p[1], p[2]], [p[0], p[1], p[2]])),
    )
}

/// The box from the lowest to the highest of `corners` (each a lower and an upper corner).
fn spanning(corners: impl Iterator<Item = ([f32; 3], [f32; 3])>) -> TargetBox {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for (l, h) in corners {
        for k in 0..3 {
            lo[k] = lo[k].min(l[k]);
            hi[k] = hi[k].max(h[k]);
        }
    }
    (
        [0, 1, 2].map(|k| 0.5 * (lo[k] + hi[k])),
        [0, 1, 2].map(|k| 0.5 * (hi[k] - lo[k])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::{generate, Model};
    use crate::sfc::Order;
    use crate::tree::TreeParams;
    use crate::walk::mac::Mac;

    #[test]
    fn boxes_cover_every_particle_and_survive_the_encoding() {
        let p = generate(Model::Plummer, 5000, 4).unwrap();
        let tp = TreeParams {
            order: Order::Hilbert,
            ncrit: 8,
            mac: Mac::Modified,
            theta: 0.5,
        };
        let tree = Tree::build(&p.pos, &p.mass, &tp, &mut Default::default());
        for pieces in [1, 16, 256] {
            let r = Region::of_tree(&tree, 0.5, pieces);
            assert!(
                r.boxes.len() >= pieces.min(100),
                "{pieces}: {}",
                r.boxes.len()
            );
            let inside = |b: &TargetBox, x: &[f32; 4]| {
                (0..3).all(|k| (x[k] - b.0[k]).abs() <= b.1[k] * 1.0001 + 1e-6)
            };
            for x in &tree.particles {
                assert!(r.boxes.iter().any(|b| inside(b, x)));
                assert!(inside(&r.bound, x));
            }
            // Each group's box holds its boxes, the bound every group's box.
            let holds = |outer: &TargetBox, b: &TargetBox| {
                [-1.0, 1.0].iter().all(|&s| {
                    let corner = [0, 1, 2].map(|k| b.0[k] + s * b.1[k]);
                    inside(outer, &[corner[0], corner[1], corner[2], 0.0])
                })
            };
            assert_eq!(r.groups.len(), r.boxes.len().div_ceil(GROUP_BOXES));
            for (g, boxes) in r.groups.iter().zip(r.boxes.chunks(GROUP_BOXES)) {
                assert!(boxes.iter().all(|b| holds(g, b)), "{pieces} pieces");
                assert!(holds(&r.bound, g), "{pieces} pieces");
            }
            let words = r.encode();
            assert_eq!(Region::decode(&words), Some((r, words.len())));
        }
        assert_eq!(Region::of_tree(&tree, 0.0, 1).boxes.len(), 1);
        let (empty, len) = Region::decode(&Region::default().encode()).unwrap();
        assert!(empty.boxes.is_empty() && len == 2);
        // Words that do not hold a whole region are none.
        assert_eq!(Region::decode(&[0.0, 1.0, 0.0]), None);
        assert_eq!(Region::decode(&[0.0]), None);
        assert_eq!(Region::decode(&[0.0, 1e300, 0.0]), None);
    }
}
