//! The walk's target groups and targets formed on the device (`cuda/groups.cu`) from the tree
//! built there, so that the tree never comes down: the groups of
//! [`curve_groups`](super::groups::curve_groups) (and on the way those of
//! [`tree_groups`](super::groups::tree_groups)), the same ones in the same order, or fixed
//! chunks without a curve order; the targets of the tree forces; and for block steps the
//! groups that hold an active particle.

use super::groups::{LEVELS, LIMIT_KEY_BITS};
use crate::error::Result;
use crate::gpu::args::{
    ActiveGroupsArgs, ChunkExtentsArgs, ChunkGroupsArgs, ChunkLimitArgs, ChunkPiecesArgs, Chunks,
    EmitGroupsArgs, EmitPiecesArgs, GatherTargetsArgs, GroupLevelsArgs, GroupStartsArgs,
    GroupWidthArgs, InputTargetsArgs, InvertOrderArgs, KeepGroupsArgs,
};
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::tree::build_gpu::{frame_map, DeviceTree};

/// Buckets of the chunks' extents (EXTENT_BUCKETS in cuda/groups.cu).
const EXTENT_BUCKETS: usize = 1 << LIMIT_KEY_BITS;

/// Forms target groups and targets on the device, keeping its arrays across evaluations.
pub struct GroupFormer<R: KernelRunner> {
    /// Per cell (and one more): groups starting at it, then their exclusive scan.
    starts: R::Array<u32>,
    /// Per cell: the targets of the packed group starting at it.
    run: R::Array<u32>,
    /// Per level: targets of the groups opened by cells of that level, and the largest half
    /// side of those cells.
    weight: R::Array<u32>,
    half: R::Array<f32>,
    /// The widest group cell of a formation (one word, length units: +inf for the first, 4
    /// times the first's median width for the second).
    widest: R::Array<f32>,
    /// The previous |a| of every particle, in the particle arrays' order (acceleration units).
    amag: R::Array<f32>,
    /// Block steps: one flag per particle, nonzero for the active ones.
    active: R::Array<u8>,
    /// The tree-cell groups, (first target, targets) pairs.
    cell_groups: R::Array<u32>,
    /// Per chunk of the curve groups: its extent (length units), then the groups it becomes
    /// and their exclusive scan.
    extents: R::Array<f32>,
    pieces: R::Array<u32>,
    /// The chunks per bucket of extents (the upper [`LIMIT_KEY_BITS`] of their order keys),
    /// and the widest chunk kept whole (one word, length units).
    extent_buckets: R::Array<u32>,
    chunk_limit: R::Array<f32>,
    /// The walk's groups, (first target, targets) pairs, the groups holding an active
    /// particle, and their targets.
    groups: R::Array<u32>,
    kept: R::Array<u32>,
    walked: R::Array<u32>,
    /// Without a curve order: for every particle, its slot in the tree's order.
    inverse: R::Array<u32>,
}

/// Where the walk's groups are on the device, and how many.
#[derive(Clone, Copy, Debug)]
pub struct DeviceGroups {
    /// Device address of the (first target, targets) pairs.
    pub at: u64,
    /// Number of groups.
    pub count: usize,
}

impl<R: KernelRunner> GroupFormer<R> {
    /// Empty arrays on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            starts: r.alloc(1)?,
            run: r.alloc(1)?,
            weight: r.alloc(LEVELS)?,
            half: r.alloc(LEVELS)?,
            widest: r.alloc(1)?,
            amag: r.alloc(1)?,
            active: r.alloc(1)?,
            cell_groups: r.alloc(1)?,
            extents: r.alloc(1)?,
            pieces: r.alloc(1)?,
            extent_buckets: r.alloc(EXTENT_BUCKETS)?,
            chunk_limit: r.alloc(1)?,
            groups: r.alloc(1)?,
            kept: r.alloc(1)?,
            walked: r.alloc(1)?,
            inverse: r.alloc(1)?,
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        4 * (self.starts.len()
            + self.run.len()
            + self.weight.len()
            + self.half.len()
            + self.widest.len()
            + self.amag.len()
            + self.cell_groups.len()
            + self.extents.len()
            + self.pieces.len()
            + self.extent_buckets.len()
            + self.chunk_limit.len()
            + self.groups.len()
            + self.kept.len()
            + self.walked.len()
            + self.inverse.len())
            + self.active.len()
    }

    /// Marks the groups of at most `max` targets in `tree` whose cells are no wider than the
    /// word `widest` holds: how many start at each cell, and their runs.
    fn group_starts(&self, s: &Stages<R>, tree: &DeviceTree, max: usize) -> Result<()> {
        // SAFETY: starts and run hold a cell more than the tree.
        unsafe {
            s.launch(
                "group_starts",
                blocks(tree.cells + 1),
                &GroupStartsArgs {
                    ncells: int(tree.cells)?,
                    tree: tree.arrays,
                    max: max as u32,
                    widest: self.widest.ptr(),
                    starts: self.starts.ptr(),
                    run: self.run.ptr(),
                },
            )
        }
    }

    /// Forms the groups of [`tree_groups`](super::groups::tree_groups)`(tree, max)` for `tree`
    /// in the `cell_groups` array; returns how many there are.
    fn cell_groups(&mut self, s: &Stages<R>, tree: &DeviceTree, max: usize) -> Result<usize> {
        let r = s.runner();
        grow(r, &mut self.starts, tree.cells + 1)?;
        grow(r, &mut self.run, tree.cells + 1)?;
        r.fill(&mut self.weight, LEVELS, 0)?;
        r.fill(&mut self.half, LEVELS, 0.0)?;
        r.fill(&mut self.widest, 1, f32::INFINITY)?;
        // First the groups without a width limit, to find the particle-weighted median width
        // of their cells (on the device: nothing comes down); cells wider than four times that
        // are then split.
        self.group_starts(s, tree, max)?;
        // SAFETY: the per-level arrays hold every level; starts and run every cell; widest one
        // word.
        unsafe {
            s.launch(
                "group_levels",
                blocks(tree.cells),
                &GroupLevelsArgs {
                    ncells: int(tree.cells)?,
                    starts: self.starts.ptr(),
                    run: self.run.ptr(),
                    tree: tree.arrays,
                    weight: self.weight.ptr(),
                    half: self.half.ptr(),
                },
            )?;
            s.launch(
                "group_width",
                1,
                &GroupWidthArgs {
                    weight: self.weight.ptr(),
                    half: self.half.ptr(),
                    n: int(tree.particles)?,
                    widest: self.widest.ptr(),
                },
            )?;
        }
        self.group_starts(s, tree, max)?;
        let count = s.scan_total(self.starts.ptr(), tree.cells)?;
        grow(r, &mut self.cell_groups, 2 * count)?;
        // SAFETY: cell_groups holds `count` pairs, the scan's total.
        unsafe {
            s.launch(
                "emit_groups",
                blocks(tree.cells),
                &EmitGroupsArgs {
                    ncells: int(tree.cells)?,
                    offset: self.starts.ptr(),
                    tree: tree.arrays,
                    run: self.run.ptr(),
                    max: max as u32,
                    groups: self.cell_groups.ptr(),
                },
            )?;
        }
        Ok(count)
    }

    /// The groups of [`curve_groups`](super::groups::curve_groups)`(tree, max)` for `tree`
    /// (targets in the tree's order).
    pub fn curve_groups(
        &mut self,
        s: &Stages<R>,
        tree: &DeviceTree,
        max: usize,
    ) -> Result<DeviceGroups> {
        let max = max.max(1);
        let ncg = self.cell_groups(s, tree, max)?;
        let n = tree.particles;
        let chunks = n.div_ceil(max);
        let r = s.runner();
        grow(r, &mut self.extents, chunks)?;
        grow(r, &mut self.pieces, chunks + 1)?;
        r.fill(&mut self.extent_buckets, EXTENT_BUCKETS, 0)?;
        // SAFETY: extents holds one entry per chunk, extent_buckets EXTENT_BUCKETS, chunk_limit
        // one word.
        unsafe {
            s.launch(
                "chunk_extents",
                blocks(chunks),
                &ChunkExtentsArgs {
                    n: int(n)?,
                    sorted: tree.arrays.particles,
                    chunk: max as u32,
                    nchunks: int(chunks)?,
                    extents: self.extents.ptr(),
                    buckets: self.extent_buckets.ptr(),
                },
            )?;
            s.launch(
                "chunk_limit",
                1,
                &ChunkLimitArgs {
                    nchunks: int(chunks)?,
                    buckets: self.extent_buckets.ptr(),
                    limit: self.chunk_limit.ptr(),
                },
            )?;
        }
        let cut = Chunks {
            n: int(n)?,
            chunk: max as u32,
            nchunks: int(chunks)?,
            extents: self.extents.ptr(),
            limit: self.chunk_limit.ptr(),
            cells: self.cell_groups.ptr(),
            ncg: int(ncg)?,
        };
        let pieces = ChunkPiecesArgs {
            chunks: cut,
            pieces: self.pieces.ptr(),
        };
        // SAFETY: pieces holds a chunk more than the chunks.
        unsafe { s.launch("chunk_pieces", blocks(chunks + 1), &pieces) }?;
        let count = s.scan_total(self.pieces.ptr(), chunks)?;
        grow(r, &mut self.groups, 2 * count)?;
        let emit = EmitPiecesArgs {
            chunks: cut,
            offset: self.pieces.ptr(),
            groups: self.groups.ptr(),
        };
        // SAFETY: groups holds `count` pairs, the scan's total.
        unsafe { s.launch("emit_pieces", blocks(chunks), &emit) }?;
        Ok(DeviceGroups {
            at: self.groups.ptr(),
            count,
        })
    }

    /// Fixed chunks of `max` consecutive targets of `n` (no curve order).
    pub fn chunk_groups(&mut self, s: &Stages<R>, n: usize, max: usize) -> Result<DeviceGroups> {
        let max = max.max(1);
        let count = n.div_ceil(max);
        grow(s.runner(), &mut self.groups, 2 * count)?;
        // SAFETY: groups holds `count` pairs.
        unsafe {
            s.launch(
                "chunk_groups",
                blocks(count),
                &ChunkGroupsArgs {
                    n: int(n)?,
                    chunk: max as u32,
                    nchunks: int(count)?,
                    groups: self.groups.ptr(),
                },
            )
        }?;
        Ok(DeviceGroups {
            at: self.groups.ptr(),
            count,
        })
    }

    /// Copies one flag per particle up (the active particles of a block step); returns their
    /// device address.
    pub fn upload_active(&mut self, s: &Stages<R>, active: &[bool]) -> Result<u64> {
        let r = s.runner();
        grow(r, &mut self.active, active.len())?;
        r.upload(bytemuck::cast_slice(active), &mut self.active)?;
        Ok(self.active.ptr())
    }

    /// The groups of `all` that hold a particle flagged at device address `active` (one byte
    /// per particle, in the particle arrays' order), in order, and the number of their targets;
    /// target t is particle `order[t]` (device address), or particle t without an order. A kept
    /// group keeps all its targets.
    pub fn active_groups(
        &mut self,
        s: &Stages<R>,
        all: DeviceGroups,
        order: Option<u64>,
        active: u64,
    ) -> Result<(DeviceGroups, usize)> {
        let r = s.runner();
        grow(r, &mut self.pieces, all.count + 1)?;
        // SAFETY: pieces holds a flag per group and one more; the order and the flags cover
        // every target of the groups.
        unsafe {
            s.launch(
                "active_groups",
                blocks(all.count + 1),
                &ActiveGroupsArgs {
                    ngroups: int(all.count)?,
                    groups: all.at,
                    order: order.unwrap_or(0),
                    has_order: order.is_some() as i32,
                    active,
                    flag: self.pieces.ptr(),
                },
            )?;
        }
        let count = s.scan_total(self.pieces.ptr(), all.count)?;
        grow(r, &mut self.kept, 2 * count)?;
        r.fill(&mut self.walked, 1, 0)?;
        // SAFETY: kept holds `count` pairs, the scan's total.
        unsafe {
            s.launch(
                "keep_groups",
                blocks(all.count),
                &KeepGroupsArgs {
                    ngroups: int(all.count)?,
                    groups: all.at,
                    offset: self.pieces.ptr(),
                    kept: self.kept.ptr(),
                    walked: self.walked.ptr(),
                },
            )?;
        }
        let walked = s.fetch(&self.walked, 1)?[0] as usize;
        Ok((
            DeviceGroups {
                at: self.kept.ptr(),
                count,
            },
            walked,
        ))
    }

    /// Every `every`-th of the groups `all` just formed (curve or chunk groups), from the
    /// first: a sample of the walk ([`crate::backend::Active::Sample`]), chosen on the host
    /// (a probe of `rebuild = "auto"` is rare). Returns them and their targets.
    pub fn sample_groups(
        &mut self,
        s: &Stages<R>,
        all: DeviceGroups,
        every: usize,
    ) -> Result<(DeviceGroups, usize)> {
        debug_assert_eq!(all.at, self.groups.ptr());
        let pairs: Vec<[u32; 2]> = s.fetch_as(&self.groups, all.count)?;
        let kept: Vec<u32> = pairs
            .iter()
            .step_by(every.max(1))
            .flatten()
            .copied()
            .collect();
        let walked = kept.iter().skip(1).step_by(2).map(|&k| k as usize).sum();
        grow(s.runner(), &mut self.kept, kept.len().max(1))?;
        s.runner().upload(&kept, &mut self.kept)?;
        Ok((
            DeviceGroups {
                at: self.kept.ptr(),
                count: kept.len() / 2,
            },
            walked,
        ))
    }

    /// Room for the previous |a| of `n` particles (the particle arrays' order, float32): its
    /// device address, for a stage to fill.
    pub fn amag_room(&mut self, s: &Stages<R>, n: usize) -> Result<u64> {
        grow(s.runner(), &mut self.amag, n)?;
        Ok(self.amag.ptr())
    }

    /// Copies the previous |a| of every particle up (acceleration units, the particle arrays'
    /// order); returns their device address.
    pub fn upload_amag(&mut self, s: &Stages<R>, amag: &[f32]) -> Result<u64> {
        grow(s.runner(), &mut self.amag, amag.len())?;
        s.runner().upload(amag, &mut self.amag)?;
        Ok(self.amag.ptr())
    }

    /// The walk's targets for `tree` (4 floats per particle, in the tree's order): each
    /// particle's position and its previous |a| from the floats at device address `amag`
    /// (particle arrays' order), zero without. They are written into the tree's spare room and
    /// stay there until the next build; returns their device address.
    pub fn tree_targets(
        &mut self,
        s: &Stages<R>,
        tree: &DeviceTree,
        amag: Option<u64>,
    ) -> Result<u64> {
        // SAFETY: the spare room holds 4 floats per particle; amag one per particle.
        unsafe {
            s.launch(
                "gather_targets",
                blocks(tree.particles),
                &GatherTargetsArgs {
                    n: int(tree.particles)?,
                    sorted: tree.arrays.particles,
                    index: tree.order,
                    amag: amag.unwrap_or(0),
                    has_amag: amag.is_some() as i32,
                    targets: tree.spare,
                },
            )?;
        }
        Ok(tree.spare)
    }

    /// The walk's targets in the particle arrays' own order (no curve order): the positions
    /// of `tree`'s particles at device address `pos` (3 doubles each) in the float32 frame of
    /// its cube, with the previous |a| (in that frame) from the floats at device address
    /// `amag`, zero without, written into the tree's spare room (4 floats per particle).
    /// Returns the device address of each target's slot in the tree's order (u32), the
    /// particle of the tree each target is.
    pub fn input_targets(
        &mut self,
        s: &Stages<R>,
        tree: &DeviceTree,
        pos: u64,
        amag: Option<u64>,
    ) -> Result<u64> {
        let n = tree.particles;
        grow(s.runner(), &mut self.inverse, n)?;
        // SAFETY: the spare room holds 4 floats per particle, `pos` 3 doubles; amag, the
        // tree's order and the inverse one per particle.
        unsafe {
            s.launch(
                "input_targets",
                blocks(n),
                &InputTargetsArgs {
                    n: int(n)?,
                    pos,
                    frame: frame_map(&tree.frame),
                    amag: amag.unwrap_or(0),
                    has_amag: amag.is_some() as i32,
                    targets: tree.spare,
                },
            )?;
            s.launch(
                "invert_order",
                blocks(n),
                &InvertOrderArgs {
                    n: int(n)?,
                    order: tree.order,
                    inverse: self.inverse.ptr(),
                },
            )?;
        }
        Ok(self.inverse.ptr())
    }
}

#[cfg(all(test, hinoki_emulator))]
mod tests;
