//! One force evaluation, end to end: the parameters every path shares and the driver that runs the
//! pipeline stages (keys → sort → tree → moments → walk) and times each of them.

use crate::error::{Error, Result};
use crate::sfc::Order;
use crate::walk::gpu::{local_rank, Gpu, GpuLayout, VgChoice};
use crate::walk::mac::Mac;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where the force walk runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The rayon walk on the CPU cores.
    Cpu,
    /// The CUDA walk on this rank's GPU; an error where no usable GPU exists.
    Gpu,
    /// The GPU when one is usable, else the CPU.
    Auto,
}

/// How forces are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Barnes–Hut tree walk.
    Tree,
    /// Exact O(N²) summation: float64 on the CPU; float32 on the GPU with `--backend gpu`.
    Direct,
}

/// Which CPU tree walk is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalkKind {
    /// Groups of consecutive particles share one opening decision and one interaction list
    /// (the CPU analogue of the (V,G) kernel of seed 001).
    Grouped,
    /// One iterative next/more walk per particle (seed 004, Fig. 6).
    Single,
}

macro_rules! named_enum {
    ($t:ty, $what:literal, $( $v:path => $name:literal ),+ ) => {
        impl $t {
            /// The name used on the command line and in configs.
            pub fn name(self) -> &'static str {
                match self { $( $v => $name ),+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $( $name => Ok($v), )+
                    _ => Err(Error::input(format!(
                        concat!("unknown ", $what, " '{}' (expected one of: {})"),
                        s,
                        [$( $name ),+].join(", ")
                    ))),
                }
            }
        }
    };
}

named_enum!(Backend, "backend", Backend::Cpu => "cpu", Backend::Gpu => "gpu", Backend::Auto => "auto");
named_enum!(Method, "method", Method::Tree => "tree", Method::Direct => "direct");
named_enum!(WalkKind, "walk", WalkKind::Grouped => "grouped", WalkKind::Single => "single");
named_enum!(Order, "ordering", Order::Hilbert => "hilbert", Order::Morton => "morton", Order::None => "none");

/// Everything that decides how one force evaluation is done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForceParams {
    /// Opening angle θ of the geometric criteria (dimensionless, > 0).
    pub theta: f32,
    /// Opening criterion.
    pub mac: Mac,
    /// Tolerance α of the acceleration criterion (dimensionless, > 0).
    pub alpha: f32,
    /// Multipole order of cell expansions: 1 = monopole, 2 = quadrupole.
    pub multipole: u8,
    /// Largest number of particles in a tree leaf (N_crit).
    pub ncrit: usize,
    /// Number of consecutive particles that share one walk in the grouped walk.
    pub group: usize,
    /// Particle ordering (space-filling curve) used for the tree and the walk order.
    pub order: Order,
    /// Plummer softening length ε (length units, ≥ 0).
    pub eps: f64,
    /// Gravitational constant (1 in N-body units).
    pub g: f64,
    /// Tree walk or direct summation.
    pub method: Method,
    /// Which CPU walk.
    pub walk: WalkKind,
    /// Where the walk runs.
    pub backend: Backend,
    /// Shape of the GPU walk kernel: V targets per thread, G threads per group (the GPU's group
    /// of consecutive targets is V·G; `group` applies to the CPU walk only).
    pub vg: VgChoice,
}

impl Default for ForceParams {
    fn default() -> Self {
        Self {
            theta: 0.45,
            mac: Mac::Modified,
            alpha: 0.001,
            multipole: 2,
            ncrit: 8,
            group: 64,
            order: Order::Hilbert,
            eps: 0.01,
            g: 1.0,
            method: Method::Tree,
            walk: WalkKind::Grouped,
            backend: Backend::Auto,
            vg: VgChoice::default(),
        }
    }
}

impl ForceParams {
    /// What the walks need of these parameters (θ is already in the tree's S_eff).
    pub fn walk_params(&self) -> WalkParams {
        WalkParams {
            criterion: Criterion {
                mac: self.mac,
                alpha: self.alpha,
                g: self.g as f32,
            },
            eps2: (self.eps * self.eps) as f32,
            quadrupole: self.multipole >= 2,
        }
    }

    /// Checks every value; the error names the parameter and the rule it breaks.
    pub fn validate(&self) -> Result<()> {
        if !(self.theta.is_finite() && self.theta > 0.0) {
            return Err(Error::input(format!(
                "theta must be finite and > 0 (got {})",
                self.theta
            )));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(Error::input(format!(
                "alpha (acceleration criterion tolerance) must be finite and > 0 (got {})",
                self.alpha
            )));
        }
        if !(self.multipole == 1 || self.multipole == 2) {
            return Err(Error::input(format!(
                "multipole must be 1 (monopole) or 2 (quadrupole) (got {})",
                self.multipole
            )));
        }
        if !(1..=1 << 16).contains(&self.ncrit) {
            return Err(Error::input(format!(
                "ncrit must be between 1 and 65536 (got {})",
                self.ncrit
            )));
        }
        if !(1..=1 << 16).contains(&self.group) {
            return Err(Error::input(format!(
                "group size must be between 1 and 65536 (got {})",
                self.group
            )));
        }
        if let VgChoice::Fixed(l) = self.vg {
            l.validate()?;
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(Error::input(format!(
                "softening eps must be finite and >= 0 (got {})",
                self.eps
            )));
        }
        if !(self.g.is_finite() && self.g > 0.0) {
            return Err(Error::input(format!(
                "gravitational constant G must be finite and > 0 (got {})",
                self.g
            )));
        }
        Ok(())
    }
}

use crate::diag::PhaseTimes;
use crate::particles::Particles;
use crate::tree::{FlatTree, Tree, TreeParams};
use crate::walk::cpu::{grouped_walk, single_walk, WalkOutput, WalkParams};
use crate::walk::direct::direct_forces;
use crate::walk::groups::{chunk_groups, tree_groups, Group};
use crate::walk::mac::Criterion;
use glam::DVec3;
use rayon::prelude::*;
use std::time::Instant;

/// The result of one force evaluation, in the input particle order, G included.
#[derive(Clone, Debug, Default)]
pub struct ForceResult {
    /// Accelerations (length / time²).
    pub acc: Vec<DVec3>,
    /// Potentials (energy per mass).
    pub pot: Vec<f64>,
    /// Particle–particle interactions per particle.
    pub p2p: Vec<u32>,
    /// Particle–cell interactions per particle.
    pub m2p: Vec<u32>,
    /// Seconds per phase, with `total` last.
    pub times: PhaseTimes,
    /// What computed the forces (e.g. "cpu (2 threads)").
    pub device: String,
}

/// A force evaluator that keeps what outlives one evaluation: the validated parameters and,
/// on the GPU backend, the device context, compiled kernels and device buffers.
pub struct ForceEngine {
    params: ForceParams,
    gpu: Option<Gpu>,
    /// `--vg auto` has not chosen a layout yet.
    tune: bool,
}

impl ForceEngine {
    /// Validates `params` and opens the backend: `gpu` fails with the reason when no usable GPU
    /// exists; `auto` takes the GPU when one can be opened and the CPU otherwise.
    pub fn new(params: ForceParams) -> Result<Self> {
        params.validate()?;
        // Direct summation stays the float64 CPU reference unless the GPU is asked for by name.
        let gpu = match (params.backend, params.method) {
            (Backend::Cpu, _) | (Backend::Auto, Method::Direct) => None,
            (Backend::Gpu, _) => Some(Gpu::open(local_rank(), params.vg.initial())?),
            (Backend::Auto, Method::Tree) => match Gpu::open(local_rank(), params.vg.initial()) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::info!("backend auto: using the CPU ({e})");
                    None
                }
            },
        };
        let tune = params.vg == VgChoice::Auto && gpu.is_some();
        Ok(Self { params, gpu, tune })
    }

    /// The GPU kernel layout in use (after `--vg auto` has chosen), if the GPU walks.
    pub fn layout(&self) -> Option<GpuLayout> {
        self.gpu.as_ref().map(Gpu::layout)
    }

    /// The parameters this engine evaluates with.
    pub fn params(&self) -> &ForceParams {
        &self.params
    }

    /// What computes the forces, e.g. "cpu (2 threads)" or the GPU's name.
    pub fn device(&self) -> String {
        match &self.gpu {
            Some(g) => g.name.clone(),
            None => format!("cpu ({} threads)", rayon::current_num_threads()),
        }
    }

    /// Device bytes held by the GPU walk (0 on the CPU).
    pub fn device_bytes(&self) -> usize {
        self.gpu.as_ref().map_or(0, Gpu::device_bytes)
    }

    /// One force evaluation on all particles of `p`. `old_acc`, the accelerations of the
    /// previous step, feed the acceleration criterion; without them that criterion first walks
    /// with the modified criterion to obtain them (timed as part of `walk`).
    pub fn compute(&mut self, p: &Particles, old_acc: Option<&[DVec3]>) -> Result<ForceResult> {
        let t0 = Instant::now();
        let device = self.device();
        let params = &self.params;
        let mut result = match (params.method, self.gpu.as_mut()) {
            (Method::Direct, Some(gpu)) => {
                let mut times = PhaseTimes::default();
                let src: Vec<[f32; 4]> = p
                    .pos
                    .iter()
                    .zip(&p.mass)
                    .map(|(x, &m)| [x.x as f32, x.y as f32, x.z as f32, m as f32])
                    .collect();
                let out = gpu.direct(&src, (params.eps * params.eps) as f32, &mut times)?;
                let n = p.len() as u32;
                ForceResult {
                    acc: out
                        .iter()
                        .map(|f| DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64) * params.g)
                        .collect(),
                    pot: out.iter().map(|f| f[3] as f64 * params.g).collect(),
                    p2p: vec![n.saturating_sub(1); p.len()],
                    m2p: vec![0; p.len()],
                    times,
                    device,
                }
            }
            (Method::Direct, None) => {
                let mut times = PhaseTimes::default();
                let all: Vec<usize> = (0..p.len()).collect();
                let (acc, pot) =
                    times.time("walk", || direct_forces(&p.pos, &p.mass, params.eps, &all));
                let n = p.len() as u32;
                ForceResult {
                    acc: acc.into_iter().map(|a| a * params.g).collect(),
                    pot: pot.into_iter().map(|v| v * params.g).collect(),
                    p2p: vec![n.saturating_sub(1); p.len()],
                    m2p: vec![0; p.len()],
                    times,
                    device,
                }
            }
            (Method::Tree, gpu) => {
                let tune = std::mem::take(&mut self.tune);
                tree_forces(p, params, gpu, tune, old_acc, device)?
            }
        };
        result.times.add("total", t0.elapsed().as_secs_f64());
        Ok(result)
    }
}

/// One force evaluation with a throw-away [`ForceEngine`] (see [`ForceEngine::compute`]).
pub fn compute_forces(
    p: &Particles,
    params: &ForceParams,
    old_acc: Option<&[DVec3]>,
) -> Result<ForceResult> {
    ForceEngine::new(params.clone())?.compute(p, old_acc)
}

fn tree_forces(
    p: &Particles,
    params: &ForceParams,
    mut gpu: Option<&mut Gpu>,
    tune: bool,
    old_acc: Option<&[DVec3]>,
    device: String,
) -> Result<ForceResult> {
    let mut times = PhaseTimes::default();
    let tree = Tree::build(
        &p.pos,
        &p.mass,
        &TreeParams {
            order: params.order,
            ncrit: params.ncrit,
            mac: params.mac,
            theta: params.theta,
        },
        &mut times,
    );
    let n = p.len();
    // Walk order: the tree's sorted order, or the input order for `--order none`.
    let walk_to_input: Vec<u32> = match params.order {
        Order::None => (0..n as u32).collect(),
        Order::Hilbert | Order::Morton => tree.index.clone(),
    };
    let amag = |i: usize| old_acc.map_or(0.0, |a| a[i].length() as f32);
    let mut targets: Vec<[f32; 4]> = walk_to_input
        .par_iter()
        .map(|&i| {
            let x = p.pos[i as usize];
            [x.x as f32, x.y as f32, x.z as f32, amag(i as usize)]
        })
        .collect();
    let wp = params.walk_params();
    // The seed-004 node arrays with next/more threading, for the single-particle CPU walk.
    let flat = (params.walk == WalkKind::Single && gpu.is_none())
        .then(|| times.time("thread", || FlatTree::from_tree(&tree, params.eps as f32)));
    let form_groups = |size: usize| match params.order {
        Order::None => chunk_groups(n, size),
        Order::Hilbert | Order::Morton => tree_groups(&tree, size),
    };
    if let (true, Some(g)) = (tune, gpu.as_deref_mut()) {
        times.time("tune", || {
            choose_layout(g, &tree, &targets, &form_groups, &wp)
        })?;
    }
    // Groups: V·G targets on the GPU, `group` on the CPU; tree cells when the walk follows
    // the tree order, fixed chunks of the input order otherwise.
    let group_size = gpu.as_ref().map_or(params.group, |g| g.layout().group());
    let groups = form_groups(group_size);
    let mut walk =
        |wp: &WalkParams, targets: &[[f32; 4]], times: &mut PhaseTimes| match (&mut gpu, &flat) {
            (Some(g), _) => g.walk(&tree, targets, &groups, wp, times),
            (None, Some(f)) => Ok(times.time("walk", || single_walk(&tree, f, targets, wp))),
            _ => Ok(times.time("walk", || grouped_walk(&tree, targets, &groups, wp))),
        };
    if params.mac == Mac::Acceleration && old_acc.is_none() {
        let boot = WalkParams {
            criterion: Criterion {
                mac: Mac::Modified,
                ..wp.criterion
            },
            ..wp
        };
        let first = walk(&boot, &targets, &mut times)?;
        for (t, a) in targets.iter_mut().zip(&first.acc_pot) {
            t[3] = wp.criterion.g * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        }
    }
    let out: WalkOutput = walk(&wp, &targets, &mut times)?;
    // Back to input order, G applied, float64.
    let g = params.g;
    let (acc, pot, p2p, m2p) = times.time("unsort", || {
        let slot = inverse_permutation(&walk_to_input);
        let acc = slot
            .par_iter()
            .map(|&k| {
                let f = out.acc_pot[k as usize];
                DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64) * g
            })
            .collect();
        let pot = slot
            .par_iter()
            .map(|&k| out.acc_pot[k as usize][3] as f64 * g)
            .collect();
        let p2p = slot.par_iter().map(|&k| out.p2p[k as usize]).collect();
        let m2p = slot.par_iter().map(|&k| out.m2p[k as usize]).collect();
        (acc, pot, p2p, m2p)
    });
    let r = ForceResult {
        acc,
        pot,
        p2p,
        m2p,
        times,
        device,
    };
    Ok(r)
}

/// The inverse of the permutation `p` (`q[p[k]] = k`), scattered in parallel. Relaxed atomic
/// stores compile to plain stores; they only make the disjoint parallel writes safe Rust.
fn inverse_permutation(p: &[u32]) -> Vec<u32> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let q: Vec<AtomicU32> = (0..p.len())
        .into_par_iter()
        .map(|_| AtomicU32::new(0))
        .collect();
    p.par_iter()
        .enumerate()
        .for_each(|(k, &i)| q[i as usize].store(k as u32, Relaxed));
    q.into_par_iter().map(AtomicU32::into_inner).collect()
}

/// `--vg auto`: times one walk for every layout of [`GpuLayout::CANDIDATES`] on this tree and
/// keeps the fastest compiled in `gpu`.
fn choose_layout(
    gpu: &mut Gpu,
    tree: &Tree,
    targets: &[[f32; 4]],
    form_groups: &dyn Fn(usize) -> Vec<Group>,
    wp: &WalkParams,
) -> Result<()> {
    let mut best: Option<(f64, GpuLayout)> = None;
    for layout in GpuLayout::CANDIDATES {
        gpu.set_layout(layout)?;
        let groups = form_groups(layout.group());
        let mut t = PhaseTimes::default();
        gpu.walk(tree, targets, &groups, wp, &mut t)?;
        let secs = t.get("walk");
        tracing::info!("vg auto: V,G = {layout} walks in {:.2} ms", secs * 1e3);
        if best.is_none_or(|b| secs < b.0) {
            best = Some((secs, layout));
        }
    }
    if let Some((secs, layout)) = best {
        tracing::info!("vg auto: using V,G = {layout} ({:.2} ms)", secs * 1e3);
        gpu.set_layout(layout)?;
    }
    Ok(())
}
