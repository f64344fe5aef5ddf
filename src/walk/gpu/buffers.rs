//! Device buffers of the walk, allocated once and grown (never shrunk) as N grows, so a run does
//! no per-step allocation. A GPU checks free memory before every allocation.
//!
//! A host tree goes up as it is (the sorted particles and the cells' arrays), viewed
//! as flat f32/u32/u8 slices: no staging copy of our own and no threaded node arrays (the
//! runner's copies go through its page-locked staging buffers).

use super::InputOrder;
use crate::error::Result;
use crate::gpu::args::TreeArrays;
use crate::gpu::launch::{grow, piece_len, DeviceArray, Element, KernelRunner, Pieces};
use crate::gpu::runner::{Runner, RunnerArray};
use crate::tree::{DeviceCells, Tree};
use crate::walk::cpu::{Forces, Units, WalkOutput};
use crate::walk::groups::Group;
use rayon::prelude::*;

/// The walk's device arrays.
pub(super) struct Buffers {
    /// Sorted particles (x, y, z, m) as 4 floats each; the sources of direct summation too.
    pub particles: RunnerArray<f32>,
    /// The walked tree's cells (a tree copied up, or a forest of LETs).
    pub cells: DeviceCells<Runner>,
    pub targets: RunnerArray<f32>,
    pub groups: RunnerArray<u32>,
    pub out: RunnerArray<f32>,
    pub counts: RunnerArray<u32>,
    /// The list kernel's control words: the next group to take, and a stack-overflow flag;
    /// and those of a forest's walk behind or alongside a local walk (so that their reset
    /// leaves that walk's flag to be read).
    pub control: RunnerArray<u32>,
    pub forest_control: RunnerArray<u32>,
    /// The list kernel's stacks and child lists.
    pub list: ListRoom,
    /// A forest's walk alongside a local walk still running (`Mode::Alongside`): its results
    /// in walk order (acceleration and potential, 4 floats, and the p2p and m2p counts, 2 u32,
    /// per target), stacks and child lists of its own, so that it shares nothing the local
    /// walk reads or writes.
    pub alongside_out: RunnerArray<f32>,
    pub alongside_counts: RunnerArray<u32>,
    pub alongside_list: ListRoom,
    /// The periodic walk's groups, (first target, targets) pairs (room for one per target),
    /// and how many there are.
    pub pieces: RunnerArray<u32>,
    pub piece_count: RunnerArray<u32>,
    /// The Ewald table of [`crate::walk::ewald::table`], copied up for the first periodic walk.
    pub ewald: Option<RunnerArray<f32>>,
}

impl Buffers {
    /// Empty buffers on `r`'s device.
    pub fn new(r: &Runner) -> Result<Self> {
        Ok(Self {
            particles: r.alloc(1)?,
            cells: DeviceCells::alloc(r, 1)?,
            targets: r.alloc(1)?,
            groups: r.alloc(1)?,
            out: r.alloc(1)?,
            counts: r.alloc(1)?,
            control: r.alloc(2)?,
            forest_control: r.alloc(2)?,
            list: ListRoom::new(r)?,
            alongside_out: r.alloc(1)?,
            alongside_counts: r.alloc(1)?,
            alongside_list: ListRoom::new(r)?,
            pieces: r.alloc(1)?,
            piece_count: r.alloc(1)?,
            ewald: None,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.cells.bytes()
            + 4 * (self.particles.len()
                + self.targets.len()
                + self.groups.len()
                + self.out.len()
                + self.counts.len()
                + self.control.len()
                + self.forest_control.len()
                + self.list.words()
                + self.alongside_out.len()
                + self.alongside_counts.len()
                + self.alongside_list.words()
                + self.pieces.len()
                + self.piece_count.len()
                + self.ewald.as_ref().map_or(0, |e| e.len()))
    }

    /// Grows the tree buffers to `n` particles and `nc` cells.
    fn reserve(&mut self, r: &Runner, n: usize, nc: usize) -> Result<()> {
        grow(r, &mut self.particles, 4 * n)?;
        self.cells.reserve(r, nc)
    }

    /// Where a tree in the tree buffers is (parents are not kept: 0).
    fn tree_arrays(&self) -> TreeArrays {
        self.cells.arrays(self.particles.ptr(), 0)
    }

    /// Room in the tree buffers for `nc` cells and `n` particles; returns where it is.
    pub fn reserve_tree(&mut self, r: &Runner, nc: usize, n: usize) -> Result<TreeArrays> {
        self.reserve(r, n, nc)?;
        Ok(self.tree_arrays())
    }

    /// Grows the walk's results (in walk order) to `nt` targets.
    pub fn reserve_results(&mut self, r: &Runner, nt: usize) -> Result<()> {
        self.reserve_out(r, nt)?;
        grow(r, &mut self.counts, 2 * nt)
    }

    /// Grows the walk's accelerations and potentials (in walk order) to `nt` targets.
    pub fn reserve_out(&mut self, r: &Runner, nt: usize) -> Result<()> {
        grow(r, &mut self.out, 4 * nt)
    }

    /// Grows the results of a forest's walk alongside a local walk to `nt` targets.
    pub fn reserve_alongside(&mut self, r: &Runner, nt: usize) -> Result<()> {
        grow(r, &mut self.alongside_out, 4 * nt)?;
        grow(r, &mut self.alongside_counts, 2 * nt)
    }

    /// Releases the results in walk order, the list kernel's child lists and the periodic
    /// walk's groups, which the next walk makes anew (so that they take no room in the stages
    /// between walks, when memory is short).
    pub fn release_results(&mut self, r: &Runner) -> Result<()> {
        self.out = r.alloc(1)?;
        self.counts = r.alloc(1)?;
        self.list.children = r.alloc(1)?;
        self.alongside_out = r.alloc(1)?;
        self.alongside_counts = r.alloc(1)?;
        self.alongside_list.children = r.alloc(1)?;
        self.pieces = r.alloc(1)?;
        Ok(())
    }

    /// The list room of a walk (`alongside` another still running: its own).
    pub fn list_room(&mut self, alongside: bool) -> &mut ListRoom {
        match alongside {
            true => &mut self.alongside_list,
            false => &mut self.list,
        }
    }

    /// Clears the list kernel's control words of a walk (a `forest`'s behind or alongside a
    /// local walk: its own).
    pub fn clear_control(&mut self, r: &Runner, forest: bool) -> Result<()> {
        r.fill(self.control_mut(forest), 2, 0)
    }

    /// The list kernel's control words of a walk (a `forest`'s behind or alongside a local
    /// walk: its own).
    pub fn control(&self, forest: bool) -> &RunnerArray<u32> {
        match forest {
            true => &self.forest_control,
            false => &self.control,
        }
    }

    fn control_mut(&mut self, forest: bool) -> &mut RunnerArray<u32> {
        match forest {
            true => &mut self.forest_control,
            false => &mut self.control,
        }
    }

    /// The Ewald table on the device, copied up on the first call; its device address.
    pub fn ewald_table(&mut self, r: &Runner) -> Result<u64> {
        if let Some(e) = &self.ewald {
            return Ok(e.ptr());
        }
        let values = crate::walk::ewald::table().values();
        let mut e = r.alloc(values.len())?;
        r.upload(values, &mut e)?;
        Ok(self.ewald.insert(e).ptr())
    }

    /// Grows the periodic walk's groups to `nt` targets and sets their count to zero.
    pub fn prepare_pieces(&mut self, r: &Runner, nt: usize) -> Result<()> {
        grow(r, &mut self.pieces, 2 * nt)?;
        r.fill(&mut self.piece_count, 1, 0)
    }

    /// How many groups the periodic walk's groups are (after `periodic_groups`).
    pub fn pieces(&self, r: &Runner) -> Result<usize> {
        let mut count = [0u32];
        r.download(&self.piece_count, &mut count)?;
        Ok(count[0] as usize)
    }

    /// The list kernel's stack-overflow flag after a walk (a `forest`'s behind or alongside a
    /// local walk).
    pub fn list_overflowed(&self, r: &Runner, forest: bool) -> Result<bool> {
        let mut flags = [0u32; 2];
        r.download(self.control(forest), &mut flags)?;
        Ok(flags[1] != 0)
    }

    /// Copies a host tree to the tree buffers (growing them as needed); returns where it is.
    pub fn upload_tree(&mut self, r: &Runner, tree: &Tree) -> Result<TreeArrays> {
        self.reserve(r, tree.particles.len(), tree.cells.len())?;
        r.upload(bytemuck::cast_slice(&tree.particles), &mut self.particles)?;
        self.cells.upload(r, &tree.cells)?;
        Ok(self.tree_arrays())
    }

    /// Copies the targets and their groups to the device (growing buffers as needed).
    pub fn upload_targets(
        &mut self,
        r: &Runner,
        targets: &[[f32; 4]],
        groups: &[Group],
    ) -> Result<()> {
        grow(r, &mut self.targets, 4 * targets.len())?;
        grow(r, &mut self.groups, 2 * groups.len())?;
        r.upload(bytemuck::cast_slice(targets), &mut self.targets)?;
        r.upload(bytemuck::cast_slice(groups), &mut self.groups)
    }

    /// Copies `n` sources (x, y, z, m) for direct summation to the device.
    pub fn upload_sources(&mut self, r: &Runner, pos_mass: &[[f32; 4]]) -> Result<()> {
        let n = pos_mass.len();
        self.reserve(r, n, 0)?;
        self.reserve_results(r, n)?;
        r.upload(bytemuck::cast_slice(pos_mass), &mut self.particles)
    }

    /// Copies the results for `nt` targets back, in walk order.
    pub fn download(&self, r: &Runner, nt: usize) -> Result<WalkOutput> {
        let mut acc_pot = vec![[0f32; 4]; nt];
        r.download(&self.out, bytemuck::cast_slice_mut(&mut acc_pot))?;
        let mut counts = vec![0u32; 2 * nt];
        r.download(&self.counts, &mut counts)?;
        let (p2p, m2p) = counts.par_chunks_exact(2).map(|c| (c[0], c[1])).unzip();
        Ok(WalkOutput { acc_pot, p2p, m2p })
    }

    /// The results of `n` targets, in the particles' order from `input` (`unsort_results`),
    /// else in walk order, converted as they come down, with no host copy of them:
    /// accelerations (length/time²) and potentials (energy/mass) in float64, in `units`
    /// ([`WalkOutput::scaled`]), particle–particle counts without the target itself
    /// ([`WalkOutput::others`]) and particle–cell counts.
    pub fn download_forces(
        &self,
        r: &Runner,
        n: usize,
        units: Units,
        input: Option<&InputOrder>,
    ) -> Result<Forces> {
        let out = input.map_or(&self.out, |i| i.out);
        // Zeroed allocations: fresh pages, written once, by the threads that convert.
        let (mut acc, mut pot, mut p2p, mut m2p): Forces = (
            bytemuck::allocation::cast_vec(vec![[0.0f64; 3]; n]),
            vec![0.0; n],
            vec![0u32; n],
            vec![0u32; n],
        );
        {
            // Four floats per target: a piece of the copy holds a quarter as many targets.
            let per_piece = piece_len::<f32>() / 4;
            let (acc, pot) = (
                Pieces::new(&mut acc, per_piece),
                Pieces::new(&mut pot, per_piece),
            );
            r.download_with(out, 4 * n, &|first, piece| {
                let (mut acc, mut pot) = (acc.share(first / 4), pot.share(first / 4));
                let results = bytemuck::cast_slice::<f32, [f32; 4]>(piece);
                for ((a, p), f) in acc.iter_mut().zip(pot.iter_mut()).zip(results) {
                    (*a, *p) = WalkOutput::scaled(f, units);
                }
            })?;
        }
        match input {
            Some(i) => take_counts(r, i.counts, n, &mut p2p, &mut m2p)?,
            None => take_counts(r, &self.counts, n, &mut p2p, &mut m2p)?,
        }
        Ok((acc, pot, p2p, m2p))
    }
}

/// The list kernel's room for one walk: its per-warp stacks of cell indices and the children
/// of every cell, 8 slots per cell.
pub(super) struct ListRoom {
    pub stacks: RunnerArray<u32>,
    pub children: RunnerArray<u32>,
}

impl ListRoom {
    /// Empty stacks and lists on `r`'s device.
    fn new(r: &Runner) -> Result<Self> {
        Ok(Self {
            stacks: r.alloc(1)?,
            children: r.alloc(1)?,
        })
    }

    /// Words held on the device.
    fn words(&self) -> usize {
        self.stacks.len() + self.children.len()
    }

    /// Grows the stacks to `stack_len` cell indices and the child lists to `nc` cells.
    pub fn prepare(&mut self, r: &Runner, stack_len: usize, nc: usize) -> Result<()> {
        if self.stacks.len() < stack_len {
            // Exactly `stack_len`: the stacks depend on the GPU's resident warps, not on N.
            self.stacks = r.alloc(1)?;
            self.stacks = r.alloc(stack_len)?;
        }
        grow(r, &mut self.children, 8 * nc)
    }
}

/// The (p2p, m2p) counts of `n` targets in `counts` (a pair of u32 per target, in an array of
/// u32, or in the room of an array of 4-byte floats: [`InputOrder::counts`]) brought down into `p2p` (without the target itself,
/// [`WalkOutput::others`]) and `m2p`, converted piece by piece as they arrive.
fn take_counts<C: Element>(
    r: &Runner,
    counts: &RunnerArray<C>,
    n: usize,
    p2p: &mut [u32],
    m2p: &mut [u32],
) -> Result<()> {
    let per_element = std::mem::size_of::<C>() / 4;
    let per_piece = piece_len::<C>() * per_element / 2;
    let (p2p, m2p) = (Pieces::new(p2p, per_piece), Pieces::new(m2p, per_piece));
    r.download_with(counts, 2 * n / per_element, &|first, piece| {
        let at = first * per_element / 2;
        let (mut p2p, mut m2p) = (p2p.share(at), m2p.share(at));
        let pairs = bytemuck::cast_slice::<C, [u32; 2]>(piece);
        for ((p, m), c) in p2p.iter_mut().zip(m2p.iter_mut()).zip(pairs) {
            (*p, *m) = (WalkOutput::others(c[0]), c[1]);
        }
    })
}
