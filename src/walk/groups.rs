//! Groups of targets that share one tree walk: consecutive ranges `[first, count]` of the walk
//! order that together cover every target once, in order.
//!
//! With a space-filling-curve order the groups are tree cells (the largest cells holding at most
//! `max` particles, as Bonsai forms its groups), so a group is always spatially compact; fixed
//! chunks of the curve can straddle two distant cells in sparse regions and then drag a huge
//! bounding box through the walk. In input order (`--order none`) the groups are fixed chunks,
//! as in the unordered runs of seeds 000/001.

use crate::tree::Tree;
use rayon::prelude::*;

/// A group of targets: index of the first one and how many (at least one).
pub type Group = [u32; 2];

/// Groups from the tree: the largest cells with at most `max` particles (leaves larger than
/// `max`, possible when N_crit > `max`, are cut into chunks), with consecutive sibling cells
/// packed into one group while it holds at most `max` particles. Packing keeps GPU groups from
/// running mostly empty; restricting it to siblings keeps every group inside one parent cell,
/// so a group never spans a jump of the curve across empty space. In sparse regions a cell
/// holding few particles can be huge, and one walk for its whole box opens nearly the whole tree
/// (one such group then sets the GPU kernel's run time): cells wider than four times the
/// particle-weighted median group cell are split further, down to leaves. Targets must be in
/// tree order.
pub fn tree_groups(tree: &Tree, max: usize) -> Vec<Group> {
    let first = form(tree, max, f32::INFINITY);
    let mut sides: Vec<(f32, u32)> = first.iter().map(|g| (g.1, g.0[1])).collect();
    sides.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let half_n = sides.iter().map(|s| s.1 as u64).sum::<u64>() / 2;
    let mut seen = 0;
    let median = sides
        .iter()
        .find(|s| {
            seen += s.1 as u64;
            seen >= half_n
        })
        .map_or(f32::INFINITY, |s| s.0);
    form(tree, max, 4.0 * median)
        .into_iter()
        .map(|g| g.0)
        .collect()
}

/// Cells per independent piece of [`form`]: fixed, so that the groups do not depend on the
/// number of threads.
const PIECE: usize = 4096;

/// The groups of [`tree_groups`] with cells wider than `widest` split (down to leaves), each
/// with the side of the cell that opened it. The tree is cut into independent pieces (maximal
/// subtrees of at most [`PIECE`] cells, and any cell that is a group by itself), formed in
/// parallel and concatenated in order; siblings in different pieces are not packed together.
fn form(tree: &Tree, max: usize, widest: f32) -> Vec<(Group, f32)> {
    let cells = &tree.cells;
    let max = max.max(1) as u32;
    let is_group =
        |c: usize| cells.is_leaf(c) || (cells.count[c] <= max && 2.0 * cells.boxes[c][3] <= widest);
    // The pieces, in preorder: walk down from the roots, opening cells that are too large.
    let mut pieces = Vec::new();
    let mut c = 0;
    while c < cells.len() {
        let end = c + cells.subtree[c] as usize;
        if end - c <= PIECE || is_group(c) {
            pieces.push((c, end));
            c = end;
        } else {
            c += 1;
        }
    }
    pieces
        .par_iter()
        .map(|&(start, end)| form_piece(tree, max, widest, start, end))
        .collect::<Vec<_>>()
        .concat()
}

/// [`form`] on the subtree of cells `start..end` (one piece, formed in sequence).
fn form_piece(tree: &Tree, max: u32, widest: f32, start: usize, end: usize) -> Vec<(Group, f32)> {
    let cells = &tree.cells;
    let mut out: Vec<(Group, f32)> = Vec::new();
    // Ancestors of the current cell within the piece: (cell, end of its subtree).
    let mut ancestors: Vec<(usize, usize)> = Vec::new();
    // Parent of the cell that made the last group, while that group may still grow.
    let mut open_parent: Option<usize> = None;
    let mut c = start;
    while c < end {
        while ancestors.last().is_some_and(|&(_, end)| c >= end) {
            ancestors.pop();
        }
        let (first, count) = (cells.first[c], cells.count[c]);
        let side = 2.0 * cells.boxes[c][3];
        if !cells.is_leaf(c) && (count > max || side > widest) {
            ancestors.push((c, c + cells.subtree[c] as usize));
            c += 1;
            continue;
        }
        let parent = ancestors.last().map(|a| a.0);
        let mut s = first;
        while s < first + count {
            let k = max.min(first + count - s);
            match out.last_mut() {
                Some((g, _))
                    if open_parent.is_some() && open_parent == parent && g[1] + k <= max =>
                {
                    g[1] += k
                }
                _ => out.push(([s, k], side)),
            }
            s += k;
        }
        // Pieces of a cut leaf are full; only a whole cell leaves its group open for siblings.
        open_parent = if count <= max { parent } else { None };
        c += cells.subtree[c] as usize;
    }
    out
}

/// Fixed chunks of `size` consecutive targets out of `n`.
pub fn chunk_groups(n: usize, size: usize) -> Vec<Group> {
    let size = size.max(1);
    (0..n)
        .step_by(size)
        .map(|s| [s as u32, size.min(n - s) as u32])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::PhaseTimes;
    use crate::sfc::Order;
    use crate::tree::TreeParams;
    use crate::walk::mac::Mac;
    use glam::DVec3;

    fn covers(groups: &[Group], n: usize, max: usize) {
        let mut next = 0;
        for &[s, k] in groups {
            assert_eq!(s, next);
            assert!(k >= 1 && k as usize <= max);
            next = s + k;
        }
        assert_eq!(next as usize, n);
    }

    #[test]
    fn groups_cover_every_target_once_in_order() {
        let pos: Vec<DVec3> = (0..5000)
            .map(|i| {
                let t = i as f64 * 0.37;
                DVec3::new(t.sin(), (2.1 * t).cos(), (0.7 * t).sin()) * (1.0 + (i % 7) as f64)
            })
            .collect();
        let mass = vec![1.0; pos.len()];
        for (ncrit, max) in [(8, 32), (64, 16), (1, 1)] {
            let tree = Tree::build(
                &pos,
                &mass,
                &TreeParams {
                    order: Order::Hilbert,
                    ncrit,
                    mac: Mac::Modified,
                    theta: 0.5,
                },
                &mut PhaseTimes::default(),
            );
            covers(&tree_groups(&tree, max), pos.len(), max);
        }
        covers(&chunk_groups(100, 32), 100, 32);
        assert_eq!(chunk_groups(100, 32).last(), Some(&[96, 4]));
    }
}
