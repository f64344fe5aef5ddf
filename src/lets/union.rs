//! The local tree and the received LETs merged into one tree (`lets = "merged"`, the host's;
//! `cuda/union.cu` is the device's).
//!
//! Every rank's tree and every LET are subtrees of one octree (one frame), so wherever the
//! domains' boundaries cut a cell, the ranks hold a part of it each, under the same key cell
//! ([`crate::tree::key`]). Walked one after the other, the local tree and the forest see two
//! partial cells where one rank's tree has one: two multipoles, or a multipole and an opened
//! leaf. Merged, the cells of one key are one cell: its moments the parts' combined (the
//! parallel-axis theorem, in float64, the parts in order: the local one, then the LETs' in
//! rank order), its box the cube around the parts' boxes ([`merged_box`]; a LET's terminal
//! multipole: its centre of mass), S_eff from that box; its children the parts' children
//! merged again by key, in octant order, and then each part that is a leaf (particles, or a
//! terminal multipole) kept whole. A cell held by one tree keeps its subtree as it is. The
//! result is an ordinary tree in preorder whose particles are the local ones, then the
//! forest's, so that a walk of it does what one rank's tree does where boundaries cut cells.

use super::wire::malformed_keys;
use crate::error::Result;
use crate::tree::bounding_cube;
use crate::tree::key::key_box;
use crate::tree::moments::{box_s_eff, combine, Moment};
use crate::tree::{Cells, Tree};
use crate::walk::mac::Mac;

/// One tree to merge: its cells and their key cells, and where its particles go in the
/// union's.
struct Part<'a> {
    cells: &'a Cells,
    keys: &'a [u64],
    base: u32,
}

/// The union as it is written.
struct Union<'a> {
    trees: [Part<'a>; 2],
    root: [f32; 4],
    mac: Mac,
    theta: f32,
    out: Cells,
}

/// A cell of one of the trees: (tree, cell).
type At = (usize, usize);

impl Union<'_> {
    fn key(&self, (t, c): At) -> u64 {
        self.trees[t].keys[c]
    }

    /// Appends cell `at` as it is (its particles moved to the union's), `subtree` given.
    fn push(&mut self, (t, c): At, subtree: u32) {
        let (src, o) = (&self.trees[t], &mut self.out);
        let cells = src.cells;
        o.first.push(cells.first[c] + src.base);
        o.count.push(cells.count[c]);
        o.level.push(cells.level[c]);
        o.nchild.push(cells.nchild[c]);
        o.subtree.push(subtree);
        o.boxes.push(cells.boxes[c]);
        o.com_mass.push(cells.com_mass[c]);
        o.quad.push(cells.quad[c]);
        o.trace.push(cells.trace[c]);
        o.s_eff.push(cells.s_eff[c]);
    }

    /// Appends the subtree of `at` as it is.
    fn copy_subtree(&mut self, (t, c): At) {
        let n = self.trees[t].cells.subtree[c];
        for k in c..c + n as usize {
            self.push((t, k), self.trees[t].cells.subtree[k]);
        }
    }

    /// The children of `at`.
    fn children(&self, (t, c): At) -> Vec<At> {
        let cells = self.trees[t].cells;
        let mut k = c + 1;
        (0..cells.nchild[c])
            .map(|_| {
                let kid = k;
                k += cells.subtree[k] as usize;
                (t, kid)
            })
            .collect()
    }

    /// Appends the union cell of `parts` (cells of one key, in order) and its subtree.
    fn emit(&mut self, parts: &[At]) -> Result<()> {
        if let [one] = parts {
            self.copy_subtree(*one);
            return Ok(());
        }
        let key = self.key(parts[0]);
        let at = self.out.len();
        self.push(parts[0], 1);
        let moments: Vec<Moment> = parts
            .iter()
            .map(|&(t, c)| Moment::of_cell(self.trees[t].cells, c))
            .collect();
        let m = combine(&moments);
        // The children: the parts' children merged by key, in octant order, then the parts
        // that are leaves, whole.
        let mut octants: [Vec<At>; 8] = Default::default();
        let mut leaves = Vec::new();
        for &p in parts {
            if self.trees[p.0].cells.nchild[p.1] == 0 {
                leaves.push(p);
            }
            for kid in self.children(p) {
                let k = self.key(kid);
                if k >> 3 != key {
                    return Err(malformed_keys());
                }
                octants[(k & 7) as usize].push(kid);
            }
        }
        let mut nchild = 0usize;
        for group in octants.iter().filter(|g| !g.is_empty()) {
            self.emit(group)?;
            nchild += 1;
        }
        for &leaf in &leaves {
            self.push(leaf, 1);
            nchild += 1;
        }
        let boxes: Vec<[f32; 4]> = parts
            .iter()
            .map(|&(t, c)| self.trees[t].cells.boxes[c])
            .collect();
        let b = merged_box(key_box(self.root, key), &boxes);
        let cm = m.com_mass();
        let o = &mut self.out;
        // Its particles are not one range: a walk reads `first` of leaves only.
        o.first[at] = 0;
        o.count[at] = parts
            .iter()
            .map(|&(t, c)| self.trees[t].cells.count[c])
            .sum();
        o.nchild[at] = u8::try_from(nchild).map_err(|_| malformed_keys())?;
        o.subtree[at] = (o.len() - at) as u32;
        o.boxes[at] = b;
        o.com_mass[at] = cm;
        o.quad[at] = m.quad32();
        o.trace[at] = m.trace32();
        o.s_eff[at] = box_s_eff(self.mac, self.theta, b, cm);
        Ok(())
    }
}

/// The box of a merged cell: the cube around its parts' boxes `parts` (a terminal
/// multipole's is its centre of mass, of half side 0), or, where every part is a terminal
/// multipole, around its key cell `key` (centre, half side) and them; its half side rounded up
/// to float32 (`merged_box` of `cuda/union.cu`). The parts' boxes are their key cells as their
/// trees hold them (or larger, after a refit), the same float32 values on every rank: the
/// merged cell's box is theirs, not a float32 rounding larger (a periodic walk never accepts
/// a cell a rounding larger than half a level 3 cell, `MAX_ACCEPTED_HALF`).
pub fn merged_box(key: [f64; 4], parts: &[[f32; 4]]) -> [f32; 4] {
    let cells = parts.iter().any(|b| b[3] > 0.0);
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for k in 0..3 {
        if !cells {
            lo[k] = key[k] - key[3];
            hi[k] = key[k] + key[3];
        }
        for b in parts {
            lo[k] = lo[k].min(b[k] as f64 - b[3] as f64);
            hi[k] = hi[k].max(b[k] as f64 + b[3] as f64);
        }
    }
    bounding_cube(lo, hi)
}

/// The union of the local tree `local` (its cells' key cells `local_keys`, its root's box at
/// the rebuild `root`) and the forest of received LETs `forest` (key cells `forest_keys`),
/// S_eff for `mac` and `theta`. An error where the LETs' keys do not nest (a child's key is
/// not its parent's and an octant).
pub fn union_tree(
    local: &Tree,
    local_keys: &[u64],
    root: [f32; 4],
    (forest, forest_keys): (&Tree, &[u64]),
    mac: Mac,
    theta: f32,
) -> Result<Tree> {
    let mut u = Union {
        trees: [
            Part {
                cells: &local.cells,
                keys: local_keys,
                base: 0,
            },
            Part {
                cells: &forest.cells,
                keys: forest_keys,
                base: local.particles.len() as u32,
            },
        ],
        root,
        mac,
        theta,
        out: Cells::default(),
    };
    // The roots: the local tree's, then every LET's (all of the root's key).
    let mut roots = vec![(0usize, 0usize)];
    let mut r = 0;
    while r < forest.cells.len() {
        if forest_keys[r] != 1 {
            return Err(malformed_keys());
        }
        roots.push((1, r));
        r += forest.cells.subtree[r] as usize;
    }
    u.emit(&roots)?;
    let mut particles = local.particles.clone();
    particles.extend_from_slice(&forest.particles);
    Ok(Tree {
        frame: local.frame,
        particles,
        index: Vec::new(),
        cells: u.out,
    })
}
