//! The walk on the GPU (`cuda/walk_list.cu`, `cuda/walk.cu`): the walk program compiled for a
//! (V, G) layout, its device buffers (kept across evaluations, grown and never shrunk), the
//! launches of the walk over a tree that lies on the device (built there, a forest of LETs
//! unpacked there, or a host tree copied up), the results moved to the particles' order, and
//! their conversion on the way down.

mod buffers;
mod layout;

pub use layout::{GpuLayout, VgChoice, WalkKernel};

use super::cpu::{Forces, Units, WalkOutput, WalkParams};
use super::groups::Group;
use super::groups_gpu::DeviceGroups;
use super::mac::Mac;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::gpu::args::{
    ClearArgs, DirectArgs, KernelArgs, LinkArgs, MaskArgs, PeriodicGroupsArgs, Results, TreeArrays,
    UnsortArgs, WalkArgs,
};
use crate::gpu::launch::{DeviceArray, KernelRunner};
use crate::gpu::runner::Runner;
use crate::gpu::GpuContext;
use crate::tree::{Tree, MAX_LEVEL};
use buffers::Buffers;
use std::time::Instant;

/// Threads per block of the walk kernels (their `__launch_bounds__`).
const BLOCK: u32 = 128;

/// Stack entries per tree level of the list kernel: its batched depth-first stack holds at most
/// 8 children of 32 popped cells per level (cuda/walk_list.cu).
const LIST_STACK_PER_LEVEL: usize = 8 * 32;

/// Stack entries per warp of the list kernel: every level below a root, plus one batch.
const LIST_STACK: usize = LIST_STACK_PER_LEVEL * (MAX_LEVEL as usize + 1) + 32;

/// Which of a walked tree's particles the targets are, so that each target's sums leave out
/// only itself (the walk kernels' `own_kind` and `own`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceOwn {
    /// None of them: the tree does not hold the targets (a forest of LETs).
    Absent,
    /// Target `t` is the tree's sorted particle `t` (targets in the tree's order).
    Sorted,
    /// Target `t` is the tree's sorted particle `own[t]`, at this device address (u32 each).
    At(u64),
}

impl DeviceOwn {
    /// The walk kernels' `own_kind` and `own`.
    fn args(self) -> (i32, u64) {
        match self {
            DeviceOwn::Absent => (0, 0),
            DeviceOwn::Sorted => (1, 0),
            DeviceOwn::At(own) => (2, own),
        }
    }
}

/// The GPU walk: its program, layout and buffers.
pub struct GpuWalk {
    /// The walk program compiled for `layout`.
    program: Runner,
    kernel: WalkKernel,
    layout: GpuLayout,
    /// Blocks of the list kernel resident on the whole device at once (its persistent grid),
    /// with open boundaries and in a periodic box.
    list_blocks: u32,
    periodic_list_blocks: u32,
    buffers: Buffers,
}

impl GpuWalk {
    /// The walk with `kernel` in `layout` on the device of `ctx`.
    pub fn new(ctx: &GpuContext, kernel: WalkKernel, layout: GpuLayout) -> Result<Self> {
        layout.validate_for(kernel)?;
        let program = ctx.walk_program(layout.v, layout.g)?;
        Ok(Self {
            list_blocks: program.resident_blocks("walk_list", BLOCK)?,
            periodic_list_blocks: program.resident_blocks("walk_list_periodic", BLOCK)?,
            buffers: Buffers::new(&program)?,
            program,
            kernel,
            layout,
        })
    }

    /// Recompiles the kernels for another (V, G) layout.
    pub fn set_layout(&mut self, ctx: &GpuContext, layout: GpuLayout) -> Result<()> {
        layout.validate_for(self.kernel)?;
        if layout != self.layout {
            self.program = ctx.walk_program(layout.v, layout.g)?;
            self.layout = layout;
        }
        Ok(())
    }

    /// The walk kernel in use.
    pub fn kernel(&self) -> WalkKernel {
        self.kernel
    }

    /// The (V, G) layout the kernel was compiled for.
    pub fn layout(&self) -> GpuLayout {
        self.layout
    }

    /// Device bytes held by the walk's buffers.
    pub fn device_bytes(&self) -> usize {
        self.buffers.bytes()
    }

    /// Launches walk-program kernel `name` with its argument block.
    fn launch<A: KernelArgs>(&self, name: &str, grid: u32, block: u32, args: &A) -> Result<()> {
        // SAFETY: every call passes the argument block of the kernel's declaration in cuda/,
        // with buffers sized by `Buffers`' reserve functions for the targets and cells it covers.
        unsafe { self.program.launch(name, grid, block, args) }
    }

    /// The results in walk order.
    fn walk_results(&self) -> Results {
        Results {
            out: self.buffers.out.ptr(),
            counts: self.buffers.counts.ptr(),
        }
    }

    /// The results in the particles' order (after [`GpuWalk::unsort`]).
    fn input_results(&self) -> Results {
        Results {
            out: self.buffers.out_input.ptr(),
            counts: self.buffers.counts_input.ptr(),
        }
    }

    /// Copies a host tree to the device (the walk's tree buffers); returns where it is.
    pub fn upload_tree(&mut self, tree: &Tree) -> Result<TreeArrays> {
        self.buffers.upload_tree(&self.program, tree)
    }

    /// Room in the walk's tree buffers for a tree of `cells` cells and `particles` particles
    /// that kernels of the stage program write there (a forest of LETs); returns where it is.
    pub fn reserve_tree(&mut self, cells: usize, particles: usize) -> Result<TreeArrays> {
        self.buffers.reserve_tree(&self.program, cells, particles)
    }

    /// Copies host targets (x, y, z, |a_old|) and their groups to the device; returns where
    /// they are.
    pub fn upload_targets(
        &mut self,
        targets: &[[f32; 4]],
        groups: &[Group],
    ) -> Result<(u64, DeviceGroups)> {
        if groups.iter().any(|g| g[1] as usize > self.layout.group()) {
            return Err(Error::input(format!(
                "a target group is larger than V*G = {}",
                self.layout.group()
            )));
        }
        self.buffers
            .upload_targets(&self.program, targets, groups)?;
        Ok((
            self.buffers.targets.ptr(),
            DeviceGroups {
                at: self.buffers.groups.ptr(),
                count: groups.len(),
            },
        ))
    }

    /// Grows the result arrays to `n` targets.
    pub fn reserve_results(&mut self, n: usize) -> Result<()> {
        self.buffers.reserve_results(&self.program, n)
    }

    /// Sets the results of the first `n` targets to zero (those of groups a walk leaves out).
    pub fn clear_results(&mut self, n: usize) -> Result<()> {
        self.reserve_results(n)?;
        self.launch(
            "clear_results",
            (n as u32).div_ceil(256).clamp(1, 1 << 16),
            256,
            &ClearArgs {
                n: n as i32,
                results: self.walk_results(),
            },
        )
    }

    /// Zeroes the results of the `n` particles not flagged in `active` (device address, one
    /// byte per particle), in the particles' order after [`GpuWalk::unsort`] when
    /// `input_order`, else in walk order (which is then the particles' own).
    pub fn mask_inactive(&mut self, active: u64, n: usize, input_order: bool) -> Result<()> {
        let results = if input_order {
            self.input_results()
        } else {
            self.walk_results()
        };
        self.launch(
            "mask_inactive",
            (n as u32).div_ceil(256).clamp(1, 1 << 16),
            256,
            &MaskArgs {
                n: n as i32,
                active,
                results,
            },
        )
    }

    /// Device addresses of the results in walk order: (acceleration and potential, 4 floats;
    /// interaction counts p2p and m2p, 2 u32) per target.
    pub fn results(&self) -> (u64, u64) {
        let r = self.walk_results();
        (r.out, r.counts)
    }

    /// Device addresses of the results in the particles' order after [`GpuWalk::unsort`]:
    /// (acceleration and potential, 4 floats; interaction counts p2p and m2p, 2 u32) per
    /// particle.
    pub fn results_in_input_order(&self) -> (u64, u64) {
        let r = self.input_results();
        (r.out, r.counts)
    }

    /// The groups of a periodic walk: `groups` of the `nt` targets at device address
    /// `targets` cut into consecutive pieces whose targets' half-extent is at most
    /// [`MAX_GROUP_HALF`](crate::walk::ewald::MAX_GROUP_HALF) per axis (or one target), in
    /// any order (`periodic_groups` in `cuda/walk.cu`).
    fn periodic_groups(
        &mut self,
        targets: u64,
        groups: DeviceGroups,
        nt: usize,
    ) -> Result<DeviceGroups> {
        self.buffers.prepare_pieces(&self.program, nt)?;
        if groups.count > 0 {
            self.launch(
                "periodic_groups",
                (groups.count as u32).div_ceil(BLOCK),
                BLOCK,
                &PeriodicGroupsArgs {
                    targets,
                    groups: groups.at,
                    n_groups: groups.count as i32,
                    pieces: self.buffers.pieces.ptr(),
                    count: self.buffers.piece_count.ptr(),
                },
            )?;
        }
        Ok(DeviceGroups {
            at: self.buffers.pieces.ptr(),
            count: self.buffers.pieces(&self.program)?,
        })
    }

    /// Forces on `targets` (device address, `nt` targets of x, y, z, |a_old|), which are the
    /// tree's particles `own`, from the tree at `t` (`nc` cells), one group of G threads per
    /// group of `groups` (at most V·G targets each), into the results in walk order, written
    /// there, or added to what is there when `accumulate`. A periodic walk (`p.periodic`, the
    /// tree's frame the box) cuts the groups to its size first and adds the Ewald correction.
    /// Times `walk`.
    #[allow(clippy::too_many_arguments)]
    pub fn walk(
        &mut self,
        t: TreeArrays,
        nc: usize,
        targets: u64,
        nt: usize,
        own: DeviceOwn,
        groups: DeviceGroups,
        p: &WalkParams,
        accumulate: bool,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        self.reserve_results(nt)?;
        let t0 = Instant::now();
        let (groups, ewald) = match p.periodic {
            true => (
                self.periodic_groups(targets, groups, nt)?,
                self.buffers.ewald_table(&self.program)?,
            ),
            false => (groups, 0),
        };
        let list = self.kernel == WalkKernel::List;
        let ngroups = groups.count;
        let blocks = if list {
            // Persistent warps, each with its stack, taking groups until none is left.
            let resident = match p.periodic {
                true => self.periodic_list_blocks,
                false => self.list_blocks,
            };
            let blocks = resident.min((ngroups as u32).div_ceil(BLOCK / 32));
            self.buffers.prepare_list(
                &self.program,
                blocks as usize * (BLOCK / 32) as usize * LIST_STACK,
                nc,
            )?;
            self.launch(
                "link_children",
                (nc as u32).div_ceil(BLOCK).max(1),
                BLOCK,
                &LinkArgs {
                    tree: t,
                    n_cells: nc as i32,
                    children: self.buffers.children.ptr(),
                },
            )?;
            blocks
        } else {
            (ngroups as u32 * self.layout.g).div_ceil(BLOCK)
        };
        let b = &self.buffers;
        let (own_kind, own) = own.args();
        let args = WalkArgs {
            tree: t,
            n_cells: nc as i32,
            children: b.children.ptr(),
            targets,
            n_targets: nt as i32,
            own_kind,
            own,
            groups: groups.at,
            n_groups: ngroups as i32,
            eps2: p.eps2,
            quadrupole: p.quadrupole as i32,
            accel_mac: (p.criterion.mac == Mac::Acceleration) as i32,
            alpha: p.criterion.alpha,
            grav: p.criterion.g,
            ewald,
            out: b.out.ptr(),
            counts: b.counts.ptr(),
            accumulate: accumulate as i32,
            control: b.control.ptr(),
            stacks: b.stacks.ptr(),
            stack_cap: LIST_STACK as i32,
        };
        if ngroups > 0 {
            let name = match (list, p.periodic) {
                (true, false) => "walk_list",
                (true, true) => "walk_list_periodic",
                (false, false) => "walk_vg",
                (false, true) => "walk_vg_periodic",
            };
            self.launch(name, blocks.max(1), BLOCK, &args)?;
        }
        self.program.synchronize()?;
        times.add("walk", t0.elapsed().as_secs_f64());
        if list && ngroups > 0 && self.buffers.list_overflowed(&self.program)? {
            return Err(Error::device(format!(
                "the list kernel's stack overflowed: a tree deeper than {} levels",
                MAX_LEVEL as usize + 1
            )));
        }
        Ok(())
    }

    /// Moves the results of the `n` targets to the particles' order (`order`: device address
    /// of each target's particle index, a permutation of `0..n`). Times `download`.
    pub fn unsort(&mut self, order: u64, n: usize, times: &mut PhaseTimes) -> Result<()> {
        let t0 = Instant::now();
        self.buffers.reserve_input_order(&self.program, n)?;
        self.launch(
            "unsort_results",
            (n as u32).div_ceil(256).clamp(1, 1 << 16),
            256,
            &UnsortArgs {
                walk: self.walk_results(),
                order,
                n: n as i32,
                input: self.input_results(),
            },
        )?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// The raw results of `n` targets (G = 1, counts with the target itself), in the particles'
    /// order after [`GpuWalk::unsort`] when `input_order`, else in walk order.
    pub fn download(&self, n: usize, input_order: bool) -> Result<WalkOutput> {
        self.buffers.download(&self.program, n, input_order)
    }

    /// The results of `n` targets, converted while they come down with no host copy of them:
    /// accelerations (length/time²) and potentials (energy/mass) in float64 in `units` (the
    /// walked tree's frame and the gravitational constant), particle–particle counts without
    /// the target itself and particle–cell counts; in the particles' order after [`GpuWalk::unsort`] when
    /// `input_order`, else in walk order. Times `download`.
    pub fn download_forces(
        &mut self,
        n: usize,
        units: Units,
        input_order: bool,
        times: &mut PhaseTimes,
    ) -> Result<Forces> {
        let t0 = Instant::now();
        let forces = self
            .buffers
            .download_forces(&self.program, n, units, input_order)?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(forces)
    }

    /// Forces on `targets` (x, y, z, |a_old|, walk order; the tree's particles in its order
    /// when `sorted`, else none of them) from a host `tree`, by the groups `groups` (at most
    /// V·G targets each): everything copied up, walked, and the raw results (G = 1) copied
    /// down in walk order. It equals [`grouped_walk`](crate::walk::cpu::grouped_walk) on the
    /// same groups up to float32 rounding. Times `upload`, `walk` and `download`.
    pub fn walk_host(
        &mut self,
        tree: &Tree,
        targets: &[[f32; 4]],
        sorted: bool,
        groups: &[Group],
        p: &WalkParams,
        times: &mut PhaseTimes,
    ) -> Result<WalkOutput> {
        let t0 = Instant::now();
        let t = self.upload_tree(tree)?;
        let (at, groups) = self.upload_targets(targets, groups)?;
        times.add("upload", t0.elapsed().as_secs_f64());
        let own = match sorted {
            true => DeviceOwn::Sorted,
            false => DeviceOwn::Absent,
        };
        self.walk(
            t,
            tree.cells.len(),
            at,
            targets.len(),
            own,
            groups,
            p,
            false,
            times,
        )?;
        let t0 = Instant::now();
        let out = self.download(targets.len(), false)?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
    }

    /// Forces on every particle of `pos_mass` (x, y, z, m) from all the others (by index: a
    /// coincident one counts) by direct summation in float32 on the GPU (`cuda/direct.cu`),
    /// G = 1. Times `upload`, `walk` and `download`.
    pub fn direct(
        &mut self,
        pos_mass: &[[f32; 4]],
        eps2: f32,
        times: &mut PhaseTimes,
    ) -> Result<Vec<[f32; 4]>> {
        const BLOCK: u32 = 256; // DIRECT_BLOCK * DIRECT_I targets per block (cuda/direct.cu)
        const PER_BLOCK: u32 = 2 * BLOCK;
        let n = pos_mass.len();
        let t0 = Instant::now();
        self.buffers.upload_sources(&self.program, pos_mass)?;
        times.add("upload", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let b = &self.buffers;
        self.launch(
            "direct",
            (n as u32).div_ceil(PER_BLOCK).max(1),
            BLOCK,
            &DirectArgs {
                pos_mass: b.particles.ptr(),
                n: n as i32,
                eps2,
                out: b.out.ptr(),
            },
        )?;
        self.program.synchronize()?;
        times.add("walk", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let mut out = vec![[0f32; 4]; n];
        self.program
            .download(&b.out, bytemuck::cast_slice_mut(&mut out))?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
