//! Opening this rank's GPU (or the CPU kernel emulator in its place) and compiling the kernels
//! of `cuda/` for it: the walk program (fast math, one per (V, G) layout) and the stage program
//! (IEEE arithmetic: keys, sort, tree, groups, domains, LETs, particle arrays, time step).

use super::cuda_runner::{driver_err, CudaDevice, CudaRunner};
#[cfg(hinoki_emulator)]
use super::emulator::Emulator;
use super::runner::{Device, DeviceUsage, DeviceWork, Runner};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

/// Environment variable that makes [`GpuContext::open`] open the CPU kernel emulator instead of
/// a GPU (for tests of the GPU code on machines without one; builds with the emulator only).
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

/// The GPUs this process can open (after `CUDA_VISIBLE_DEVICES`): 0 without a CUDA driver.
pub fn gpu_count() -> usize {
    // SAFETY: only tries to load the shared library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

/// Where the kernels run.
enum Host {
    /// A GPU, with its compute capability, e.g. "sm_90", and a hash of its UUID.
    Cuda {
        device: Arc<CudaDevice>,
        arch: &'static str,
        uuid: u64,
    },
    /// The CPU kernel emulator.
    #[cfg(hinoki_emulator)]
    Emulated,
}

/// The sources of the walk program: `cuda/cells.cuh`, `cuda/gravity.cuh` and
/// `cuda/periodic.cuh`, then `cuda/walk.cu`, `cuda/walk_list.cu`, `cuda/direct.cu` without
/// their includes of them, and `cuda/unsort.cu` (NVRTC is given one self-contained program).
fn walk_source() -> String {
    [
        include_str!("../../cuda/cells.cuh"),
        include_str!("../../cuda/gravity.cuh"),
        include_str!("../../cuda/periodic.cuh"),
        &without_include(include_str!("../../cuda/walk.cu")),
        &without_include(include_str!("../../cuda/walk_list.cu")),
        &without_include(include_str!("../../cuda/direct.cu")),
        include_str!("../../cuda/unsort.cu"),
    ]
    .join("\n")
}

/// The sources of the stage program, in the order the emulator includes them
/// (`cuda/emulate/kernels.cpp`).
fn stage_source() -> String {
    [
        include_str!("../../cuda/cells.cuh"),
        include_str!("../../cuda/gravity.cuh"),
        include_str!("../../cuda/build.cu"),
        include_str!("../../cuda/groups.cu"),
        include_str!("../../cuda/particles.cu"),
        include_str!("../../cuda/domain.cu"),
        &without_include(include_str!("../../cuda/lets.cu")),
        include_str!("../../cuda/union.cu"),
        include_str!("../../cuda/integrate.cu"),
    ]
    .join("\n")
}

/// `source` without its `#include` of `gravity.cuh` and `periodic.cuh` (the programs hold
/// those headers once, first).
fn without_include(source: &str) -> String {
    source
        .replace("#include \"gravity.cuh\"", "")
        .replace("#include \"periodic.cuh\"", "")
}

/// This rank's GPU, or the emulator: compiles programs for it and counts the bytes its copies
/// move over the bus and the bytes its arrays hold.
pub struct GpuContext {
    host: Host,
    usage: Arc<DeviceUsage>,
    /// Human-readable device description, e.g. "NVIDIA H100 80GB HBM3 (GPU 0, sm_90)".
    pub name: String,
}

impl GpuContext {
    /// Opens GPU `local_rank mod device_count` (after `CUDA_VISIBLE_DEVICES`). With
    /// [`EMULATOR_VARIABLE`] set, opens the CPU kernel emulator instead. Fails with the reason
    /// when neither can be had (no libcuda, no NVRTC, no GPU).
    pub fn open(local_rank: usize) -> Result<Self> {
        if std::env::var_os(EMULATOR_VARIABLE).is_some() {
            return Self::emulated();
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
        let uuid = ctx.uuid().map_err(driver_err("UUID query"))?;
        let uuid = uuid.bytes.iter().fold(crate::hash::GOLDEN, |h, &b| {
            crate::hash::mix(h ^ b as u8 as u64)
        });
        Ok(Self {
            host: Host::Cuda {
                device: CudaDevice::new(ctx.default_stream()),
                arch,
                uuid,
            },
            usage: Arc::default(),
            name: format!("{device_name} (GPU {ordinal}, {arch})"),
        })
    }

    /// The CPU kernel emulator in place of a GPU: the same kernels and launch sequences, run on
    /// this CPU (slowly), for tests.
    #[cfg(hinoki_emulator)]
    pub fn emulated() -> Result<Self> {
        Ok(Self {
            host: Host::Emulated,
            usage: Arc::default(),
            name: "CPU kernel emulator".into(),
        })
    }

    /// Without the emulator (no C++ compiler at build time) there is nothing to open.
    #[cfg(not(hinoki_emulator))]
    pub fn emulated() -> Result<Self> {
        Err(Error::device(format!(
            "{EMULATOR_VARIABLE} is set but this hinoki was built without the CPU kernel emulator (no C++ compiler at build time)"
        )))
    }

    /// The stream of every launch and copy on this GPU, and an identifier of the GPU (a hash
    /// of its UUID, the same for every rank that opened it); `None` on the emulator.
    pub fn cuda(&self) -> Option<(&Arc<CudaStream>, u64)> {
        match &self.host {
            Host::Cuda { device, uuid, .. } => Some((device.stream(), *uuid)),
            #[cfg(hinoki_emulator)]
            Host::Emulated => None,
        }
    }

    /// Bytes copied over the bus so far by every program of this context: (up, down).
    pub fn bus_bytes(&self) -> (u64, u64) {
        self.usage.bus()
    }

    /// Bytes the arrays of every program of this context hold: (now, at the most since it
    /// opened).
    pub fn held_bytes(&self) -> (u64, u64) {
        self.usage.held()
    }

    /// The kernel launches and the host's waits of every program of this context so far.
    pub fn work(&self) -> DeviceWork {
        self.usage.work()
    }

    /// The walk program (`cuda/gravity.cuh`, `periodic.cuh`, `walk.cu`, `walk_list.cu`,
    /// `direct.cu`, `unsort.cu`) compiled for V targets per thread and G threads per group, with fast math:
    /// rsqrtf, flush-to-zero and approximate division (the walk's error budget is set by the
    /// multipole expansion, orders of magnitude above this).
    pub fn walk_program(&self, v: u32, g: u32) -> Result<Runner> {
        let device = match &self.host {
            Host::Cuda { device, arch, .. } => Device::Cuda(CudaRunner::compile(
                device,
                arch,
                "hinoki.cu",
                &walk_source(),
                true,
                vec![format!("-DHINOKI_V={v}"), format!("-DHINOKI_G={g}")],
            )?),
            #[cfg(hinoki_emulator)]
            Host::Emulated => Device::Emulated(Emulator::for_layout(v, g)),
        };
        Ok(Runner::new(device, self.usage.clone()))
    }

    /// The stage program (`cuda/build.cu`, `groups.cu`, `particles.cu`, `domain.cu`,
    /// `lets.cu`, `union.cu`, `integrate.cu`, with `gravity.cuh` first), with IEEE arithmetic: its results equal the host's
    /// bit for bit.
    pub fn stage_program(&self) -> Result<Runner> {
        let device = match &self.host {
            Host::Cuda { device, arch, .. } => Device::Cuda(CudaRunner::compile(
                device,
                arch,
                "stages.cu",
                &stage_source(),
                false,
                Vec::new(),
            )?),
            #[cfg(hinoki_emulator)]
            Host::Emulated => Device::Emulated(Emulator::new()),
        };
        Ok(Runner::new(device, self.usage.clone()))
    }
}
