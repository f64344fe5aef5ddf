//! Opening the GPU of this rank, compiling the kernels, and launching the walk.

use super::buffers::Buffers;
use super::build::TreeBuilder;
use super::launch::CudaRunner;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::tree::{Tree, TreeParams, MAX_LEVEL};
use crate::walk::cpu::{WalkOutput, WalkParams};
use crate::walk::groups::Group;
use crate::walk::mac::Mac;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::sync::Arc;
use std::time::Instant;

/// Threads per block of the walk kernels (their `__launch_bounds__`).
const BLOCK: u32 = 128;

/// Stack entries per tree level of the list kernel: its batched depth-first stack holds at most
/// 8 children of 32 popped cells per level (cuda/walk_list.cu).
const LIST_STACK_PER_LEVEL: usize = 8 * 32;

/// Stack entries per warp of the list kernel: every level below a root, plus one batch.
const LIST_STACK: usize = LIST_STACK_PER_LEVEL * (MAX_LEVEL as usize + 1) + 32;

/// Which GPU tree-walk kernel runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WalkKernel {
    /// Seed 001's (V,G) walk (`cuda/walk.cu`): G threads take one opening decision at a time
    /// and apply each accepted source as soon as it is found.
    Vg,
    /// The interaction-list walk (`cuda/walk_list.cu`, Bonsai's and Ryoanji's design): a warp
    /// tests 32 cells at once and applies the accepted ones in batches from shared memory.
    /// Faster at equal accuracy on an H100 (docs/performance.md), hence the default.
    #[default]
    List,
}

impl std::fmt::Display for WalkKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Vg => "vg",
            Self::List => "list",
        })
    }
}

impl std::str::FromStr for WalkKernel {
    type Err = Error;
    /// Parses "vg" or "list".
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "vg" => Ok(Self::Vg),
            "list" => Ok(Self::List),
            _ => Err(Error::input(format!(
                "GPU kernel must be vg or list, got '{s}'"
            ))),
        }
    }
}

/// The (V, G) shape of the walk kernel: V targets per thread, G threads per group sharing one
/// walk (G a power of two ≤ 32). A group serves V·G consecutive targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuLayout {
    /// Targets per thread.
    pub v: u32,
    /// Threads per group.
    pub g: u32,
}

impl GpuLayout {
    /// Checks V ∈ 1..=16 and G a power of two in 1..=32.
    pub fn validate(&self) -> Result<()> {
        if !(1..=16).contains(&self.v) || !self.g.is_power_of_two() || self.g > 32 {
            return Err(Error::input(format!(
                "GPU layout V,G = {},{} is not supported (V in 1..=16, G a power of two <= 32)",
                self.v, self.g
            )));
        }
        Ok(())
    }

    /// Targets per group, V·G.
    pub fn group(&self) -> usize {
        (self.v * self.g) as usize
    }
}

impl GpuLayout {
    /// Checks the layout and that `kernel` can run it: the list kernel walks one group per
    /// warp, so its G is 32.
    pub fn validate_for(&self, kernel: WalkKernel) -> Result<()> {
        self.validate()?;
        if kernel == WalkKernel::List && self.g != 32 {
            return Err(Error::input(format!(
                "the list kernel walks one group per warp: G must be 32 (got V,G = {self}; use --kernel vg for G < 32)"
            )));
        }
        Ok(())
    }

    /// The layouts `--vg auto` times for `kernel`: the fastest of the seed-001-style sweep on
    /// an H100 (docs/performance.md) and their neighbours.
    pub fn candidates(kernel: WalkKernel) -> &'static [GpuLayout] {
        const V2: GpuLayout = GpuLayout { v: 2, g: 32 };
        const V4: GpuLayout = GpuLayout { v: 4, g: 32 };
        const V8: GpuLayout = GpuLayout { v: 8, g: 32 };
        match kernel {
            WalkKernel::Vg => &[V2, V4, V8, GpuLayout { v: 4, g: 16 }],
            WalkKernel::List => &[V2, V4, V8],
        }
    }
}

impl Default for GpuLayout {
    fn default() -> Self {
        // Fastest at equal accuracy with the list kernel on an H100 (docs/performance.md); the
        // (V,G) kernel is fastest at 4,32.
        Self { v: 2, g: 32 }
    }
}

impl std::fmt::Display for GpuLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.v, self.g)
    }
}

impl std::str::FromStr for GpuLayout {
    type Err = Error;
    /// Parses "V,G", e.g. "2,16".
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::input(format!(
                "GPU layout must be written V,G (e.g. 2,16), got '{s}'"
            ))
        };
        let (v, g) = s.split_once(',').ok_or_else(bad)?;
        let layout = Self {
            v: v.trim().parse().map_err(|_| bad())?,
            g: g.trim().parse().map_err(|_| bad())?,
        };
        layout.validate()?;
        Ok(layout)
    }
}

/// How the (V, G) layout is chosen: fixed, or by timing [`GpuLayout::CANDIDATES`] on the first
/// force evaluation (`--vg auto`; seed 001 finds the best pair depends on the distribution).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VgChoice {
    /// Time the candidates once, keep the fastest.
    Auto,
    /// Always this layout.
    Fixed(GpuLayout),
}

impl Default for VgChoice {
    fn default() -> Self {
        Self::Fixed(GpuLayout::default())
    }
}

impl VgChoice {
    /// The layout to compile first.
    pub fn initial(self) -> GpuLayout {
        match self {
            Self::Auto => GpuLayout::default(),
            Self::Fixed(l) => l,
        }
    }
}

impl std::fmt::Display for VgChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Fixed(l) => l.fmt(f),
        }
    }
}

impl std::str::FromStr for VgChoice {
    type Err = Error;
    /// Parses "auto" or "V,G".
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            Ok(Self::Auto)
        } else {
            s.parse().map(Self::Fixed)
        }
    }
}

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

/// This rank's GPU with its compiled walk kernel and reusable device buffers.
pub struct Gpu {
    stream: Arc<CudaStream>,
    kernels: Kernels,
    kernel: WalkKernel,
    layout: GpuLayout,
    arch: &'static str,
    buffers: Buffers,
    /// The tree builder (`cuda/build.cu`), compiled on first use.
    builder: Option<TreeBuilder<CudaRunner>>,
    /// Human-readable device description, e.g. "NVIDIA H100 80GB HBM3 (GPU 0, sm_90)".
    pub name: String,
}

/// The compiled kernels of one (V, G) layout.
struct Kernels {
    walk_vg: CudaFunction,
    walk_list: CudaFunction,
    link_children: CudaFunction,
    direct: CudaFunction,
    /// Blocks of the list kernel resident on the whole GPU at once (its persistent grid).
    list_blocks: u32,
}

/// Compiles the kernels of `cuda/` with NVRTC for `arch` and the (V, G) layout, and loads
/// them into `ctx`.
fn compile(ctx: &Arc<CudaContext>, arch: &'static str, layout: GpuLayout) -> Result<Kernels> {
    let opts = CompileOptions {
        arch: Some(arch),
        // Fast math: rsqrtf, flush-to-zero and approximate division; the walk's error budget
        // is set by the multipole expansion, orders of magnitude above this.
        use_fast_math: Some(true),
        options: vec![
            format!("-DHINOKI_V={}", layout.v),
            format!("-DHINOKI_G={}", layout.g),
            "-std=c++17".into(),
        ],
        name: Some("hinoki.cu".into()),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(kernel_source(), opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => Error::device(format!(
            "NVRTC could not compile the kernels of cuda/ for {arch}: {}",
            log.to_string_lossy()
        )),
        other => Error::device(format!("NVRTC failed: {other:?}")),
    })?;
    let module = ctx.load_module(ptx).map_err(driver_err("module load"))?;
    let function = |name: &str| {
        module
            .load_function(name)
            .map_err(driver_err("kernel lookup"))
    };
    let walk_list = function("walk_list")?;
    let per_sm = walk_list
        .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
        .map_err(driver_err("occupancy query"))?;
    let sms = ctx
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .map_err(driver_err("attribute query"))?;
    Ok(Kernels {
        walk_vg: function("walk_vg")?,
        walk_list,
        link_children: function("link_children")?,
        direct: function("direct")?,
        list_blocks: (per_sm * sms.max(1) as u32).max(1),
    })
}

fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::device(format!("CUDA {what} failed: {e}"))
}

/// The kernel source: `cuda/gravity.cuh`, then `cuda/walk.cu`, `cuda/walk_list.cu` and
/// `cuda/direct.cu` without their includes of it (NVRTC is given one self-contained program).
fn kernel_source() -> String {
    let include = "#include \"gravity.cuh\"";
    [
        include_str!("../../../cuda/gravity.cuh"),
        &include_str!("../../../cuda/walk.cu").replace(include, ""),
        &include_str!("../../../cuda/walk_list.cu").replace(include, ""),
        &include_str!("../../../cuda/direct.cu").replace(include, ""),
    ]
    .join("\n")
}

impl Gpu {
    /// Opens GPU `local_rank mod device_count` (after `CUDA_VISIBLE_DEVICES`) and compiles the
    /// kernels for its compute capability with the given (V, G) layout; `kernel` walks.
    pub fn open(local_rank: usize, kernel: WalkKernel, layout: GpuLayout) -> Result<Self> {
        layout.validate_for(kernel)?;
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
        let kernels = compile(&ctx, arch, layout)?;
        let stream = ctx.default_stream();
        Ok(Self {
            buffers: Buffers::new(stream.clone())?,
            builder: None,
            stream,
            kernels,
            kernel,
            layout,
            arch,
            name: format!("{device_name} (GPU {ordinal}, {arch})"),
        })
    }

    /// Recompiles the kernels for another (V, G) layout.
    pub fn set_layout(&mut self, layout: GpuLayout) -> Result<()> {
        layout.validate_for(self.kernel)?;
        if layout != self.layout {
            self.kernels = compile(self.stream.context(), self.arch, layout)?;
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
        if self.builder.is_none() {
            let source = include_str!("../../../cuda/build.cu");
            let runner = CudaRunner::compile(self.stream.clone(), self.arch, "build.cu", source)?;
            self.builder = Some(TreeBuilder::new(runner)?);
        }
        self.builder
            .as_mut()
            .expect("compiled above")
            .build(pos, mass, p, times)
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
        if groups.iter().any(|g| g[1] as usize > self.layout.group()) {
            return Err(Error::input(format!(
                "a target group is larger than V*G = {}",
                self.layout.group()
            )));
        }
        let nt = targets.len();
        let t0 = Instant::now();
        self.buffers.upload(tree, targets, groups)?;
        self.stream.synchronize().map_err(driver_err("upload"))?;
        times.add("upload", t0.elapsed().as_secs_f64());

        let t0 = Instant::now();
        let n_groups = groups.len() as i32;
        let list = self.kernel == WalkKernel::List;
        let blocks = if list {
            // Persistent warps, each with its stack, taking groups until none is left.
            let blocks = self
                .kernels
                .list_blocks
                .min((groups.len() as u32).div_ceil(BLOCK / 32));
            let nc = tree.cells.len();
            self.buffers
                .prepare_list(blocks as usize * (BLOCK / 32) as usize * LIST_STACK, nc)?;
            let cfg = LaunchConfig {
                grid_dim: ((nc as u32).div_ceil(BLOCK).max(1), 1, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let b = &mut self.buffers;
            let nc = nc as i32;
            let mut link = self.stream.launch_builder(&self.kernels.link_children);
            link.arg(&b.subtree)
                .arg(&b.nchild)
                .arg(&nc)
                .arg(&mut b.children);
            // SAFETY: matches link_children in cuda/walk_list.cu; `children` holds 8 slots for
            // each of the nc cells, subtree and nchild nc entries.
            unsafe { link.launch(cfg) }.map_err(driver_err("link_children launch"))?;
            blocks
        } else {
            (groups.len() as u32 * self.layout.g).div_ceil(BLOCK)
        };
        let cfg = LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let stack_cap = LIST_STACK as i32;
        let n_cells = tree.cells.len() as i32;
        let nt_i = nt as i32;
        let quadrupole = p.quadrupole as i32;
        let accel = (p.criterion.mac == Mac::Acceleration) as i32;
        let b = &mut self.buffers;
        let function = if list {
            &self.kernels.walk_list
        } else {
            &self.kernels.walk_vg
        };
        let mut launch = self.stream.launch_builder(function);
        launch
            .arg(&b.particles)
            .arg(&b.com_mass)
            .arg(&b.s_eff)
            .arg(&b.boxes)
            .arg(&b.subtree)
            .arg(&b.first)
            .arg(&b.count)
            .arg(&b.nchild)
            .arg(&b.quad)
            .arg(&b.trace)
            .arg(&n_cells);
        if list {
            launch.arg(&b.children);
        }
        launch
            .arg(&b.targets)
            .arg(&nt_i)
            .arg(&b.groups)
            .arg(&n_groups)
            .arg(&p.eps2)
            .arg(&quadrupole)
            .arg(&accel)
            .arg(&p.criterion.alpha)
            .arg(&p.criterion.g)
            .arg(&mut b.out)
            .arg(&mut b.counts);
        if list {
            launch
                .arg(&mut b.control)
                .arg(&mut b.stacks)
                .arg(&stack_cap);
        }
        // SAFETY: the argument list matches walk_vg's signature in cuda/walk.cu (walk_list's in
        // cuda/walk_list.cu with the three list arguments), every buffer holds at least the
        // elements the kernel indexes (sized by `upload` and `prepare_list`).
        unsafe { launch.launch(cfg) }.map_err(driver_err("walk launch"))?;
        self.stream.synchronize().map_err(driver_err("walk"))?;
        times.add("walk", t0.elapsed().as_secs_f64());
        if list && self.buffers.list_overflowed()? {
            return Err(Error::device(format!(
                "the list kernel's stack overflowed: a tree deeper than {} levels",
                MAX_LEVEL as usize + 1
            )));
        }

        let t0 = Instant::now();
        let out = self.buffers.download(nt)?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
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
        self.buffers.upload_sources(pos_mass)?;
        self.stream.synchronize().map_err(driver_err("upload"))?;
        times.add("upload", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(PER_BLOCK).max(1), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let n_i = n as i32;
        let b = &mut self.buffers;
        let mut launch = self.stream.launch_builder(&self.kernels.direct);
        launch
            .arg(&b.particles)
            .arg(&n_i)
            .arg(&eps2)
            .arg(&mut b.out);
        // SAFETY: matches `direct` in cuda/direct.cu; pos_mass and out hold n elements.
        unsafe { launch.launch(cfg) }.map_err(driver_err("direct launch"))?;
        self.stream.synchronize().map_err(driver_err("direct"))?;
        times.add("walk", t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let out = self.buffers.download(n)?.acc_pot;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(out)
    }
}
