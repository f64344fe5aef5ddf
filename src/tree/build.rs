//! Tree topology from sorted keys: a cell splits into its eight octants (one 3-bit key digit per
//! level) while it holds more than `N_crit` particles and is above [`MAX_LEVEL`]. Large subtrees
//! are built in parallel and concatenated, which keeps depth-first preorder.

use super::{Cells, MAX_LEVEL};
use rayon::prelude::*;

/// Subtrees with more particles than this are split across rayon tasks.
const PARALLEL_MIN: usize = 1 << 15;

/// Topology of one cell before geometry and moments are known.
#[derive(Clone, Copy, Debug)]
struct Node {
    first: u32,
    count: u32,
    level: u8,
    nchild: u8,
    subtree: u32,
}

/// Builds the cell topology (first, count, level, nchild, subtree) over `keys` sorted ascending.
/// Geometry and moments are filled by [`super::compute_moments`]. `keys` must not be empty.
pub fn build_topology(keys: &[u64], ncrit: usize) -> Cells {
    debug_assert!(!keys.is_empty());
    debug_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    let nodes = subtree(keys, 0, keys.len(), 0, ncrit.max(1));
    let n = nodes.len();
    let mut cells = Cells {
        first: Vec::with_capacity(n),
        count: Vec::with_capacity(n),
        level: Vec::with_capacity(n),
        nchild: Vec::with_capacity(n),
        subtree: Vec::with_capacity(n),
        ..Cells::default()
    };
    for node in nodes {
        cells.first.push(node.first);
        cells.count.push(node.count);
        cells.level.push(node.level);
        cells.nchild.push(node.nchild);
        cells.subtree.push(node.subtree);
    }
    cells
}

/// The non-empty octant ranges of `keys[lo..hi]` at `level + 1`, in key order.
fn octants(keys: &[u64], lo: usize, hi: usize, level: u8) -> ([(usize, usize); 8], usize) {
    let shift = 3 * (MAX_LEVEL - 1 - level) as u32;
    let digit = |k: u64| (k >> shift) & 7;
    let mut out = [(0, 0); 8];
    let mut len = 0;
    let mut start = lo;
    while start < hi {
        let d = digit(keys[start]);
        let end = start + keys[start..hi].partition_point(|&k| digit(k) <= d);
        out[len] = (start, end);
        len += 1;
        start = end;
    }
    (out, len)
}

/// A leaf, or a cell to be split, over `keys[lo..hi]`.
fn node(lo: usize, hi: usize, level: u8) -> Node {
    Node {
        first: lo as u32,
        count: (hi - lo) as u32,
        level,
        nchild: 0,
        subtree: 1,
    }
}

fn is_leaf(count: usize, level: u8, ncrit: usize) -> bool {
    count <= ncrit || level >= MAX_LEVEL
}

/// Depth-first preorder nodes of the subtree over `keys[lo..hi]`, splitting large subtrees
/// across rayon tasks.
fn subtree(keys: &[u64], lo: usize, hi: usize, level: u8, ncrit: usize) -> Vec<Node> {
    if hi - lo <= PARALLEL_MIN || is_leaf(hi - lo, level, ncrit) {
        let mut out = Vec::new();
        subtree_into(keys, lo, hi, level, ncrit, &mut out);
        return out;
    }
    let (children, len) = octants(keys, lo, hi, level);
    let parts: Vec<Vec<Node>> = children[..len]
        .par_iter()
        .map(|&(a, b)| subtree(keys, a, b, level + 1, ncrit))
        .collect();
    let total: usize = parts.iter().map(Vec::len).sum();
    let mut root = node(lo, hi, level);
    root.nchild = len as u8;
    root.subtree = 1 + total as u32;
    let mut out = Vec::with_capacity(1 + total);
    out.push(root);
    for p in parts {
        out.extend(p);
    }
    out
}

/// Appends the depth-first preorder nodes of the subtree over `keys[lo..hi]` to `out`.
fn subtree_into(keys: &[u64], lo: usize, hi: usize, level: u8, ncrit: usize, out: &mut Vec<Node>) {
    let at = out.len();
    out.push(node(lo, hi, level));
    if is_leaf(hi - lo, level, ncrit) {
        return;
    }
    let (children, len) = octants(keys, lo, hi, level);
    for &(a, b) in &children[..len] {
        subtree_into(keys, a, b, level + 1, ncrit, out);
    }
    out[at].nchild = len as u8;
    out[at].subtree = (out.len() - at) as u32;
}
