//! The flat node arrays of seed 004 (appendix A) with stackless `next`/`more` threading.
//!
//! Nodes `0..n` are the sorted particles, nodes `n..n + cells` the cells in depth-first preorder
//! (root at `n`). `size` holds ε² for particles and S_eff for cells. `more` of a cell is its first
//! child (first child cell, or for a leaf its first particle); `next` of any node is the node
//! visited when it is accepted (or, for a particle, done): the following sibling or, for the last
//! child, the parent's `next`; −1 ends the walk. This is the format the GPU kernels read.

use super::Tree;

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
    /// Threads `tree` into flat node arrays with softening `eps` (length units).
    pub fn from_tree(tree: &Tree, eps: f32) -> Self {
        let n = tree.particles.len();
        let cells = &tree.cells;
        let nc = cells.len();
        let total = n + nc;
        let mut next = vec![-1i32; total];
        let mut more = vec![-1i32; total];
        // A cell's next: the node after its subtree, or its parent's next when it is the last
        // child. Preorder lets this be filled top-down with an explicit stack of "after" links.
        let mut after = vec![-1i32; nc];
        for c in 0..nc {
            let node = (n + c) as i32;
            next[node as usize] = after[c];
            if cells.is_leaf(c) {
                let a = cells.first[c] as usize;
                let b = a + cells.count[c] as usize;
                more[node as usize] = a as i32;
                for (p, nx) in next.iter_mut().enumerate().take(b).skip(a) {
                    *nx = if p + 1 < b { (p + 1) as i32 } else { after[c] };
                }
            } else {
                more[node as usize] = node + 1;
                let mut k = c + 1;
                for i in 0..cells.nchild[c] {
                    let sibling = k + cells.subtree[k] as usize;
                    after[k] = if i + 1 < cells.nchild[c] {
                        (n + sibling) as i32
                    } else {
                        after[c]
                    };
                    k = sibling;
                }
            }
        }
        let mut pos_mass = Vec::with_capacity(total);
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
