//! What a refit needs of a rank's last tree, apart from the particles: its order and cells
//! (the topology) and the cells' boxes at the rebuild; kept by the backends and checkpoints.

use crate::sfc::Frame;

/// What a refit needs of the last rebuild on one rank: the tree's particle order and cells
/// (topology) and the cells' boxes at the rebuild. Saved in checkpoints, so that a restarted
/// run refits the very tree the uninterrupted run would have.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeTopology {
    /// The frame of the rebuild (its cube and centre), which the tree's values are in.
    pub frame: Frame,
    /// For each tree particle, its index in the rank's particle arrays.
    pub index: Vec<u32>,
    /// Per cell: first particle (see [`Cells::first`]).
    pub first: Vec<u32>,
    /// Per cell: particle count.
    pub count: Vec<u32>,
    /// Per cell: tree level.
    pub level: Vec<u8>,
    /// Per cell: number of child cells.
    pub nchild: Vec<u8>,
    /// Per cell: cells in its subtree, itself included.
    pub subtree: Vec<u32>,
    /// Per cell: the box at the rebuild, centre and half side (in `frame`).
    pub boxes: Vec<[f32; 4]>,
}

impl TreeTopology {
    /// Checks that these arrays describe a tree over `n` particles: `index` a permutation of
    /// `0..n`, cells in preorder whose leaves tile the particles and whose children tile their
    /// parent. The error says what is wrong.
    pub fn check(&self, n: usize) -> std::result::Result<(), String> {
        if self.index.len() != n {
            return Err(format!(
                "{} tree particles for {n} particles",
                self.index.len()
            ));
        }
        let mut seen = vec![false; n];
        for &i in &self.index {
            match seen.get_mut(i as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("tree order repeats or exceeds particle {i}")),
            }
        }
        let nc = self.first.len();
        let same = [
            self.count.len(),
            self.level.len(),
            self.nchild.len(),
            self.subtree.len(),
        ];
        if nc == 0 || same.iter().any(|&l| l != nc) || self.boxes.len() != nc {
            return Err(format!("{nc} cells with arrays of other lengths"));
        }
        if (self.first[0], self.count[0], self.subtree[0]) != (0, n as u32, nc as u32) {
            return Err("the root does not hold every particle and cell".into());
        }
        for c in 0..nc {
            let end = c + self.subtree[c] as usize;
            if self.subtree[c] == 0 || end > nc {
                return Err(format!("cell {c}: subtree out of range"));
            }
            let (mut kid, mut at) = (c + 1, self.first[c]);
            for _ in 0..self.nchild[c] {
                if kid >= end || self.first[kid] != at {
                    return Err(format!("cell {c}: children do not tile it"));
                }
                at += self.count[kid];
                kid += self.subtree[kid] as usize;
            }
            let leaf = self.nchild[c] == 0;
            if (leaf && end != c + 1)
                || (!leaf && (kid != end || at != self.first[c] + self.count[c]))
            {
                return Err(format!("cell {c}: children do not tile it"));
            }
        }
        Ok(())
    }
}
