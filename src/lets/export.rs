//! Building the LET for one destination: the part of the local tree that the destination's
//! walk would visit (seed 001 Sec. 7.3), found by walking the local tree against the
//! destination's region instead of a particle.
//!
//! A cell accepted for every box of the region is sent as an always-accepted multipole (see
//! [`wire::make_terminal`]); an opened leaf is sent with its particles; an opened inner cell is
//! sent as a cell and its children follow. The boxes are padded by a small relative margin, so
//! that float32 rounding in the receiving walk can never open a cell sent without its contents.
//! Subtrees of more than [`PARALLEL_COUNT`] particles export their children in parallel (rayon)
//! and splice the pieces together, so one destination's LET uses every core.

use super::region::{Region, TargetBox, GROUP_BOXES};
use super::wire::{self, CELL_WORDS, HEADER_WORDS, PARTICLE_WORDS};
use crate::tree::Tree;
use crate::walk::mac::Criterion;
use rayon::prelude::*;

/// Relative padding of the destination's boxes.
const PAD: f32 = 1e-5;

/// Cells with more particles than this export their children in parallel.
const PARALLEL_COUNT: u32 = 1 << 16;

/// A destination's box `(c, h)` padded by [`PAD`] relative to its largest coordinate or
/// half-extent, as the export tests it.
pub(super) fn padded((c, h): &TargetBox) -> TargetBox {
    let scale = h.iter().chain(c.iter()).fold(0.0f32, |m, x| m.max(x.abs()));
    (*c, h.map(|x| x + PAD * scale))
}

/// The LET of `tree` (its cells' key cells `keys`) for a destination occupying `region`, in the
/// wire format; empty when the region is (the destination has no particles). `periodic`: the
/// frame is a periodic box of side 1, and a cell is tested against the nearest image of each
/// box ([`Criterion::accepts_periodic`]).
pub fn export(
    tree: &Tree,
    keys: &[u64],
    crit: &Criterion,
    periodic: bool,
    region: &Region,
) -> Vec<f32> {
    export_splitting_above(tree, keys, crit, periodic, region, PARALLEL_COUNT)
}

/// [`export`], exporting the children of cells of more than `parallel_count` particles in
/// parallel (the result does not depend on it).
fn export_splitting_above(
    tree: &Tree,
    keys: &[u64],
    crit: &Criterion,
    periodic: bool,
    region: &Region,
    parallel_count: u32,
) -> Vec<f32> {
    if region.boxes.is_empty() || tree.cells.is_empty() {
        return Vec::new();
    }
    let ctx = Ctx {
        tree,
        keys,
        crit,
        periodic,
        bound: padded(&region.bound),
        groups: region.groups.iter().map(padded).collect(),
        boxes: region.boxes.iter().map(padded).collect(),
        amin: region.amin,
        parallel_count,
    };
    let mut piece = Piece::default();
    ctx.visit(0, &mut piece);
    let n_cells = piece.cells.len() / CELL_WORDS;
    let n_particles = piece.particles.len() / PARTICLE_WORDS;
    let mut out = Vec::with_capacity(HEADER_WORDS + piece.cells.len() + piece.particles.len());
    out.extend_from_slice(&[0.0; HEADER_WORDS]);
    out.extend_from_slice(&piece.cells);
    out.extend_from_slice(&piece.particles);
    wire::finish(&mut out, n_cells, n_particles);
    out
}

/// A contiguous part of a LET: cell records in preorder and the particles they own, with
/// `first` relative to this piece's particles.
#[derive(Default)]
struct Piece {
    cells: Vec<f32>,
    particles: Vec<f32>,
}

impl Piece {
    /// Appends `other`, shifting its cells' particle offsets past this piece's particles.
    fn append(&mut self, other: Piece) {
        let shift = (self.particles.len() / PARTICLE_WORDS) as u32;
        let at = self.cells.len();
        self.cells.extend_from_slice(&other.cells);
        if shift > 0 {
            for rec in self.cells[at..].chunks_exact_mut(CELL_WORDS) {
                wire::shift_first(rec, shift);
            }
        }
        self.particles.extend_from_slice(&other.particles);
    }
}

/// What one export walk reads.
struct Ctx<'a> {
    tree: &'a Tree,
    keys: &'a [u64],
    crit: &'a Criterion,
    periodic: bool,
    bound: TargetBox,
    groups: Vec<TargetBox>,
    boxes: Vec<TargetBox>,
    amin: f32,
    parallel_count: u32,
}

impl Ctx<'_> {
    /// Exports cell `c` and, when it must be opened, what lies below it, onto `piece`.
    fn visit(&self, c: usize, piece: &mut Piece) {
        let cells = &self.tree.cells;
        let at = piece.cells.len();
        let first = (piece.particles.len() / PARTICLE_WORDS) as u32;
        wire::push_cell(&mut piece.cells, cells, c, self.keys[c], [first, 0, 1]);
        // Accepted for a bound means accepted for every box inside it (the criteria only
        // grow easier with distance); otherwise every group must accept, by its bound or by
        // each of its boxes.
        let accepts = |(bc, bh): &TargetBox| match self.periodic {
            true => self.crit.accepts_periodic(cells, c, *bc, *bh, self.amin),
            false => self.crit.accepts(cells, c, *bc, *bh, self.amin),
        };
        let mut groups = self.groups.iter().zip(self.boxes.chunks(GROUP_BOXES));
        if accepts(&self.bound) || groups.all(|(g, b)| accepts(g) || b.iter().all(accepts)) {
            wire::make_terminal(&mut piece.cells, at);
            return;
        }
        if cells.is_leaf(c) {
            let a = cells.first[c] as usize;
            let b = a + cells.count[c] as usize;
            for p in &self.tree.particles[a..b] {
                piece.particles.extend_from_slice(p);
            }
            wire::set_count(&mut piece.cells, at, cells.count[c]);
            return;
        }
        let mut children = Vec::with_capacity(cells.nchild[c] as usize);
        let mut child = c + 1;
        for _ in 0..cells.nchild[c] {
            children.push(child);
            child += cells.subtree[child] as usize;
        }
        if cells.count[c] > self.parallel_count {
            let pieces: Vec<Piece> = children
                .par_iter()
                .map(|&k| {
                    let mut p = Piece::default();
                    self.visit(k, &mut p);
                    p
                })
                .collect();
            // The pieces' offsets are relative to their own particles: splice them after ours.
            let mut below = Piece::default();
            for p in pieces {
                below.append(p);
            }
            piece.append(below);
        } else {
            for k in children {
                self.visit(k, piece);
            }
        }
        let exported = ((piece.cells.len() - at) / CELL_WORDS) as u32;
        wire::set_subtree(&mut piece.cells, at, exported);
        let inside = (piece.particles.len() / PARTICLE_WORDS) as u32 - first;
        wire::set_count(&mut piece.cells, at, inside);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forces::ForceParams;
    use crate::ics::{generate, Model};
    use crate::sfc::Order;
    use crate::tree::TreeParams;

    #[test]
    fn parallel_export_equals_the_sequential_one() {
        let p = generate(Model::Nfw, 20_000, 9).unwrap();
        let (a, b): (Vec<usize>, Vec<usize>) = (0..p.len()).partition(|&i| p.pos[i].x < 0.05);
        // Both "ranks" build in the frame of all particles, as a job's do.
        let frame = crate::sfc::Frame::of_points(&p.pos);
        let build = |ix: &[usize]| {
            let pos: Vec<_> = ix.iter().map(|&i| p.pos[i]).collect();
            let mass: Vec<_> = ix.iter().map(|&i| p.mass[i]).collect();
            let tp = TreeParams {
                order: Order::Hilbert,
                ncrit: 8,
                mac: crate::walk::mac::Mac::Modified,
                theta: 0.6,
            };
            Tree::build_in(&frame, &pos, &mass, &tp, &mut Default::default())
        };
        let (src, dst) = (build(&a), build(&b));
        let crit = ForceParams::default().walk_params(frame.side()).criterion;
        let region = Region::of_tree(&dst, 0.0, 16);
        let keys = crate::tree::key::key_cells(&src.cells.boxes, &src.cells.level);
        let serial = export_splitting_above(&src, &keys, &crit, false, &region, u32::MAX);
        let parallel = export_splitting_above(&src, &keys, &crit, false, &region, 1);
        assert!(serial.len() > 1000);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&serial), bits(&parallel));
    }
}
