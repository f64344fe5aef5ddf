//! The LET wire format: one flat `f32` buffer per destination, in the walk's own node format.
//!
//! Layout: `[n_cells, n_particles]` (as `u32` bits), then `n_cells` cell records of
//! [`CELL_WORDS`] words in depth-first preorder, then `n_particles` particles of 4 words
//! (x, y, z, m). A cell record holds the box (centre, half side), centre of mass and mass, the
//! quadrupole (6), the trace, S_eff, and as `u32` bits: the first particle (relative to the
//! buffer's particles), the particle count, the subtree size (so `next`/`more` are buffer
//! relative, as the walk reads them), `nchild | level << 8`, and the cell's key cell
//! ([`key_cell`](crate::tree::key::key_cell)), low and high 32 bits, by which the receiver
//! finds the cells of its own tree and of other LETs that are parts of the same cell.
//!
//! Received buffers are checked before use: a malformed buffer is an error, never a bad walk.

use crate::error::{Error, Result};
use crate::sfc::{Frame, GridBox};
use crate::tree::key::key_level;
use crate::tree::{Cells, Tree};
use glam::DVec3;

/// Words per cell record.
pub const CELL_WORDS: usize = 22;
/// Words per particle.
pub const PARTICLE_WORDS: usize = 4;
/// Words of the header.
pub const HEADER_WORDS: usize = 2;

/// Appends cell `c` of `cells` (key cell `key`) to `out` as one record, with `first`
/// (buffer-relative first particle), `count` and `subtree` given.
pub fn push_cell(
    out: &mut Vec<f32>,
    cells: &Cells,
    c: usize,
    key: u64,
    [first, count, subtree]: [u32; 3],
) {
    out.extend_from_slice(&cells.boxes[c]);
    out.extend_from_slice(&cells.com_mass[c]);
    out.extend_from_slice(&cells.quad[c]);
    out.push(cells.trace[c]);
    out.push(cells.s_eff[c]);
    let tag = cells.nchild[c] as u32 | (cells.level[c] as u32) << 8;
    out.extend([first, count, subtree, tag].map(f32::from_bits));
    out.extend([key as u32, (key >> 32) as u32].map(f32::from_bits));
}

/// Offsets of a record's fields.
const BOX: usize = 0;
const COM: usize = 4;
const QUAD: usize = 8;
const TRACE: usize = 14;
const SEFF: usize = 15;
const FIRST: usize = 16;
const COUNT: usize = 17;
const SUBTREE: usize = 18;
const TAG: usize = 19;
const KEY: usize = 20;

/// Field `k` of record `rec` as an integer.
fn bits(rec: &[f32], k: usize) -> u32 {
    rec[k].to_bits()
}

/// Sets the subtree size of the record that starts at word `at` of `out`.
pub fn set_subtree(out: &mut [f32], at: usize, subtree: u32) {
    out[at + SUBTREE] = f32::from_bits(subtree);
}

/// Adds `shift` to the first-particle offset of the record `rec` (one record's words).
pub fn shift_first(rec: &mut [f32], shift: u32) {
    rec[FIRST] = f32::from_bits(bits(rec, FIRST) + shift);
}

/// Sets the particle count of the record that starts at word `at` of `out`.
pub fn set_count(out: &mut [f32], at: usize, count: u32) {
    out[at + COUNT] = f32::from_bits(count);
}

/// Turns the record that starts at word `at` into an always-accepted multipole: S_eff = −1,
/// which every walk accepts before any other test (see `walk::mac`), a box of zero size at the
/// centre of mass, no children and no particles. The exporter has checked that the multipole
/// is accurate enough for every target box of the destination; the destination's walk must not
/// reopen it when one of its groups spans several of those boxes, for it has no contents.
pub fn make_terminal(out: &mut [f32], at: usize) {
    let r = &mut out[at..at + CELL_WORDS];
    let com = [r[COM], r[COM + 1], r[COM + 2]];
    r[BOX..BOX + 3].copy_from_slice(&com);
    r[BOX + 3] = 0.0;
    r[SEFF] = -1.0;
    r[COUNT] = f32::from_bits(0);
    let level = bits(r, TAG) >> 8;
    r[TAG] = f32::from_bits(level << 8);
}

/// Writes the header of a buffer whose cells and particles are already in `out[HEADER_WORDS..]`.
pub fn finish(out: &mut [f32], n_cells: usize, n_particles: usize) {
    out[0] = f32::from_bits(n_cells as u32);
    out[1] = f32::from_bits(n_particles as u32);
}

/// The error for a LET from rank `src` that is not what it should be (`what`).
pub fn malformed(src: usize, what: &str) -> Error {
    Error::comm(format!("LET from rank {src}: {what}"))
}

/// The numbers of cells and particles of `buf`, a non-empty LET buffer from rank `src`,
/// checked against its length.
pub fn header(src: usize, buf: &[f32]) -> Result<(usize, usize)> {
    let len = buf.len();
    if len < HEADER_WORDS {
        return Err(malformed(src, "shorter than its header"));
    }
    let nc = buf[0].to_bits() as usize;
    let np = buf[1].to_bits() as usize;
    if Some(len)
        != nc
            .checked_mul(CELL_WORDS)
            .and_then(|c| Some(c + np.checked_mul(PARTICLE_WORDS)?))
            .map(|w| w + HEADER_WORDS)
    {
        return Err(malformed(
            src,
            &format!("{len} words for {nc} cells and {np} particles"),
        ));
    }
    Ok((nc, np))
}

/// The error for LETs whose key cells do not nest (a child's key is not its parent's and an
/// octant, a root's not the root's), found as they are merged with the local tree.
pub fn malformed_keys() -> Error {
    Error::comm("the received LETs' key cells do not nest")
}

/// What [`malformed`] says of a LET whose root's subtree is not all its cells.
pub const ROOT_SPANS_NOT: &str = "its root does not span its cells";

/// Checks that the root of `buf` (a LET buffer from rank `src` of `nc` cells, whose records are
/// well formed) spans every cell.
fn check_root(src: usize, buf: &[f32], nc: usize) -> Result<()> {
    if nc > 0 && bits(&buf[HEADER_WORDS..], SUBTREE) as usize != nc {
        return Err(malformed(src, ROOT_SPANS_NOT));
    }
    Ok(())
}

/// Unpacks the LET buffers received from every rank (concatenated, `counts` words from each) into
/// one forest: the trees one after another in the cell arrays, each in preorder with its own
/// subtree sizes, so the stackless walk runs through all of them in one pass; and its cells'
/// key cells.
pub fn unpack_forest(data: &[f32], counts: &[usize]) -> Result<(Tree, Vec<u64>)> {
    let mut cells = Cells::default();
    let mut keys = Vec::new();
    let mut particles: Vec<[f32; 4]> = Vec::new();
    let mut at = 0usize;
    for (src, &len) in counts.iter().enumerate() {
        let buf = &data[at..at + len];
        at += len;
        if len == 0 {
            continue;
        }
        let bad = |what: &str| malformed(src, what);
        let (nc, np) = header(src, buf)?;
        let base_p = particles.len() as u32;
        let recs = &buf[HEADER_WORDS..HEADER_WORDS + nc * CELL_WORDS];
        for (c, r) in recs.chunks_exact(CELL_WORDS).enumerate() {
            let (first, count, subtree) = (bits(r, FIRST), bits(r, COUNT), bits(r, SUBTREE));
            let tag = bits(r, TAG);
            let key = bits(r, KEY) as u64 | (bits(r, KEY + 1) as u64) << 32;
            if subtree == 0
                || key == 0
                || key_level(key) as u32 != tag >> 8
                || c + subtree as usize > nc
                || first as usize + count as usize > np
                || r[..FIRST].iter().any(|x| !x.is_finite())
            {
                return Err(bad(&format!("cell {c} is malformed")));
            }
            cells
                .boxes
                .push([r[BOX], r[BOX + 1], r[BOX + 2], r[BOX + 3]]);
            cells
                .com_mass
                .push([r[COM], r[COM + 1], r[COM + 2], r[COM + 3]]);
            let mut q = [0.0; 6];
            q.copy_from_slice(&r[QUAD..QUAD + 6]);
            cells.quad.push(q);
            cells.trace.push(r[TRACE]);
            cells.s_eff.push(r[SEFF]);
            cells.first.push(base_p + first);
            cells.count.push(count);
            cells.subtree.push(subtree);
            cells.nchild.push((tag & 0xff) as u8);
            cells.level.push((tag >> 8) as u8);
            keys.push(key);
        }
        check_root(src, buf, nc)?;
        let parts = &buf[HEADER_WORDS + nc * CELL_WORDS..];
        for p in parts.chunks_exact(PARTICLE_WORDS) {
            if p.iter().any(|x| !x.is_finite()) {
                return Err(bad("a particle is not finite"));
            }
            particles.push([p[0], p[1], p[2], p[3]]);
        }
    }
    // The LETs are in the job's frame, which the receiving rank holds; the forest's own is
    // never read.
    let tree = Tree {
        frame: Frame {
            cube: GridBox::around(DVec3::ZERO, DVec3::ZERO),
            centre: DVec3::ZERO,
            periodic: false,
        },
        particles,
        index: Vec::new(),
        cells,
    };
    Ok((tree, keys))
}
