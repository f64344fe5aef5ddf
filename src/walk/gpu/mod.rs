//! The walk on the GPU (`cuda/walk_list.cu`, `cuda/walk.cu`): the walk program compiled for a
//! (V, G) layout, its device buffers (kept across evaluations, grown and never shrunk), the
//! launches of the walk over a tree that lies on the device (built there, a forest of LETs
//! unpacked there, or a host tree copied up), the results moved to the particles' order, and
//! their conversion on the way down.

mod buffers;
mod layout;

pub use layout::{GpuLayout, VgChoice, WalkKernel, PERIODIC_LAYOUT};

use super::cpu::{Forces, Units, WalkOutput, WalkParams};
use super::groups::Group;
use super::groups_gpu::DeviceGroups;
use super::mac::Mac;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::gpu::args::{
    AddArgs, ClearArgs, DirectArgs, KernelArgs, LinkArgs, MaskArgs, PeriodicGroupsArgs, Results,
    TreeArrays, UnsortArgs, WalkArgs,
};
use crate::gpu::launch::{DeviceArray, KernelRunner};
use crate::gpu::runner::{Mark, Runner, RunnerArray};
use crate::gpu::GpuContext;
use crate::tree::{Tree, MAX_LEVEL};
use buffers::Buffers;
use std::time::Instant;

/// Threads per block of the walk kernels (their `__launch_bounds__`).
const BLOCK: u32 = 128;

/// Stack entries per tree level of the list kernel: its batched depth-first stack holds at most
/// 8 children of 32 popped cells per level (cuda/walk_list.cu).
const LIST_STACK_PER_LEVEL: usize = 8 * 32;

/// Stack entries per warp of the list kernel for a tree whose pseudo cells add `extra` levels
/// (a merged tree's; 0 for any other): every level below a root, plus one batch.
fn list_stack(extra: usize) -> usize {
    LIST_STACK_PER_LEVEL * (MAX_LEVEL as usize + 1 + extra) + 32
}

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
    /// The walk program on a stream of its own, for walks beside the stage program's kernels
    /// (made at the first).
    side: Option<Runner>,
    /// A walk [`GpuWalk::begin`] left running.
    pending: Option<Launched>,
    /// A forest's walk [`GpuWalk::walk_forest`] queued behind it or alongside it.
    pending_forest: Option<Launched>,
    /// Whether a forest's walk runs alongside a local walk still running, into arrays of its
    /// own ([`GpuWalk::set_alongside`]), rather than queued behind it.
    alongside: bool,
    /// Room lent for the counts in walk order ([`GpuWalk::lend_counts`]): its device address
    /// and the targets it holds.
    lent_counts: Option<(u64, usize)>,
}

/// A launched walk: whether it is a list kernel's (whose stacks are checked after it, through
/// the control words of `mode`), the groups it walked (a periodic walk's pieces), and where it
/// was launched beside the stage program's kernels, the marks of its start and end on its
/// stream with the (host) time of its launch.
struct Launched {
    list: bool,
    mode: Mode,
    groups: DeviceGroups,
    timed: Option<(Mark, Mark, Instant)>,
}

/// Where a walk runs and where its results go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// On the program's stream, into the results in walk order: written, or added to what is
    /// there (`accumulate`).
    Here { accumulate: bool },
    /// A local tree's walk on the side stream, which follows the program's; results written.
    Beside,
    /// A forest's walk on the program's stream queued behind a `Beside` walk still running
    /// (the program's stream follows the side one), its results added to that walk's; its
    /// list kernel counts its groups in control words of its own.
    After,
    /// A forest's walk (list kernel) on the program's stream alongside a `Beside` walk still
    /// running, whose SMs its blocks take as that walk's warps run out of groups: its results
    /// written into arrays of its own, with stacks, child lists and control words of its own,
    /// and added to that walk's once both are done ([`GpuWalk::end`]).
    Alongside,
}

impl Mode {
    /// A forest's walk behind or alongside a local walk still running: it takes that walk's
    /// groups, and counts them in control words of its own.
    fn forest(self) -> bool {
        matches!(self, Mode::After | Mode::Alongside)
    }
}

/// Where a walk's results are in the particles' order after [`GpuWalk::unsort`]: 4 floats
/// (acceleration and potential) per particle in a room lent by an owner that no longer needs
/// it (the tree builder's frame,
/// [`TreeBuilder::spare_rooms`](crate::tree::build_gpu::TreeBuilder::spare_rooms)), and the
/// (p2p, m2p) counts, two u32 per particle, in the first half of the walk's own result array
/// (free once the results left it), so that the walk holds no second copy of its results.
pub struct InputOrder<'a> {
    /// (ax, ay, az, potential) per particle, float32.
    pub out: &'a RunnerArray<f32>,
    /// (p2p, m2p) per particle: u32 words 2i and 2i + 1 of this float array's room.
    pub counts: &'a RunnerArray<f32>,
}

impl InputOrder<'_> {
    /// The arrays as the kernels take them.
    fn results(&self) -> Results {
        Results {
            out: self.out.ptr(),
            counts: self.counts.ptr(),
        }
    }
}

/// One walk on the device: a tree, the targets and their groups.
#[derive(Clone, Copy, Debug)]
pub struct TreeWalk {
    /// The tree's arrays on the device.
    pub tree: TreeArrays,
    /// Its cells.
    pub cells: usize,
    /// Device address of the targets (x, y, z, |a_old| each, float32, in the tree's frame).
    pub targets: u64,
    /// The number of targets.
    pub n_targets: usize,
    /// Which of the tree's particles the targets are.
    pub own: DeviceOwn,
    /// The groups that walk (at most V·G targets each).
    pub groups: DeviceGroups,
    /// Where its cells' lists of children are in place already ([`GpuWalk::link`]: a merged
    /// tree, whose merged cells' lists do not follow from preorder), the levels that its
    /// pseudo cells add to the deepest tree level; `None`: the walk makes the lists.
    pub linked: Option<usize>,
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
            side: None,
            pending: None,
            pending_forest: None,
            alongside: false,
            lent_counts: None,
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
            self.side = None;
            self.layout = layout;
        }
        Ok(())
    }

    /// Walks a forest alongside a local walk still running, into results, stacks and child
    /// lists of its own (about 24 bytes a target, and as many stacks as the local walk's),
    /// where `alongside` (a plan that keeps every array, with room for these); else queued
    /// behind it ([`GpuWalk::walk_forest`]). The sums are the same bit for bit.
    pub fn set_alongside(&mut self, alongside: bool) {
        self.alongside = alongside;
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

    /// The results in walk order (the counts in the room lent for them, if any).
    fn walk_results(&self) -> Results {
        Results {
            out: self.buffers.out.ptr(),
            counts: self
                .lent_counts
                .map_or_else(|| self.buffers.counts.ptr(), |(at, _)| at),
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

    /// Lends the walks that follow a room for their counts in walk order (two u32 per
    /// target; `room`: its device address and the targets it holds), or takes it back
    /// (`None`: the walk's own array): the tree's second key buffer, idle from the end of a
    /// build to the next, so that a walk whose results move to the particles' order
    /// ([`GpuWalk::unsort`]) holds no array of counts of its own.
    pub fn lend_counts(&mut self, room: Option<(u64, usize)>) {
        self.lent_counts = room;
    }

    /// Grows the result arrays to `n` targets (the counts' too, unless a room is lent for them).
    pub fn reserve_results(&mut self, n: usize) -> Result<()> {
        match self.lent_counts {
            Some((_, room)) if room < n => Err(Error::device(format!(
                "room for the counts of {room} targets lent to a walk of {n}"
            ))),
            Some(_) => self.buffers.reserve_out(&self.program, n),
            None => self.buffers.reserve_results(&self.program, n),
        }
    }

    /// Releases the results in walk order and the walk's per-cell lists (the next walk makes
    /// them anew): once the results are read or moved to the particles' order, when memory is
    /// short.
    pub fn release_results(&mut self) -> Result<()> {
        self.buffers.release_results(&self.program)
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
    /// byte per particle): in the particles' order `input` after [`GpuWalk::unsort`], else in
    /// walk order (which is then the particles' own).
    pub fn mask_inactive(&self, active: u64, n: usize, input: Option<&InputOrder>) -> Result<()> {
        let results = input.map_or_else(|| self.walk_results(), InputOrder::results);
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

    /// Forces on `w`'s targets, which are its tree's particles `w.own`, from its tree, one
    /// group of G threads per group of `w.groups`, into the results in walk order, written
    /// there, or added to what is there when `accumulate`. A periodic walk (`p.periodic`, the
    /// tree's frame the box) cuts the groups to its size first and adds the Ewald correction.
    /// Times `walk`.
    pub fn walk(
        &mut self,
        w: &TreeWalk,
        p: &WalkParams,
        accumulate: bool,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        let t0 = Instant::now();
        let launched = self.launch_walk(w, p, Mode::Here { accumulate })?;
        self.program.synchronize()?;
        times.add("walk", t0.elapsed().as_secs_f64());
        self.check_stacks(&launched)
    }

    /// [`GpuWalk::walk`] of a local tree (written, not added) launched on a stream of its own
    /// and left running, so that the host goes on and the stage program's kernels (the LET
    /// export) run beside it where it leaves room (its persistent grid holds every SM until
    /// its warps run out of groups, so mostly in its tail); [`GpuWalk::end`] waits for it.
    /// Times `walk` (the launch).
    pub fn begin(&mut self, w: &TreeWalk, p: &WalkParams, times: &mut PhaseTimes) -> Result<()> {
        if self.pending.is_some() {
            return Err(Error::device("a walk begun while the last one runs"));
        }
        let t0 = Instant::now();
        self.pending = Some(self.launch_walk(w, p, Mode::Beside)?);
        times.add("walk", t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// The walk of a forest (the received LETs) `w` for the targets of the local walk, its
    /// results added to that walk's. Where [`GpuWalk::begin`] left the local walk running, it
    /// is launched on the device without a round trip through the host, and
    /// [`GpuWalk::end`] waits for both: alongside the local walk, whose SMs it takes as they
    /// free up in its tail, into arrays of its own added at the end (the list kernel, where
    /// [`GpuWalk::set_alongside`] allows it), else queued behind it (the program's stream
    /// follows the side one). Otherwise it is walked here ([`GpuWalk::walk`]). Times `walk`
    /// (the launch, or the walk).
    pub fn walk_forest(
        &mut self,
        w: &TreeWalk,
        p: &WalkParams,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        let Some(side) = self.pending.as_ref().and(self.side.as_ref()) else {
            return self.walk(w, p, true, times);
        };
        if self.pending_forest.is_some() {
            return Err(Error::device("a forest walked twice behind one local walk"));
        }
        let t0 = Instant::now();
        let mode = match self.alongside && self.kernel == WalkKernel::List {
            true => Mode::Alongside,
            false => Mode::After,
        };
        // Its control words cleared first: an upload waits for the program's stream, which
        // then (queued behind) waits for the local walk.
        self.buffers.clear_control(&self.program, true)?;
        if mode == Mode::After {
            self.program.follow(side)?;
        }
        self.pending_forest = Some(self.launch_walk(w, p, mode)?);
        times.add("walk", t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// Waits for the walk [`GpuWalk::begin`] left running (none: returns at once), and for a
    /// forest's behind or alongside it ([`GpuWalk::walk_forest`]), whose results alongside
    /// are then added to the local walk's; the stage program's later work follows them.
    /// Returns when the local walk ended on the host's clock (its launch and its time on the
    /// device; `None` where nothing was launched). Times `walk` (the wait for the local walk)
    /// and `walk_let` (the further wait for the forest's and the addition).
    pub fn end(&mut self, times: &mut PhaseTimes) -> Result<Option<Instant>> {
        let forest = self.pending_forest.take();
        let Some(launched) = self.pending.take() else {
            return Ok(None);
        };
        let t0 = Instant::now();
        if let Some(side) = &self.side {
            side.synchronize()?;
        }
        times.add("walk", t0.elapsed().as_secs_f64());
        if let Some(forest) = forest {
            // The stacks are checked through the program's stream, which holds the forest.
            let t0 = Instant::now();
            if forest.mode == Mode::Alongside {
                // Behind the forest on its stream, and after the local walk, waited for above.
                self.add_alongside(forest.groups)?;
            }
            self.program.synchronize()?;
            times.add("walk_let", t0.elapsed().as_secs_f64());
            self.check_stacks(&forest)?;
        }
        self.check_stacks(&launched)?;
        launched
            .timed
            .map(|(start, end, launched)| start.passed_later(launched, &end))
            .transpose()
    }

    /// The results of a forest walked alongside the local walk added to the local walk's, for
    /// the targets of `groups` (those it walked).
    fn add_alongside(&self, groups: DeviceGroups) -> Result<()> {
        if groups.count == 0 {
            return Ok(());
        }
        const WARPS: u32 = 256 / 32;
        let b = &self.buffers;
        self.launch(
            "add_results",
            (groups.count as u32).div_ceil(WARPS).min(1 << 16),
            256,
            &AddArgs {
                groups: groups.at,
                n_groups: groups.count as i32,
                from: Results {
                    out: b.alongside_out.ptr(),
                    counts: b.alongside_counts.ptr(),
                },
                to: self.walk_results(),
            },
        )
    }

    /// The list kernel's lists of children of the cells `first..cells` of `tree` (8 slots a
    /// cell, grown to `cells` cells), made on the device; returns their device address, where
    /// a merged tree's merged cells then put theirs ([`TreeWalk::linked`]).
    pub fn link(&mut self, tree: TreeArrays, first: usize, cells: usize) -> Result<u64> {
        self.link_into(false, tree, first, cells)
    }

    /// [`GpuWalk::link`] into the lists of a walk alongside another (`alongside`: its own).
    fn link_into(
        &mut self,
        alongside: bool,
        tree: TreeArrays,
        first: usize,
        cells: usize,
    ) -> Result<u64> {
        self.buffers
            .list_room(alongside)
            .prepare(&self.program, 0, cells)?;
        let children = self.buffers.list_room(alongside).children.ptr();
        if cells > first {
            self.launch(
                "link_children",
                ((cells - first) as u32).div_ceil(BLOCK),
                BLOCK,
                &LinkArgs {
                    tree,
                    first_cell: first as i32,
                    n_cells: cells as i32,
                    children,
                },
            )?;
        }
        Ok(children)
    }

    /// Launches `w` with `p` (after the periodic groups and the list kernel's children, on the
    /// program's stream) as `mode` says: on the program's stream, or beside on a stream of its
    /// own that follows it (timed).
    fn launch_walk(&mut self, w: &TreeWalk, p: &WalkParams, mode: Mode) -> Result<Launched> {
        let (forest, alongside) = (mode.forest(), mode == Mode::Alongside);
        self.reserve_results(w.n_targets)?;
        if alongside {
            self.buffers.reserve_alongside(&self.program, w.n_targets)?;
        }
        let ewald = match p.periodic {
            true => self.buffers.ewald_table(&self.program)?,
            false => 0,
        };
        let groups = match (&self.pending, p.periodic) {
            // The groups of the local walk a forest's is queued behind or alongside: the same
            // targets, and the periodic pieces already cut.
            (Some(local), _) if forest => local.groups,
            (_, true) => self.periodic_groups(w.targets, w.groups, w.n_targets)?,
            (_, false) => w.groups,
        };
        let list = self.kernel == WalkKernel::List;
        let ngroups = groups.count;
        let stack = list_stack(w.linked.unwrap_or(0));
        let blocks = if list {
            // Persistent warps, each with its stack, taking groups until none is left.
            let resident = match p.periodic {
                true => self.periodic_list_blocks,
                false => self.list_blocks,
            };
            let blocks = resident.min((ngroups as u32).div_ceil(BLOCK / 32));
            if !forest {
                self.buffers.clear_control(&self.program, false)?;
            }
            self.buffers.list_room(alongside).prepare(
                &self.program,
                blocks as usize * (BLOCK / 32) as usize * stack,
                w.cells,
            )?;
            if w.linked.is_none() {
                self.link_into(alongside, w.tree, 0, w.cells)?;
            }
            blocks
        } else {
            (ngroups as u32 * self.layout.g).div_ceil(BLOCK)
        };
        let b = &self.buffers;
        let results = match alongside {
            true => Results {
                out: b.alongside_out.ptr(),
                counts: b.alongside_counts.ptr(),
            },
            false => self.walk_results(),
        };
        let accumulate = match mode {
            Mode::Here { accumulate } => accumulate,
            Mode::Beside | Mode::Alongside => false,
            Mode::After => true,
        };
        let room = match alongside {
            true => &b.alongside_list,
            false => &b.list,
        };
        let (own_kind, own) = w.own.args();
        let args = WalkArgs {
            tree: w.tree,
            n_cells: w.cells as i32,
            children: room.children.ptr(),
            targets: w.targets,
            n_targets: w.n_targets as i32,
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
            out: results.out,
            counts: results.counts,
            accumulate: accumulate as i32,
            control: b.control(forest).ptr(),
            stacks: room.stacks.ptr(),
            stack_cap: stack as i32,
        };
        if ngroups == 0 {
            return Ok(Launched {
                list: false,
                mode,
                groups,
                timed: None,
            });
        }
        let name = match (list, p.periodic) {
            (true, false) => "walk_list",
            (true, true) => "walk_list_periodic",
            (false, false) => "walk_vg",
            (false, true) => "walk_vg_periodic",
        };
        let beside = mode == Mode::Beside;
        let runner = match beside {
            true => {
                if self.side.is_none() {
                    self.side = Some(self.program.fork()?);
                }
                let side = self.side.as_ref().expect("forked above");
                side.follow(&self.program)?;
                side
            }
            false => &self.program,
        };
        let start = beside.then(|| runner.mark()).transpose()?;
        let launched = Instant::now();
        // SAFETY: the walk kernels' argument block, with buffers reserved above for the
        // targets, groups and cells it covers.
        unsafe { runner.launch(name, blocks.max(1), BLOCK, &args) }?;
        let timed = match start {
            Some(start) => Some((start, runner.mark()?, launched)),
            None => None,
        };
        Ok(Launched {
            list,
            mode,
            groups,
            timed,
        })
    }

    /// After `launched` is done: an error where it was a list kernel's whose stack overflowed.
    fn check_stacks(&self, launched: &Launched) -> Result<()> {
        if launched.list
            && self
                .buffers
                .list_overflowed(&self.program, launched.mode.forest())?
        {
            return Err(Error::device(format!(
                "the list kernel's stack overflowed: a tree deeper than {} levels",
                MAX_LEVEL as usize + 1
            )));
        }
        Ok(())
    }

    /// Moves the results of the `n` targets to the particles' order (`order`: device address
    /// of each target's particle index, a permutation of `0..n`): the accelerations and
    /// potentials into `room` (4 floats per particle), then the counts into the first half of
    /// the walk's own result array, which the results left ([`InputOrder`]). Times `download`.
    pub fn unsort<'a>(
        &'a self,
        order: u64,
        n: usize,
        room: &'a RunnerArray<f32>,
        times: &mut PhaseTimes,
    ) -> Result<InputOrder<'a>> {
        let t0 = Instant::now();
        if room.len() < 4 * n || self.buffers.out.len() < 4 * n {
            return Err(Error::device(format!(
                "room for the results of {} particles in their order, not {n}",
                room.len().min(self.buffers.out.len()) / 4
            )));
        }
        let input = InputOrder {
            out: room,
            counts: &self.buffers.out,
        };
        let walk = self.walk_results();
        let blocks = (n as u32).div_ceil(256).clamp(1, 1 << 16);
        for (walk, input) in [
            (
                Results { counts: 0, ..walk },
                Results {
                    counts: 0,
                    ..input.results()
                },
            ),
            (
                Results { out: 0, ..walk },
                Results {
                    out: 0,
                    ..input.results()
                },
            ),
        ] {
            self.launch(
                "unsort_results",
                blocks,
                256,
                &UnsortArgs {
                    walk,
                    order,
                    n: n as i32,
                    input,
                },
            )?;
        }
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(input)
    }

    /// The raw results of `n` targets (G = 1, counts with the target itself), in walk order.
    pub fn download(&self, n: usize) -> Result<WalkOutput> {
        self.buffers.download(&self.program, n)
    }

    /// The results of `n` targets, converted while they come down with no host copy of them:
    /// accelerations (length/time²) and potentials (energy/mass) in float64 in `units` (the
    /// walked tree's frame and the gravitational constant), particle–particle counts without
    /// the target itself and particle–cell counts; in the particles' order from `input` after
    /// [`GpuWalk::unsort`], else in walk order. Times `download`.
    pub fn download_forces(
        &self,
        n: usize,
        units: Units,
        input: Option<&InputOrder>,
        times: &mut PhaseTimes,
    ) -> Result<Forces> {
        if input.is_none() && self.lent_counts.is_some() {
            return Err(Error::device(
                "the counts of a walk in a lent room come down in the particles' order only",
            ));
        }
        let t0 = Instant::now();
        let forces = self
            .buffers
            .download_forces(&self.program, n, units, input)?;
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
        self.lent_counts = None;
        let t = self.upload_tree(tree)?;
        let (at, groups) = self.upload_targets(targets, groups)?;
        times.add("upload", t0.elapsed().as_secs_f64());
        let own = match sorted {
            true => DeviceOwn::Sorted,
            false => DeviceOwn::Absent,
        };
        let w = TreeWalk {
            tree: t,
            cells: tree.cells.len(),
            targets: at,
            n_targets: targets.len(),
            own,
            groups,
            linked: None,
        };
        self.walk(&w, p, false, times)?;
        let t0 = Instant::now();
        let out = self.download(targets.len())?;
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
        self.lent_counts = None;
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
