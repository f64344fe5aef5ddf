//! The flat node arrays of seed 004 (appendix A) with stackless `next`/`more` threading.
//!
//! Nodes `0..n` are the sorted particles, nodes `n..n + cells` the cells in depth-first preorder
//! (root at `n`). `size` holds ε² for particles and S_eff for cells. `more` of a cell is its first
//! child (first child cell, or for a leaf its first particle); `next` of any node is the node
//! visited when it is accepted (or, for a particle, done): the following sibling or, for the last
//! child, the parent's `next`; −1 ends the walk. This is the format the GPU kernels read.

use super::Tree;
use rayon::prelude::*;

/// Node arrays of one tree in the walk format of seed 004.
#[derive(Clone, Debug, Default)]
pub struct FlatTree {
    /// Number of particle nodes (they come first).
    pub n_particles: usize,
    /// Position (length units) and mass (mass units) per node; centre of mass for cells.
    pub pos_mass: Vec<[f32; 4]>,
    /// ε² for particles, S_eff for cells (length²).
    pub size: Vec<f32>,
    /// Node to visit after this one is accepted or done; −1 at the end.
    pub next: Vec<i32>,
    /// First child of a cell; −1 for particles.
    pub more: Vec<i32>,
    /// Quadrupole per cell (indexed by node − n_particles), as in [`super::Cells::quad`].
    pub quad: Vec<[f32; 6]>,
}

impl FlatTree {
    /// Threads `tree` into flat node arrays with softening `eps` (length units), in parallel.
    ///
    /// In depth-first preorder the cell after `c`'s subtree, `c + subtree[c]`, is exactly the
    /// node a walk goes to when it accepts `c` (the next sibling, or an ancestor's), so every
    /// `next` is known locally; a leaf's last particle continues where the leaf would.
    pub fn from_tree(tree: &Tree, eps: f32) -> Self {
        let n = tree.particles.len();
        let cells = &tree.cells;
        let nc = cells.len();
        let cell_next = |c: usize| {
            let after = c + cells.subtree[c] as usize;
            if after < nc {
                (n + after) as i32
            } else {
                -1
            }
        };
        let mut next: Vec<i32> = (0..n as i32).into_par_iter().map(|p| p + 1).collect();
        // The last particle of each leaf continues with the leaf's next.
        let ends: Vec<(usize, i32)> = (0..nc)
            .into_par_iter()
            .filter(|&c| cells.is_leaf(c) && cells.count[c] > 0)
            .map(|c| ((cells.first[c] + cells.count[c] - 1) as usize, cell_next(c)))
            .collect();
        for (p, nx) in ends {
            next[p] = nx;
        }
        next.par_extend((0..nc).into_par_iter().map(cell_next));
        let mut more = vec![-1i32; n];
        more.par_extend((0..nc).into_par_iter().map(|c| {
            if cells.is_leaf(c) {
                cells.first[c] as i32
            } else {
                (n + c + 1) as i32
            }
        }));
        let mut pos_mass = Vec::with_capacity(n + nc);
        pos_mass.extend_from_slice(&tree.particles);
        pos_mass.extend_from_slice(&cells.com_mass);
        let mut size = vec![eps * eps; n];
        size.extend_from_slice(&cells.s_eff);
        Self {
            n_particles: n,
            pos_mass,
            size,
            next,
            more,
            quad: cells.quad.clone(),
        }
    }

    /// The root node (the first cell).
    pub fn root(&self) -> usize {
        self.n_particles
    }
}
