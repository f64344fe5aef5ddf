//! The walk's target groups and targets formed on the device from the tree last built there
//! (`cuda/groups.cu`), so that a one-rank evaluation never copies its tree down: the groups of
//! [`curve_groups`](crate::walk::groups::curve_groups) (and on the way those of
//! [`tree_groups`](crate::walk::groups::tree_groups)), the same ones in the same order, and the
//! targets of the tree forces.

use super::{blocks, int, ptr, DeviceTree, TreeBuilder};
use crate::error::Result;
use crate::tree::MAX_LEVEL;
use crate::walk::gpu::launch::{grow, with_headroom, Arg, DeviceArray, KernelRunner};
use crate::walk::groups::wide_chunk_limit;

/// Tree levels (the entries of the per-level width counts).
const LEVELS: usize = MAX_LEVEL as usize + 1;

/// The device arrays of group formation (grown with the tree and the particles).
pub(super) struct GroupArrays<R: KernelRunner> {
    /// Cells they hold.
    capacity: usize,
    /// Per cell: its parent.
    parent: R::Array<u32>,
    /// Per cell (and one more): groups starting at it, then their exclusive scan.
    starts: R::Array<u32>,
    /// Per cell: the targets of the packed group starting at it.
    run: R::Array<u32>,
    /// Per level: targets of the groups opened by cells of that level, and their half side.
    weight: R::Array<u32>,
    half: R::Array<f32>,
    /// The previous |a| of every particle, in input order (acceleration units).
    amag: R::Array<f32>,
    /// The tree-cell groups, (first target, targets) pairs.
    pub(super) cell_groups: R::Array<u32>,
    /// Per chunk of the curve groups: its extent (length units), then the groups it becomes
    /// and their exclusive scan.
    extents: R::Array<f32>,
    pieces: R::Array<u32>,
}

impl<R: KernelRunner> GroupArrays<R> {
    /// Bytes held on the device.
    pub(super) fn bytes(&self) -> usize {
        4 * (self.parent.len()
            + self.starts.len()
            + self.run.len()
            + self.weight.len()
            + self.half.len()
            + self.amag.len()
            + self.cell_groups.len()
            + self.extents.len()
            + self.pieces.len())
    }
}

impl<R: KernelRunner> TreeBuilder<R> {
    /// The arrays for `cells` cells, grown when needed.
    fn reserve_groups(&mut self, cells: usize) -> Result<()> {
        if self
            .group_arrays
            .as_ref()
            .is_some_and(|g| g.capacity > cells)
        {
            return Ok(());
        }
        self.group_arrays = None;
        let r = &self.runner;
        let arrays = |cap: usize| -> Result<GroupArrays<R>> {
            Ok(GroupArrays {
                capacity: cap,
                parent: r.alloc(cap)?,
                starts: r.alloc(cap)?,
                run: r.alloc(cap)?,
                weight: r.alloc(LEVELS)?,
                half: r.alloc(LEVELS)?,
                amag: r.alloc(1)?,
                cell_groups: r.alloc(1)?,
                extents: r.alloc(1)?,
                pieces: r.alloc(1)?,
            })
        };
        self.group_arrays = Some(with_headroom(cells + 1, arrays)?);
        Ok(())
    }

    /// Marks the groups of at most `max` targets in `tree` whose cells are no wider than
    /// `widest` (length units): how many start at each cell, and their runs.
    fn group_starts(&self, tree: &DeviceTree, max: usize, widest: f32) -> Result<()> {
        let (c, g) = (
            self.cells.as_ref().expect("built"),
            self.group_arrays.as_ref().expect("reserved"),
        );
        self.launch(
            "group_starts",
            blocks(tree.cells + 1),
            &[
                int(tree.cells)?,
                ptr(&c.count),
                ptr(&c.nchild),
                ptr(&c.subtree),
                ptr(&c.boxes),
                ptr(&g.parent),
                Arg::U32(max as u32),
                Arg::F32(widest),
                ptr(&g.starts),
                ptr(&g.run),
            ],
        )
    }

    /// Exclusive prefix sums of the `m + 1` counts at device address `data` (the last one 0) in
    /// place; returns their total.
    fn scan_total(&mut self, data: u64, m: usize) -> Result<usize> {
        self.scan(data, m + 1, 0)?;
        let g = self.group_arrays.as_ref().expect("reserved");
        // The total lands in the first weight entry, which is no longer needed.
        self.launch("group_total", 1, &[int(m)?, Arg::Ptr(data), ptr(&g.weight)])?;
        Ok(self.fetch(&g.weight, 1)?[0] as usize)
    }

    /// Forms the groups of [`tree_groups`](crate::walk::groups::tree_groups)`(tree, max)` for
    /// `tree`, the tree last built, in the `cell_groups` array; returns how many there are.
    pub(super) fn cell_groups(&mut self, tree: &DeviceTree, max: usize) -> Result<usize> {
        let max = max.max(1);
        self.reserve_groups(tree.cells + 1)?;
        let g = self.group_arrays.as_mut().expect("reserved");
        self.runner.upload(&[0u32; LEVELS], &mut g.weight)?;
        let (c, g) = (
            self.cells.as_ref().expect("built"),
            self.group_arrays.as_ref().expect("reserved"),
        );
        self.launch(
            "cell_parents",
            blocks(tree.cells),
            &[
                int(tree.cells)?,
                ptr(&c.nchild),
                ptr(&c.subtree),
                ptr(&g.parent),
            ],
        )?;
        // First the groups without a width limit, to find the particle-weighted median width
        // of their cells; cells wider than four times that are then split.
        self.group_starts(tree, max, f32::INFINITY)?;
        self.launch(
            "group_levels",
            blocks(tree.cells),
            &[
                int(tree.cells)?,
                ptr(&g.starts),
                ptr(&g.run),
                ptr(&c.level),
                ptr(&c.boxes),
                ptr(&g.weight),
                ptr(&g.half),
            ],
        )?;
        let weight = self.fetch(&g.weight, LEVELS)?;
        let half = self.fetch(&g.half, LEVELS)?;
        let median = median_width(&weight, &half, tree.particles);
        self.group_starts(tree, max, 4.0 * median)?;
        let starts = self.group_arrays.as_ref().expect("reserved").starts.ptr();
        let count = self.scan_total(starts, tree.cells)?;
        let g = self.group_arrays.as_mut().expect("reserved");
        grow(&self.runner, &mut g.cell_groups, 2 * count)?;
        let (c, g) = (
            self.cells.as_ref().expect("built"),
            self.group_arrays.as_ref().expect("reserved"),
        );
        self.launch(
            "emit_groups",
            blocks(tree.cells),
            &[
                int(tree.cells)?,
                ptr(&g.starts),
                ptr(&c.first),
                ptr(&c.count),
                ptr(&g.run),
                Arg::U32(max as u32),
                ptr(&g.cell_groups),
            ],
        )?;
        Ok(count)
    }

    /// Forms the groups of [`curve_groups`](crate::walk::groups::curve_groups)`(tree, max)` for
    /// `tree`, the tree last built: asks `place` for the device address of room for their number
    /// of (first target, targets) pairs, writes them there and returns their number.
    pub fn curve_groups(
        &mut self,
        tree: &DeviceTree,
        max: usize,
        place: impl FnOnce(usize) -> Result<u64>,
    ) -> Result<usize> {
        let max = max.max(1);
        let ncg = self.cell_groups(tree, max)?;
        let n = tree.particles;
        let chunks = n.div_ceil(max);
        let g = self.group_arrays.as_mut().expect("reserved");
        grow(&self.runner, &mut g.extents, chunks)?;
        grow(&self.runner, &mut g.pieces, chunks + 1)?;
        let (a, g) = (
            self.particles.as_ref().expect("built"),
            self.group_arrays.as_ref().expect("reserved"),
        );
        let chunk = Arg::U32(max as u32);
        self.launch(
            "chunk_extents",
            blocks(chunks),
            &[
                int(n)?,
                ptr(&a.sorted),
                chunk,
                int(chunks)?,
                ptr(&g.extents),
            ],
        )?;
        let limit = Arg::F32(wide_chunk_limit(&mut self.fetch(&g.extents, chunks)?));
        let (cells, ncg) = (ptr(&g.cell_groups), int(ncg)?);
        let common = [
            int(n)?,
            chunk,
            int(chunks)?,
            ptr(&g.extents),
            limit,
            cells,
            ncg,
        ];
        let with = |rest: Arg| [&common[..], &[rest]].concat();
        self.launch("chunk_pieces", blocks(chunks + 1), &with(ptr(&g.pieces)))?;
        let count = self.scan_total(g.pieces.ptr(), chunks)?;
        let groups = place(count)?;
        let g = self.group_arrays.as_ref().expect("reserved");
        let args = [with(ptr(&g.pieces)), vec![Arg::Ptr(groups)]].concat();
        self.launch("emit_pieces", blocks(chunks), &args)?;
        Ok(count)
    }

    /// The walk's targets for `tree`, the tree last built (4 floats per particle, in tree order):
    /// each particle's position and its previous |a| from `amag` (input order), zero without.
    /// They are written over the unsorted particles, which the build no longer needs, and stay
    /// there until the next build; returns their device address.
    pub fn gather_targets(&mut self, tree: &DeviceTree, amag: Option<&[f32]>) -> Result<u64> {
        self.reserve_groups(tree.cells + 1)?;
        let g = self.group_arrays.as_mut().expect("reserved");
        if let Some(amag) = amag {
            grow(&self.runner, &mut g.amag, amag.len())?;
            self.runner.upload(amag, &mut g.amag)?;
        }
        let (a, g) = (
            self.particles.as_ref().expect("built"),
            self.group_arrays.as_ref().expect("reserved"),
        );
        self.launch(
            "gather_targets",
            blocks(tree.particles),
            &[
                int(tree.particles)?,
                ptr(&a.sorted),
                ptr(&a.index[0]),
                ptr(&g.amag),
                Arg::I32(amag.is_some() as i32),
                ptr(&a.pos_mass),
            ],
        )?;
        Ok(a.pos_mass.ptr())
    }
}

/// The width (side, length units) of the cells that open the groups, at the particle-weighted
/// median over the groups: `weight[l]` targets in groups opened at level `l`, whose cells have
/// half side `half[l]`, `n` targets in all. Cells are narrower at deeper levels, so the widths
/// in increasing order are the levels from the deepest up.
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
