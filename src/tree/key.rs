//! A cell's key cell: which cell of the job's one octree it is, whatever tree holds it.
//!
//! Every rank's tree and every LET are subtrees of one octree whose root is the frame's cube,
//! so a cell is named by its level and its place at that level: the locational code
//! `1 << 3 level | Morton(ix, iy, iz)` (64 bits down to [`MAX_LEVEL`]). It is read from the
//! cell's box at the rebuild (its grid cell; a refit moves boxes, not keys), kept with the
//! tree through refits and checkpoints (their rebuild boxes), and sent in the LET records, so
//! that the receiving rank finds the cells of its own tree and of the LETs that are parts of
//! one cell (`lets::union`). `cell_key`, `key_level` and `key_box` of `cuda/lets.cu` are the
//! device's twins.

use super::MAX_LEVEL;

/// The key cell of a cell of level `level` whose box at the rebuild is `built` (centre, half
/// side), in the tree whose root's box at the rebuild is `root` (frame units).
pub fn key_cell(root: [f32; 4], built: [f32; 4], level: u8) -> u64 {
    let level = level.min(MAX_LEVEL) as u32;
    let cells = (1u64 << level) as f64;
    let side = 2.0 * root[3] as f64;
    let mut code = 1u64 << (3 * level);
    for k in 0..3 {
        let lo = root[k] as f64 - root[3] as f64;
        let at = ((built[k] as f64 - lo) / side * cells).floor();
        let i = at.clamp(0.0, cells - 1.0) as u64;
        for b in 0..level {
            code |= ((i >> b) & 1) << (3 * b + k as u32);
        }
    }
    code
}

/// The key cells of a tree's cells whose boxes at the rebuild are `built` and levels `level`
/// (the root first).
pub fn key_cells(built: &[[f32; 4]], level: &[u8]) -> Vec<u64> {
    match built.first() {
        Some(&root) => built
            .iter()
            .zip(level)
            .map(|(&b, &l)| key_cell(root, b, l))
            .collect(),
        None => Vec::new(),
    }
}

/// The level of key cell `key`.
pub fn key_level(key: u64) -> u8 {
    ((63 - key.leading_zeros()) / 3) as u8
}

/// The box (centre, half side, frame units) of key cell `key` in the tree whose root's box is
/// `root`.
pub fn key_box(root: [f32; 4], key: u64) -> [f64; 4] {
    let level = key_level(key) as u32;
    let side = 2.0 * root[3] as f64 / (1u64 << level) as f64;
    let mut out = [0.0, 0.0, 0.0, 0.5 * side];
    for (k, o) in out.iter_mut().take(3).enumerate() {
        let mut i = 0u64;
        for b in 0..level {
            i |= ((key >> (3 * b + k as u32)) & 1) << b;
        }
        *o = root[k] as f64 - root[3] as f64 + (i as f64 + 0.5) * side;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cells_key_names_its_place_and_its_box_returns_it() {
        let root = [0.0, 0.0, 0.0, 0.5];
        assert_eq!(key_cell(root, root, 0), 1);
        // The octant of x > 0 (bit 0), y < 0, z > 0 (bit 2) at level 1.
        let child = [0.25, -0.25, 0.25, 0.25];
        assert_eq!(key_cell(root, child, 1), 0b1101);
        assert_eq!(key_level(0b1101), 1);
        for level in [0u8, 1, 5, 13, MAX_LEVEL] {
            let cells = 1u64 << level;
            for i in [0, cells / 3, cells - 1] {
                let h = 0.5 / cells as f64;
                let c = -0.5 + (2 * i + 1) as f64 * h;
                let b = [c as f32, (-c) as f32, 0.0f32.max(c as f32), h as f32];
                let key = key_cell(root, b, level);
                assert_eq!(key_level(key), level);
                let back = key_box(root, key);
                assert_eq!(back[0] as f32, b[0], "level {level}, i {i}");
                assert_eq!(back[3] as f32, b[3]);
                assert_eq!(key_cell(root, back.map(|x| x as f32), level), key);
            }
        }
        // A box centre outside the root (a refit's) is clamped to the edge cell.
        assert_eq!(key_cell(root, [0.75, 0.0, 0.0, 0.25], 1) & 1, 1);
    }
}
