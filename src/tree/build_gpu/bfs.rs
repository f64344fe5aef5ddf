//! The breadth-first layout the device's upward pass runs level by level on, recovered from a
//! tree's preorder topology (a tree restored from a checkpoint): within a level, breadth-first
//! order is preorder, and the children of one cell are consecutive.

use crate::tree::TreeTopology;

/// A tree's cells in breadth-first order, as the device build leaves them.
pub(super) struct BfsLayout {
    /// Per breadth-first cell: first particle, particle count, level, first child (its
    /// breadth-first index), number of children.
    pub first: Vec<u32>,
    pub count: Vec<u32>,
    pub level: Vec<u8>,
    pub child: Vec<u32>,
    pub nchild: Vec<u8>,
    /// Per breadth-first cell: its preorder index.
    pub preorder: Vec<u32>,
    /// Per breadth-first cell that splits: its slot among the moments of those cells.
    pub inner: Vec<u32>,
    /// Where each level starts, then the number of cells.
    pub levels: Vec<usize>,
}

/// The breadth-first layout of the cells of `t` (a checked topology).
pub(super) fn bfs_layout(t: &TreeTopology) -> BfsLayout {
    let nc = t.first.len();
    let depth = t.level.iter().map(|&l| l as usize + 1).max().unwrap_or(1);
    let mut levels = vec![0usize; depth + 1];
    for &l in &t.level {
        levels[l as usize + 1] += 1;
    }
    for l in 0..depth {
        levels[l + 1] += levels[l];
    }
    let mut next = levels.clone();
    let mut bfs_of = vec![0u32; nc];
    for (c, &l) in t.level.iter().enumerate() {
        bfs_of[c] = next[l as usize] as u32;
        next[l as usize] += 1;
    }
    let mut out = BfsLayout {
        first: vec![0; nc],
        count: vec![0; nc],
        level: vec![0; nc],
        child: vec![0; nc],
        nchild: vec![0; nc],
        preorder: vec![0; nc],
        inner: vec![0; nc],
        levels,
    };
    for c in 0..nc {
        let b = bfs_of[c] as usize;
        out.first[b] = t.first[c];
        out.count[b] = t.count[c];
        out.level[b] = t.level[c];
        out.nchild[b] = t.nchild[c];
        out.preorder[b] = c as u32;
        if t.nchild[c] > 0 {
            out.child[b] = bfs_of[c + 1];
        }
    }
    // The cells that split take the moments' slots in breadth-first order, as the build gives
    // them.
    let mut slots = 0u32;
    for (inner, &nchild) in out.inner.iter_mut().zip(&out.nchild) {
        if nchild > 0 {
            *inner = slots;
            slots += 1;
        }
    }
    out
}
