//! Opening the GPU of this rank, compiling the kernels, and launching the walk and the tree
//! build on it.

use super::buffers::{Buffers, TreeArrays};
use super::build::TreeBuilder;
use super::cuda_runner::{CudaDevice, CudaRunner};
#[cfg(hinoki_emulator)]
use super::emulator::Emulator;
use super::launch::{Arg, DeviceArray, KernelRunner};
use super::layout::{GpuLayout, WalkKernel};
use super::runner::Runner;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::tree::{Tree, TreeParams, MAX_LEVEL};
use crate::walk::cpu::{Forces, WalkOutput, WalkParams};
use crate::walk::groups::Group;
use crate::walk::mac::Mac;
use cudarc::driver::CudaContext;
use std::sync::Arc;
use std::time::Instant;

/// Threads per block of the walk kernels (their `__launch_bounds__`).
const BLOCK: u32 = 128;

/// Stack entries per tree level of the list kernel: its batched depth-first stack holds at most
/// 8 children of 32 popped cells per level (cuda/walk_list.cu).
const LIST_STACK_PER_LEVEL: usize = 8 * 32;

/// Stack entries per warp of the list kernel: every level below a root, plus one batch.
const LIST_STACK: usize = LIST_STACK_PER_LEVEL * (MAX_LEVEL as usize + 1) + 32;

/// Environment variable that makes [`Gpu::open`] open the CPU kernel emulator instead of a GPU
/// (for tests of the GPU code on machines without one; builds with the emulator only).
pub const EMULATOR_VARIABLE: &str = "HINOKI_GPU_EMULATOR";

/// The node-local rank (which GPU to take): from OpenMPI, Slurm, MPICH or PMIx, else 0.
pub fn local_rank() -> usize {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
    .unwrap_or(0)
}

/// Where the kernels run.
enum Host {
    /// A GPU, with its compute capability, e.g. "sm_90".
    Cuda {
        device: Arc<CudaDevice>,
        arch: &'static str,
    },
    /// The CPU kernel emulator.
    #[cfg(hinoki_emulator)]
    Emulated,
}

impl Host {
    /// The walk program (`cuda/gravity.cuh`, `walk.cu`, `walk_list.cu`, `direct.cu`) for
    /// `layout`.
    fn walk_program(&self, layout: GpuLayout) -> Result<Runner> {
        match self {
            Self::Cuda { device, arch } => CudaRunner::compile(
                device,
                arch,
                "hinoki.cu",
                &walk_source(),
                // Fast math: rsqrtf, flush-to-zero and approximate division; the walk's error
                // budget is set by the multipole expansion, orders of magnitude above this.
                true,
                vec![
                    format!("-DHINOKI_V={}", layout.v),
                    format!("-DHINOKI_G={}", layout.g),
                ],
            )
            .map(Runner::Cuda),
            #[cfg(hinoki_emulator)]
            Self::Emulated => Ok(Runner::Emulated(Emulator::for_layout(layout.v, layout.g))),
        }
    }

    /// The tree-build program (`cuda/build.cu`, then `cuda/groups.cu`), with IEEE arithmetic.
    fn build_program(&self) -> Result<Runner> {
        match self {
            Self::Cuda { device, arch } => CudaRunner::compile(
                device,
                arch,
                "build.cu",
                &[
                    include_str!("../../../cuda/build.cu"),
                    include_str!("../../../cuda/groups.cu"),
                ]
                .join("\n"),
                false,
                Vec::new(),
            )
            .map(Runner::Cuda),
            #[cfg(hinoki_emulator)]
            Self::Emulated => Ok(Runner::Emulated(Emulator::new())),
        }
    }
}

/// The walk program's source: `cuda/gravity.cuh`, then `cuda/walk.cu`, `cuda/walk_list.cu`,
/// `cuda/direct.cu` without their includes of it, and `cuda/unsort.cu` (NVRTC is given one
/// self-contained program).
fn walk_source() -> String {
    let include = "#include \"gravity.cuh\"";
    [
        include_str!("../../../cuda/gravity.cuh"),
        &include_str!("../../../cuda/walk.cu").replace(include, ""),
        &include_str!("../../../cuda/walk_list.cu").replace(include, ""),
        &include_str!("../../../cuda/direct.cu").replace(include, ""),
        include_str!("../../../cuda/unsort.cu"),
    ]
    .join("\n")
}

fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::device(format!("CUDA {what} failed: {e}"))
}

/// Names a host tree by where its arrays are (a tree keeps them while it lives).
fn tree_key(tree: &Tree) -> [usize; 4] {
    [
        tree.particles.as_ptr() as usize,
        tree.particles.len(),
        tree.cells.first.as_ptr() as usize,
        tree.cells.len(),
    ]
}

/// This rank's GPU with its compiled walk kernels, its tree builder and reusable buffers.
pub struct Gpu {
    host: Host,
    /// The walk program compiled for `layout`.
    walk: Runner,
    kernel: WalkKernel,
    layout: GpuLayout,
    /// Blocks of the list kernel resident on the whole device at once (its persistent grid).
    list_blocks: u32,
    buffers: Buffers,
    /// The tree builder (`cuda/build.cu`), compiled on first use.
    builder: Option<TreeBuilder<Runner>>,
    /// The host copy of the tree the builder holds on the device, as [`tree_key`] names it,
    /// while that copy is unchanged: walks of it read the builder's arrays instead of
    /// uploading the tree again.
    resident: Option<[usize; 4]>,
    /// The number of targets whose results the last walk given an order left on the device in
    /// input order, for [`Gpu::download_forces`].
    ordered: Option<usize>,
    /// Result vectors handed back ([`Gpu::recycle`]) for [`Gpu::download_forces`] to fill.
    spare: Forces,
    /// Human-readable device description, e.g. "NVIDIA H100 80GB HBM3 (GPU 0, sm_90)".
    pub name: String,
}

impl Gpu {
    /// Opens GPU `local_rank mod device_count` (after `CUDA_VISIBLE_DEVICES`) and compiles the
    /// kernels for its compute capability with the given (V, G) layout; `kernel` walks. With
    /// [`EMULATOR_VARIABLE`] set, opens the CPU kernel emulator instead.
    pub fn open(local_rank: usize, kernel: WalkKernel, layout: GpuLayout) -> Result<Self> {
        layout.validate_for(kernel)?;
        if std::env::var_os(EMULATOR_VARIABLE).is_some() {
            return Self::emulated(kernel, layout);
        }
        // SAFETY: only tries to load the shared libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::device(
                "no CUDA driver (libcuda) found on this machine",
            ));
        }
        // SAFETY: as above.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::device(
                "CUDA driver found but no NVRTC library (libnvrtc) to compile the kernels",
            ));
        }
        let count = CudaContext::device_count().map_err(driver_err("device query"))?;
        if count < 1 {
            return Err(Error::device("the CUDA driver reports no GPU"));
        }
        let ordinal = local_rank % count as usize;
        let ctx = CudaContext::new(ordinal).map_err(driver_err("context creation"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_err("capability query"))?;
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let device_name = ctx.name().map_err(driver_err("name query"))?;
        let host = Host::Cuda {
            device: CudaDevice::new(ctx.default_stream()),
            arch,
        };
        Self::with(
            host,
            kernel,
            layout,
            format!("{device_name} (GPU {ordinal}, {arch})"),
        )
    }

    /// The CPU kernel emulator in place of a GPU: the same kernels and launch sequences, run on
    /// this CPU (slowly), for tests.
    #[cfg(hinoki_emulator)]
    pub fn emulated(kernel: WalkKernel, layout: GpuLayout) -> Result<Self> {
        layout.validate_for(kernel)?;
        Self::with(Host::Emulated, kernel, layout, "CPU kernel emulator".into())
    }

    /// Without the emulator (no C++ compiler at build time) there is nothing to open.
    #[cfg(not(hinoki_emulator))]
    pub fn emulated(_kernel: WalkKernel, _layout: GpuLayout) -> Result<Self> {
        Err(Error::device(format!(
            "{EMULATOR_VARIABLE} is set but this hinoki was built without the CPU kernel emulator (no C++ compiler at build time)"
        )))
    }

    fn with(host: Host, kernel: WalkKernel, layout: GpuLayout, name: String) -> Result<Self> {
        let walk = host.walk_program(layout)?;
        let list_blocks = walk.resident_blocks("walk_list", BLOCK)?;
        Ok(Self {
            buffers: Buffers::new(&walk)?,
            walk,
            host,
            kernel,
            layout,
            list_blocks,
            builder: None,
            resident: None,
            ordered: None,
            spare: Forces::default(),
            name,
        })
    }

    /// Recompiles the kernels for another (V, G) layout.
    pub fn set_layout(&mut self, layout: GpuLayout) -> Result<()> {
        layout.validate_for(self.kernel)?;
        if layout != self.layout {
            self.walk = self.host.walk_program(layout)?;
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

    /// Device bytes held by the reusable buffers (the walk's and the tree builder's).
    pub fn device_bytes(&self) -> usize {
        self.buffers.bytes() + self.builder.as_ref().map_or(0, TreeBuilder::device_bytes)
    }

    /// The tree over particles at `pos` (length units) with masses `mass` (mass units), built
    /// on this GPU (`cuda/build.cu`, compiled on the first call): the tree [`Tree::build`]
    /// gives on the same particles rounded to float32. Times `sort`, `build` and `moments`.
    pub fn build_tree(
        &mut self,
        pos: &[glam::DVec3],
        mass: &[f64],
        p: &TreeParams,
        times: &mut PhaseTimes,
    ) -> Result<Tree> {
        self.builder()?;
        self.resident = None;
        let tree = self
            .builder
            .as_mut()
            .expect("compiled above")
            .build(pos, mass, p, times)?;
        self.resident = Some(tree_key(&tree));
        Ok(tree)
    }

    /// Compiles the tree builder on first use.
    fn builder(&mut self) -> Result<()> {
        if self.builder.is_none() {
            self.builder = Some(TreeBuilder::new(self.host.build_program()?)?);
        }
        Ok(())
    }

    /// Says that the tree last built here has been changed on the host (refitted), so that its
    /// next walk uploads it.
    pub fn forget_resident_tree(&mut self) {
        self.resident = None;
    }

    /// True when `tree` is the tree last built on this GPU, unchanged since: its walks read it
    /// where it lies on the device.
    pub fn holds(&self, tree: &Tree) -> bool {
        self.resident == Some(tree_key(tree))
    }

    /// Where `tree` is on the device: the builder's arrays when this GPU [`Gpu::holds`] it,
    /// else the walk's buffers after uploading it.
    fn place_tree(&mut self, tree: &Tree) -> Result<TreeArrays> {
        if self.holds(tree) {
            if let Some(arrays) = self.builder.as_ref().and_then(TreeBuilder::tree_arrays) {
                return Ok(arrays);
            }
        }
        self.buffers.upload_tree(&self.walk, tree)
    }

    /// Where the input index of each target is on the device: the builder's order when
    /// `order` is that of the tree this GPU [`Gpu::holds`], else the walk's buffer after
    /// uploading it. The arrays the results are put in input order into are grown too.
    fn place_order(&mut self, tree: &Tree, order: &[u32]) -> Result<u64> {
        self.buffers.reserve_input_order(&self.walk, order.len())?;
        if self.holds(tree) && std::ptr::eq(order, tree.index.as_slice()) {
            if let Some(array) = self.builder.as_ref().and_then(TreeBuilder::order_array) {
                return Ok(array);
            }
        }
        self.buffers.upload_order(&self.walk, order)
    }

    /// Launches walk-program kernel `name`.
    fn launch(&self, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()> {
        // SAFETY: every call passes the arguments of the kernel's declaration in cuda/, with
        // buffers sized by `Buffers::upload`/`upload_sources`/`prepare_list`.
        unsafe { self.walk.launch(name, grid, block, args) }
    }

    /// Forces on `targets` (x, y, z, |a_old|) from `tree`, on the GPU. Times the phases
    /// `upload`, `walk` and `download`. Each of `groups` (at most V·G targets) is walked by one
    /// group of G threads, so the result equals [`crate::walk::cpu::grouped_walk`] on the same
    /// groups up to float32 rounding.
    pub fn walk(
        &mut self,
        tree: &Tree,
        targets: &[[f32; 4]],
        groups: &[Group],
        p: &WalkParams,
        times: &mut PhaseTimes,
    ) -> Result<WalkOutput> {
        self.walk_ordered(tree, targets, groups, p, None, times)
    }

    /// [`Gpu::walk`], with the results moved on the device to input order when `order` is given
    /// (`order[k]`: the input index of target k, a permutation of `0..targets.len()`): entry
    /// `order[k]` of the result is target k's. The host then only converts them.
    pub fn walk_ordered(
        &mut self,
        tree: &Tree,
        targets: &[[f32; 4]],
        groups: &[Group],
        p: &WalkParams,
        order: Option<&[u32]>,
        times: &mut PhaseTimes,
    ) -> Result<WalkOutput> {
        self.walk_on_device(tree, targets, groups, p, order, times)?;
        let t0 = Instant::now();
        let out = self
            .buffers
            .download(&self.walk, targets.len(), order.is_some())?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
    }

    /// [`Gpu::walk_ordered`] without the copy down: the results stay on the device, in input
    /// order when `order` is given, for [`Gpu::download_forces`]. Times `upload`, `walk` and
    /// (the move to input order) `download`.
    pub fn walk_on_device(
        &mut self,
        tree: &Tree,
        targets: &[[f32; 4]],
        groups: &[Group],
        p: &WalkParams,
        order: Option<&[u32]>,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        if order.is_some_and(|o| o.len() != targets.len()) {
            return Err(Error::input("the result order does not match the targets"));
        }
        if groups.iter().any(|g| g[1] as usize > self.layout.group()) {
            return Err(Error::input(format!(
                "a target group is larger than V*G = {}",
                self.layout.group()
            )));
        }
        let t0 = Instant::now();
        let t = self.place_tree(tree)?;
        self.buffers.upload_targets(&self.walk, targets, groups)?;
        let order = match order {
            Some(order) => Some(self.place_order(tree, order)?),
            None => None,
        };
        times.add("upload", t0.elapsed().as_secs_f64());
        let sizes = [tree.cells.len(), targets.len(), groups.len()];
        let targets = self.buffers.targets.ptr();
        self.launch_walk(t, targets, sizes, p, order, times)
    }

    /// The tree over particles at `pos` (length units) with masses `mass` (mass units) built on
    /// this GPU, and every particle's forces from it walked there, with the walk's targets and
    /// groups ([`curve_groups`](crate::walk::groups::curve_groups)) formed there too: the tree
    /// never comes down. The results stay on the device in input order, for
    /// [`Gpu::download_forces`]. `amag`: each particle's previous |a| in input order, for the
    /// acceleration criterion. Times `sort`, `build`, `moments`, `targets` (groups and
    /// targets), `walk` and `download` (the move to input order).
    pub fn build_and_walk(
        &mut self,
        pos: &[glam::DVec3],
        mass: &[f64],
        tp: &TreeParams,
        amag: Option<&[f32]>,
        p: &WalkParams,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        self.builder()?;
        self.resident = None;
        let builder = self.builder.as_mut().expect("compiled above");
        let tree = builder.build_on_device(pos, mass, tp, times)?;
        let t0 = Instant::now();
        let (buffers, walk) = (&mut self.buffers, &self.walk);
        let ngroups = builder.curve_groups(&tree, self.layout.group(), |ngroups| {
            buffers.reserve_groups(walk, tree.particles, ngroups)?;
            Ok(buffers.groups.ptr())
        })?;
        self.buffers
            .reserve_input_order(&self.walk, tree.particles)?;
        let targets = builder.gather_targets(&tree, amag)?;
        builder.synchronize()?;
        times.add("targets", t0.elapsed().as_secs_f64());
        let arrays = builder.tree_arrays().expect("built above");
        let order = builder.order_array();
        let sizes = [tree.cells, tree.particles, ngroups];
        self.launch_walk(arrays, targets, sizes, p, order, times)
    }

    /// Launches the walk of the tree at `t` for the targets at device address `targets` and the
    /// groups in the walk's buffers (`sizes`: cells, targets, groups); the results stay on the
    /// device, moved to input order when `order` (the device address of each target's input
    /// index) is given. Times `walk` and (the move) `download`.
    fn launch_walk(
        &mut self,
        t: TreeArrays,
        targets: u64,
        sizes: [usize; 3],
        p: &WalkParams,
        order: Option<u64>,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        let [nc, nt, ngroups] = sizes;
        if order.is_some() {
            self.ordered = None;
        }
        let t0 = Instant::now();
        let list = self.kernel == WalkKernel::List;
        let blocks = if list {
            // Persistent warps, each with its stack, taking groups until none is left.
            let blocks = self.list_blocks.min((ngroups as u32).div_ceil(BLOCK / 32));
            self.buffers.prepare_list(
                &self.walk,
                blocks as usize * (BLOCK / 32) as usize * LIST_STACK,
                nc,
            )?;
            let b = &self.buffers;
            self.launch(
                "link_children",
                (nc as u32).div_ceil(BLOCK).max(1),
                BLOCK,
                &[
                    Arg::Ptr(t.subtree),
                    Arg::Ptr(t.nchild),
                    Arg::I32(nc as i32),
                    Arg::Ptr(b.children.ptr()),
                ],
            )?;
            blocks
        } else {
            (ngroups as u32 * self.layout.g).div_ceil(BLOCK)
        };
        let b = &self.buffers;
        let ptr = |a: &dyn DeviceArray| Arg::Ptr(a.ptr());
        let mut args = vec![
            Arg::Ptr(t.particles),
            Arg::Ptr(t.com_mass),
            Arg::Ptr(t.s_eff),
            Arg::Ptr(t.boxes),
            Arg::Ptr(t.subtree),
            Arg::Ptr(t.first),
            Arg::Ptr(t.count),
            Arg::Ptr(t.nchild),
            Arg::Ptr(t.quad),
            Arg::Ptr(t.trace),
            Arg::I32(nc as i32),
        ];
        if list {
            args.push(ptr(&b.children));
        }
        args.extend([
            Arg::Ptr(targets),
            Arg::I32(nt as i32),
            ptr(&b.groups),
            Arg::I32(ngroups as i32),
            Arg::F32(p.eps2),
            Arg::I32(p.quadrupole as i32),
            Arg::I32((p.criterion.mac == Mac::Acceleration) as i32),
            Arg::F32(p.criterion.alpha),
            Arg::F32(p.criterion.g),
            ptr(&b.out),
            ptr(&b.counts),
        ]);
        if list {
            args.extend([ptr(&b.control), ptr(&b.stacks), Arg::I32(LIST_STACK as i32)]);
        }
        let name = if list { "walk_list" } else { "walk_vg" };
        self.launch(name, blocks.max(1), BLOCK, &args)?;
        self.walk.synchronize()?;
        times.add("walk", t0.elapsed().as_secs_f64());
        if list && self.buffers.list_overflowed(&self.walk)? {
            return Err(Error::device(format!(
                "the list kernel's stack overflowed: a tree deeper than {} levels",
                MAX_LEVEL as usize + 1
            )));
        }

        let t0 = Instant::now();
        if let Some(order) = order {
            let b = &self.buffers;
            self.launch(
                "unsort_results",
                (nt as u32).div_ceil(256).clamp(1, 1 << 16),
                256,
                &[
                    Arg::Ptr(b.out.ptr()),
                    Arg::Ptr(b.counts.ptr()),
                    Arg::Ptr(order),
                    Arg::I32(nt as i32),
                    Arg::Ptr(b.out_input.ptr()),
                    Arg::Ptr(b.counts_input.ptr()),
                ],
            )?;
            self.ordered = Some(nt);
        }
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// The results of the last walk given an order ([`Gpu::walk_on_device`],
    /// [`Gpu::walk_ordered`]), in input order, converted while they come down with no host
    /// copy of them: accelerations (length/time²) and potentials (energy/mass) in float64 with
    /// the gravitational constant `g` applied, particle–particle counts without the target
    /// itself (the walk of a tree that holds it counts it; at least 0) and particle–cell
    /// counts. The very values the host makes of [`Gpu::walk_ordered`]'s results. They are
    /// written into the vectors last handed back with [`Gpu::recycle`] where those have the
    /// right length (memory the host has already touched), else into new ones. Times
    /// `download`.
    pub fn download_forces(&mut self, g: f64, times: &mut PhaseTimes) -> Result<Forces> {
        let n = self
            .ordered
            .ok_or_else(|| Error::input("no walk has left results in input order on the GPU"))?;
        let t0 = Instant::now();
        let spare = std::mem::take(&mut self.spare);
        let forces = self.buffers.download_forces(&self.walk, n, g, spare)?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(forces)
    }

    /// Hands result vectors that are no longer needed back, for the next
    /// [`Gpu::download_forces`] to fill instead of allocating (and faulting in) new ones.
    pub fn recycle(&mut self, forces: Forces) {
        self.spare = forces;
    }

    /// Forces on every particle of `pos_mass` (x, y, z, m) from all the others by direct
    /// summation in float32 on the GPU (`cuda/direct.cu`), G = 1. Times `upload`, `walk` and
    /// `download`.
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
        self.buffers.upload_sources(&self.walk, pos_mass)?;
        times.add("upload", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let b = &self.buffers;
        self.launch(
            "direct",
            (n as u32).div_ceil(PER_BLOCK).max(1),
            BLOCK,
            &[
                Arg::Ptr(b.particles.ptr()),
                Arg::I32(n as i32),
                Arg::F32(eps2),
                Arg::Ptr(b.out.ptr()),
            ],
        )?;
        self.walk.synchronize()?;
        times.add("walk", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let mut out = vec![[0f32; 4]; n];
        self.walk
            .download(&b.out, bytemuck::cast_slice_mut(&mut out))?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
    }
}
