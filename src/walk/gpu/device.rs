//! Opening the GPU of this rank, compiling the kernels, and launching the walk.

use super::buffers::Buffers;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::tree::Tree;
use crate::walk::cpu::{WalkOutput, WalkParams};
use crate::walk::groups::Group;
use crate::walk::mac::Mac;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::sync::Arc;
use std::time::Instant;

/// Threads per block of the walk kernel (its `__launch_bounds__`).
const BLOCK: u32 = 128;

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
    /// The layouts `--vg auto` times: the fastest of the seed-001-style sweep on an H100
    /// (docs/performance.md) and their neighbours.
    pub const CANDIDATES: [GpuLayout; 4] = [
        GpuLayout { v: 2, g: 32 },
        GpuLayout { v: 4, g: 32 },
        GpuLayout { v: 8, g: 32 },
        GpuLayout { v: 4, g: 16 },
    ];
}

impl Default for GpuLayout {
    fn default() -> Self {
        // Fastest measured on an H100 (docs/performance.md).
        Self { v: 4, g: 32 }
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
    walk: CudaFunction,
    direct: CudaFunction,
    layout: GpuLayout,
    arch: &'static str,
    buffers: Buffers,
    /// Human-readable device description, e.g. "NVIDIA H100 80GB HBM3 (GPU 0, sm_90)".
    pub name: String,
}

/// Compiles the kernels of `cuda/` with NVRTC for `arch` and the (V, G) layout, and loads
/// them into `ctx`: returns the walk and direct-summation functions.
fn compile(
    ctx: &Arc<CudaContext>,
    arch: &'static str,
    layout: GpuLayout,
) -> Result<(CudaFunction, CudaFunction)> {
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
    let walk = module
        .load_function("walk_vg")
        .map_err(driver_err("kernel lookup"))?;
    let direct = module
        .load_function("direct")
        .map_err(driver_err("kernel lookup"))?;
    Ok((walk, direct))
}

fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::device(format!("CUDA {what} failed: {e}"))
}

/// The kernel source: `cuda/gravity.cuh`, then `cuda/walk.cu` and `cuda/direct.cu` without
/// their includes of it (NVRTC is given one self-contained program).
fn kernel_source() -> String {
    let include = "#include \"gravity.cuh\"";
    [
        include_str!("../../../cuda/gravity.cuh"),
        &include_str!("../../../cuda/walk.cu").replace(include, ""),
        &include_str!("../../../cuda/direct.cu").replace(include, ""),
    ]
    .join("\n")
}

impl Gpu {
    /// Opens GPU `local_rank mod device_count` (after `CUDA_VISIBLE_DEVICES`) and compiles the
    /// walk kernel for its compute capability with the given (V, G) layout.
    pub fn open(local_rank: usize, layout: GpuLayout) -> Result<Self> {
        layout.validate()?;
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
        let (walk, direct) = compile(&ctx, arch, layout)?;
        let stream = ctx.default_stream();
        Ok(Self {
            buffers: Buffers::new(stream.clone())?,
            stream,
            walk,
            direct,
            layout,
            arch,
            name: format!("{device_name} (GPU {ordinal}, {arch})"),
        })
    }

    /// Recompiles the walk kernel for another (V, G) layout.
    pub fn set_layout(&mut self, layout: GpuLayout) -> Result<()> {
        layout.validate()?;
        if layout != self.layout {
            (self.walk, self.direct) = compile(self.stream.context(), self.arch, layout)?;
            self.layout = layout;
        }
        Ok(())
    }

    /// The (V, G) layout the kernel was compiled for.
    pub fn layout(&self) -> GpuLayout {
        self.layout
    }

    /// Device bytes held by the reusable buffers.
    pub fn device_bytes(&self) -> usize {
        self.buffers.bytes()
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
        let threads = groups.len() as u32 * self.layout.g;
        let cfg = LaunchConfig {
            grid_dim: (threads.div_ceil(BLOCK).max(1), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let n_cells = tree.cells.len() as i32;
        let nt_i = nt as i32;
        let quadrupole = p.quadrupole as i32;
        let accel = (p.criterion.mac == Mac::Acceleration) as i32;
        let b = &mut self.buffers;
        let mut launch = self.stream.launch_builder(&self.walk);
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
            .arg(&n_cells)
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
        // SAFETY: the argument list matches walk_vg's signature in cuda/walk.cu, every buffer
        // holds at least the elements the kernel indexes (sized by `upload`).
        unsafe { launch.launch(cfg) }.map_err(driver_err("walk launch"))?;
        self.stream.synchronize().map_err(driver_err("walk"))?;
        times.add("walk", t0.elapsed().as_secs_f64());

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
        let mut launch = self.stream.launch_builder(&self.direct);
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
