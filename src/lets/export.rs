//! Building the LET for one destination: the part of the local tree that the destination's
//! walk would visit (seed 001 Sec. 7.3), found by walking the local tree against the
//! destination's region instead of a particle.
//!
//! A cell accepted for every box of the region is sent as an always-accepted multipole (see
//! [`wire::make_terminal`]); an opened leaf is sent with its particles; an opened inner cell is
//! sent as a cell and its children follow. The boxes are padded by a small relative margin, so
//! that float32 rounding in the receiving walk can never open a cell sent without its contents.

use super::region::{Region, TargetBox};
use super::wire::{self, CELL_WORDS, HEADER_WORDS};
use crate::tree::Tree;
use crate::walk::mac::Criterion;

/// Relative padding of the destination's boxes.
const PAD: f32 = 1e-5;

/// The LET of `tree` for a destination occupying `region`, in the wire format; empty when the
/// region is (the destination has no particles).
pub fn export(tree: &Tree, crit: &Criterion, region: &Region) -> Vec<f32> {
    if region.boxes.is_empty() || tree.cells.is_empty() {
        return Vec::new();
    }
    let pad = |(c, h): &TargetBox| -> TargetBox {
        let scale = h.iter().chain(c.iter()).fold(0.0f32, |m, x| m.max(x.abs()));
        (*c, h.map(|x| x + PAD * scale))
    };
    let bound = pad(&region.bound);
    let boxes: Vec<TargetBox> = region.boxes.iter().map(pad).collect();
    let mut out = vec![0.0; HEADER_WORDS];
    let mut particles: Vec<f32> = Vec::new();
    let mut n_cells = 0usize;
    let mut ctx = Ctx {
        tree,
        crit,
        bound,
        boxes: &boxes,
        amin: region.amin,
        out: &mut out,
        particles: &mut particles,
        n_cells: &mut n_cells,
    };
    ctx.visit(0);
    let np = particles.len() / wire::PARTICLE_WORDS;
    out.extend_from_slice(&particles);
    wire::finish(&mut out, n_cells, np);
    out
}

/// The state of one export walk.
struct Ctx<'a> {
    tree: &'a Tree,
    crit: &'a Criterion,
    bound: TargetBox,
    boxes: &'a [TargetBox],
    amin: f32,
    out: &'a mut Vec<f32>,
    particles: &'a mut Vec<f32>,
    n_cells: &'a mut usize,
}

impl Ctx<'_> {
    /// Exports cell `c` and, when it must be opened, what lies below it.
    fn visit(&mut self, c: usize) {
        let cells = &self.tree.cells;
        let at = self.out.len();
        let first = (self.particles.len() / wire::PARTICLE_WORDS) as u32;
        let me = *self.n_cells;
        *self.n_cells += 1;
        wire::push_cell(self.out, cells, c, first, 0, 1);
        // Accepted for the bound means accepted for every box inside it (the criteria only
        // grow easier with distance); otherwise every box must accept.
        let accepts = |(bc, bh): &TargetBox| self.crit.accepts(cells, c, *bc, *bh, self.amin);
        let accepted = accepts(&self.bound) || self.boxes.iter().all(accepts);
        if accepted {
            wire::make_terminal(self.out, at);
            return;
        }
        if cells.is_leaf(c) {
            let a = cells.first[c] as usize;
            let b = a + cells.count[c] as usize;
            for p in &self.tree.particles[a..b] {
                self.particles.extend_from_slice(p);
            }
            wire::set_count(self.out, at, cells.count[c]);
            return;
        }
        let mut child = c + 1;
        for _ in 0..cells.nchild[c] {
            self.visit(child);
            child += cells.subtree[child] as usize;
        }
        let exported = (*self.n_cells - me) as u32;
        wire::set_subtree(self.out, at, exported);
        let inside = (self.particles.len() / wire::PARTICLE_WORDS) as u32 - first;
        wire::set_count(self.out, at, inside);
        debug_assert_eq!(self.out.len(), HEADER_WORDS + *self.n_cells * CELL_WORDS);
    }
}
