//! Groups of targets that share one tree walk: consecutive ranges `[first, count]` of the walk
//! order that together cover every target once, in order.
//!
//! With a space-filling-curve order the CPU's groups are tree cells (the largest cells holding
//! at most `max` particles, as Bonsai forms its groups, [`tree_groups`]), so a group is always
//! spatially compact. The GPU's are full chunks of the curve ([`curve_groups`]): a warp walks
//! for 32·V targets whether the group holds them or not, and tree-cell groups hold 70 % of that
//! on average, so full chunks do the same work for more targets; the few chunks that straddle a
//! jump of the curve across empty space (whose huge bounding box would open nearly the whole
//! tree) are cut into their tree-cell groups. In input order (`--order none`) the groups are
//! fixed chunks, as in the unordered runs of seeds 000/001.

use crate::tree::{Tree, MAX_LEVEL};
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
/// particle-weighted median group cell are split further, down to leaves (the median over the
/// levels of the cells opening the groups, each level's cells taken as wide as its widest: one
/// width per level after a rebuild, and after a refit a rule the GPU follows in any thread
/// order). Targets must be in
/// tree order.
pub fn tree_groups(tree: &Tree, max: usize) -> Vec<Group> {
    tree_groups_within(tree, max, f32::INFINITY)
}

/// [`tree_groups`] whose targets lie within a half-extent `half` per axis (frame units; a
/// periodic walk's [`MAX_GROUP_HALF`](super::ewald::MAX_GROUP_HALF)): cells wider than
/// 2 `half` are split further as well, and a group still wider (a large leaf, packed siblings)
/// is cut by [`within_half`]. With `half` infinite these are [`tree_groups`].
pub fn tree_groups_within(tree: &Tree, max: usize, half: f32) -> Vec<Group> {
    let first = form(tree, max, f32::INFINITY);
    let cells = &tree.cells;
    let mut weight = [0u32; LEVELS];
    let mut widths = [0f32; LEVELS];
    for (g, c) in &first {
        let l = cells.level[*c as usize] as usize;
        weight[l] += g[1];
        widths[l] = widths[l].max(cells.boxes[*c as usize][3]);
    }
    let median = median_width(&weight, &widths, tree.particles.len());
    let groups = form(tree, max, (4.0 * median).min(2.0 * half))
        .into_iter()
        .map(|g| g.0)
        .collect();
    within_half(&tree.particles, groups, half)
}

/// `groups` (consecutive ranges of `targets`, x, y, z first) cut into consecutive pieces, each
/// as long as it can be, whose targets' bounding box has half-extent ½ (max − min) at most
/// `half` on every axis (frame units), as the walks compute it; a piece of one target is
/// always within. With `half` infinite the groups are returned as they are.
pub fn within_half(targets: &[[f32; 4]], groups: Vec<Group>, half: f32) -> Vec<Group> {
    if half == f32::INFINITY {
        return groups;
    }
    groups
        .par_iter()
        .flat_map_iter(|&[s, k]| {
            let mut pieces = Vec::new();
            let at = |i: u32| {
                let t = targets[i as usize];
                [t[0], t[1], t[2]]
            };
            let (mut start, mut lo, mut hi) = (s, at(s), at(s));
            for i in s + 1..s + k {
                let x = at(i);
                let nlo = [0, 1, 2].map(|d| lo[d].min(x[d]));
                let nhi = [0, 1, 2].map(|d| hi[d].max(x[d]));
                if (0..3).any(|d| 0.5 * (nhi[d] - nlo[d]) > half) {
                    pieces.push([start, i - start]);
                    (start, lo, hi) = (i, x, x);
                } else {
                    (lo, hi) = (nlo, nhi);
                }
            }
            pieces.push([start, s + k - start]);
            pieces
        })
        .collect()
}

/// Tree levels (the root's and [`MAX_LEVEL`] included).
pub(crate) const LEVELS: usize = MAX_LEVEL as usize + 1;

/// The width (side, length units) of the cells that open the groups, at the particle-weighted
/// median over the groups: `weight[l]` targets in groups opened at level `l`, whose cells have
/// half side at most `half[l]`, `n` targets in all. Cells are narrower at deeper levels, so the
/// widths in increasing order are the levels from the deepest up. (`group_width` in
/// cuda/groups.cu is the same loop.)
fn median_width(weight: &[u32], half: &[f32], n: usize) -> f32 {
    let half_n = n as u64 / 2;
    let mut seen = 0;
    for l in (0..weight.len()).rev().filter(|&l| weight[l] > 0) {
        seen += weight[l] as u64;
        if seen >= half_n {
            return 2.0 * half[l];
        }
    }
    f32::INFINITY
}

/// Cells per independent piece of [`form`]: fixed, so that the groups do not depend on the
/// number of threads.
const PIECE: usize = 4096;

/// The groups of [`tree_groups`] with cells wider than `widest` split (down to leaves), each
/// with the cell that opened it. The tree is cut into independent pieces (maximal
/// subtrees of at most [`PIECE`] cells, and any cell that is a group by itself), formed in
/// parallel and concatenated in order; siblings in different pieces are not packed together.
fn form(tree: &Tree, max: usize, widest: f32) -> Vec<(Group, u32)> {
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
fn form_piece(tree: &Tree, max: u32, widest: f32, start: usize, end: usize) -> Vec<(Group, u32)> {
    let cells = &tree.cells;
    let mut out: Vec<(Group, u32)> = Vec::new();
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
                _ => out.push(([s, k], c as u32)),
            }
            s += k;
        }
        // Pieces of a cut leaf are full; only a whole cell leaves its group open for siblings.
        open_parent = if count <= max { parent } else { None };
        c += cells.subtree[c] as usize;
    }
    out
}

/// A chunk of [`curve_groups`] wider than this many times the median chunk is cut into its
/// tree-cell groups.
pub const WIDE_CHUNK: f32 = 4.0;

/// Groups for the GPU walk: chunks of `max` consecutive targets along the curve (the tree's
/// order), except that a chunk whose targets span more than [`WIDE_CHUNK`] times the median
/// chunk's extent is cut at the boundaries of the [`tree_groups`] that overlap it. Targets must
/// be the tree's particles in tree order.
pub fn curve_groups(tree: &Tree, max: usize) -> Vec<Group> {
    let chunks = chunk_groups(tree.particles.len(), max);
    let mut extents: Vec<f32> = chunks
        .par_iter()
        .map(|&[s, k]| extent(&tree.particles[s as usize..(s + k) as usize]))
        .collect();
    let limit = wide_chunk_limit(&mut extents.clone());
    let cells = tree_groups(tree, max);
    let mut out = Vec::with_capacity(chunks.len());
    let mut j = 0;
    for (&[s, k], e) in chunks.iter().zip(extents.drain(..)) {
        if e <= limit {
            out.push([s, k]);
            continue;
        }
        while cells[j][0] + cells[j][1] <= s {
            j += 1;
        }
        let mut at = s;
        while at < s + k {
            let end = (cells[j][0] + cells[j][1]).min(s + k);
            out.push([at, end - at]);
            at = end;
            if end == cells[j][0] + cells[j][1] {
                j += 1;
            }
        }
    }
    out
}

/// The largest side of the bounding box of `x` (x, y, z first; length units).
pub fn extent(x: &[[f32; 4]]) -> f32 {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for p in x {
        for k in 0..3 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f32::max)
}

/// The upper bits of a chunk extent's order key ([`order_key`]) that [`wide_chunk_limit`]
/// keeps: the device finds the median's with one count per bucket of extents
/// (`chunk_limit` in cuda/groups.cu), nothing brought down.
pub(crate) const LIMIT_KEY_BITS: u32 = 16;

/// The extent above which a chunk of [`curve_groups`] is cut: [`WIDE_CHUNK`] times the median
/// chunk's extent (the element of rank len / 2 in increasing order) rounded down to the upper
/// [`LIMIT_KEY_BITS`] of its order key (8 bits of mantissa: within 0.4 %). `extents` is
/// reordered.
pub fn wide_chunk_limit(extents: &mut [f32]) -> f32 {
    if extents.is_empty() {
        return f32::INFINITY;
    }
    let mid = extents.len() / 2;
    let median = order_key(*extents.select_nth_unstable_by(mid, f32::total_cmp).1);
    WIDE_CHUNK * from_order_key(median & !(u32::MAX >> LIMIT_KEY_BITS))
}

/// `x`'s place in [`f32::total_cmp`]'s order as an unsigned key (negative values' bits all
/// flipped, the others' sign bit set), as `order_key` in cuda/groups.cu.
fn order_key(x: f32) -> u32 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 1 << 31
    }
}

/// The value of an [`order_key`].
fn from_order_key(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & !(1 << 31) } else { !k })
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

    /// The Hilbert-ordered tree of leaves of at most `ncrit` particles.
    fn tree(pos: &[DVec3], mass: &[f64], ncrit: usize) -> Tree {
        let p = TreeParams {
            order: Order::Hilbert,
            ncrit,
            mac: Mac::Modified,
            theta: 0.5,
        };
        Tree::build(pos, mass, &p, &mut PhaseTimes::default())
    }

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
            covers(&tree_groups(&tree(&pos, &mass, ncrit), max), pos.len(), max);
        }
        covers(&chunk_groups(100, 32), 100, 32);
        // Curve groups: full chunks, with a far outlier's chunk cut at cell groups.
        let mut pos = pos;
        pos[2500] = DVec3::splat(1000.0);
        let tree = tree(&pos, &mass, 8);
        let groups = curve_groups(&tree, 64);
        covers(&groups, pos.len(), 64);
        let full = groups.iter().filter(|g| g[1] == 64).count();
        assert!(full >= pos.len() / 64 - 2, "{full} full chunks");
        assert!(
            groups.len() > pos.len().div_ceil(64),
            "the outlier's chunk was not cut"
        );
        for &[s, k] in &groups {
            let e = extent(&tree.particles[s as usize..(s + k) as usize]);
            assert!(e < 100.0 || k == 1, "a group of {k} spans {e}");
        }
        assert_eq!(chunk_groups(100, 32).last(), Some(&[96, 4]));
    }

    /// Groups within a half-extent: every group is within it on every axis, a cut group's
    /// pieces are as long as they can be (each one's next target would break the limit), and
    /// without a limit they are the tree's groups.
    #[test]
    fn groups_within_a_half_extent() {
        let pos: Vec<DVec3> = (0..6000)
            .map(|i| {
                let t = i as f64 * 0.37;
                let r = if i % 3 == 0 { 0.02 } else { 1.0 };
                DVec3::new(t.sin(), (2.1 * t).cos(), (0.7 * t).sin()) * r
            })
            .collect();
        let mass = vec![1.0; pos.len()];
        for ncrit in [1, 8, 100] {
            let tree = tree(&pos, &mass, ncrit);
            assert_eq!(
                tree_groups_within(&tree, 64, f32::INFINITY),
                tree_groups(&tree, 64)
            );
            let half = 1.0 / 128.0;
            let groups = tree_groups_within(&tree, 64, half);
            covers(&groups, pos.len(), 64);
            let x = &tree.particles;
            let within = |s: u32, e: u32| extent(&x[s as usize..e as usize]) <= 2.0 * half;
            for g in &groups {
                assert!(within(g[0], g[0] + g[1]), "{g:?} spans more than {half}");
            }
            let several = groups.iter().filter(|g| g[1] > 1).count();
            assert!(several > 0, "ncrit {ncrit}: no group of several targets");
            // Cutting the groups of a large leaf: maximal pieces.
            let leafy = within_half(x, vec![[0, x.len() as u32]], half);
            for (g, next) in leafy.iter().zip(leafy.iter().skip(1)) {
                assert_eq!(g[0] + g[1], next[0]);
                assert!(
                    !within(g[0], next[0] + 1),
                    "{g:?} could take its next target"
                );
            }
        }
    }

    /// The order keys sort as `total_cmp` and come back to the same bits; the wide-chunk limit
    /// is WIDE_CHUNK times the median (rank len / 2) with its key's lower bits cleared, at most
    /// 0.4 % below the median.
    #[test]
    fn wide_chunk_limit_is_the_rounded_median() {
        let mut values = vec![
            -3.5f32,
            -0.0,
            0.0,
            1e-30,
            0.25,
            0.2501,
            1.0,
            7.0e12,
            f32::INFINITY,
        ];
        values.sort_by(f32::total_cmp);
        for w in values.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]), "{} {}", w[0], w[1]);
        }
        for &v in &values {
            assert_eq!(from_order_key(order_key(v)).to_bits(), v.to_bits());
        }
        let mut extents: Vec<f32> = (0..1001).map(|i| 0.001 * (i as f32 + 0.5).sqrt()).collect();
        extents.reverse();
        let median = 0.001 * 500.5f32.sqrt();
        let limit = wide_chunk_limit(&mut extents) / WIDE_CHUNK;
        assert!(
            limit <= median && limit > median * 0.996,
            "{limit} against {median}"
        );
        assert_eq!(
            order_key(limit) >> (32 - LIMIT_KEY_BITS),
            order_key(median) >> 16
        );
        assert_eq!(wide_chunk_limit(&mut []), f32::INFINITY);
    }
}
