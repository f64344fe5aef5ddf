//! One force evaluation, end to end: the parameters every path shares ([`params`]), the engine
//! that keeps the backend and the tree alive between evaluations, the tree-rebuild interval
//! ([`rebuild`]: keys → sort → tree → moments, or a refit of the last tree) and the tree
//! pipeline (`tree_forces`: groups → walk → LETs, each stage timed).

mod device_forces;
pub mod leaf_size;
pub mod params;
pub mod rebuild;
mod tree_forces;

pub use leaf_size::LeafSize;
pub use params::{Backend, ForceParams, Method, TreeBuild, WalkKind};
pub use rebuild::{Rebuild, RefitState};

use crate::comm::Comm;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::lets::LetStats;
use crate::particles::Particles;
use crate::tree::TreeParams;
use crate::walk::direct::direct_forces;
use crate::walk::gpu::{local_rank, Gpu, GpuLayout, VgChoice};
use crate::walk::mac::Mac;
use glam::DVec3;
use std::time::Instant;
use tree_forces::tree_forces;

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

impl ForceResult {
    /// The result of converted forces `f` (accelerations, potentials, p2p and m2p counts per
    /// particle, input order), with the evaluation's `times` and `device`.
    fn of(f: crate::walk::cpu::Forces, times: PhaseTimes, device: String) -> Self {
        let (acc, pot, p2p, m2p) = f;
        Self {
            acc,
            pot,
            p2p,
            m2p,
            times,
            device,
        }
    }
}

/// A force evaluator that keeps what outlives one evaluation: the validated parameters, the
/// tree and its rebuild interval (see [`rebuild`]) and, on the GPU backend, the device
/// context, compiled kernels and device buffers.
pub struct ForceEngine {
    params: ForceParams,
    trees: rebuild::Trees,
    gpu: Option<Gpu>,
    /// `--vg auto` has not chosen a layout yet.
    tune: bool,
    /// LET traffic of the last evaluation.
    let_stats: LetStats,
}

impl ForceEngine {
    /// Validates `params` and opens the backend: `gpu` fails with the reason when no usable GPU
    /// exists; `auto` takes the GPU when one can be opened and the CPU otherwise.
    pub fn new(params: ForceParams) -> Result<Self> {
        params.validate()?;
        // Direct summation stays the float64 CPU reference unless the GPU is asked for by name.
        let gpu = match (params.backend, params.method) {
            (Backend::Cpu, _) | (Backend::Auto, Method::Direct) => None,
            (Backend::Gpu, _) => Some(Gpu::open(local_rank(), params.kernel, params.vg.initial())?),
            (Backend::Auto, Method::Tree) => {
                match Gpu::open(local_rank(), params.kernel, params.vg.initial()) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        tracing::info!("backend auto: using the CPU ({e})");
                        None
                    }
                }
            }
        };
        let tune = params.vg == VgChoice::Auto && gpu.is_some();
        // `auto` leaf size: the best of the backend just chosen; the tree is built on the GPU
        // only where one walks.
        let params = ForceParams {
            ncrit: LeafSize::Fixed(params.ncrit.resolve(gpu.is_some())),
            tree_build: match gpu {
                Some(_) => params.tree_build,
                None => TreeBuild::Host,
            },
            ..params
        };
        Ok(Self {
            params,
            trees: rebuild::Trees::default(),
            gpu,
            tune,
            let_stats: LetStats::default(),
        })
    }

    /// The engine rebuilding its tree as `rebuild` says and refitting it otherwise (the
    /// default rebuilds on every evaluation). A refit needs the particles of the last rebuild,
    /// in the same order: a caller that moves particles between ranks or reorders them does so
    /// only before evaluations for which [`ForceEngine::rebuild_due`] is true (an engine that
    /// finds other particles rebuilds its tree anyway).
    pub fn with_rebuild(mut self, rebuild: Rebuild) -> Self {
        self.trees.set_policy(rebuild);
        self
    }

    /// The tree-rebuild interval in use.
    pub fn rebuild(&self) -> Rebuild {
        self.trees.policy()
    }

    /// True when the next evaluation builds a new tree (always for direct summation): the
    /// same answer on every rank, so that a multi-rank run rebalances its domains exactly
    /// then; between rebuilds the particles must stay where they are.
    pub fn rebuild_due(&self) -> bool {
        self.params.method == Method::Direct || self.trees.due()
    }

    /// What a checkpoint must save of this engine to continue bit for bit (tree topology and
    /// rebuild clock), see [`ForceEngine::restore`].
    pub fn refit_state(&self) -> RefitState {
        self.trees.state()
    }

    /// Continues from a saved [`RefitState`] of this rank, whose particles `p` are those the
    /// state was saved with, in the same order (a restarted run).
    pub fn restore(&mut self, state: RefitState, p: &Particles) {
        self.trees.restore(state, p);
    }

    /// The parameters in use, `auto` choices resolved for the backend (e.g. the leaf size).
    pub fn params(&self) -> &ForceParams {
        &self.params
    }

    /// The GPU kernel layout in use (after `--vg auto` has chosen), if the GPU walks.
    pub fn layout(&self) -> Option<GpuLayout> {
        self.gpu.as_ref().map(Gpu::layout)
    }

    /// What computes the forces, e.g. "cpu (2 threads)" or the GPU's name.
    pub fn device(&self) -> String {
        match &self.gpu {
            Some(g) => g.name.clone(),
            None => format!("cpu ({} threads)", rayon::current_num_threads()),
        }
    }

    /// Hands back the vectors of a result that is no longer needed (its accelerations,
    /// potentials and counts), for a later evaluation to fill instead of allocating new ones:
    /// on the GPU, the forces come down into memory the host has already touched.
    pub fn recycle(&mut self, r: ForceResult) {
        if let Some(gpu) = self.gpu.as_mut() {
            gpu.recycle((r.acc, r.pot, r.p2p, r.m2p));
        }
    }

    /// LET traffic of this rank in the last evaluation (zero on one rank).
    pub fn let_stats(&self) -> LetStats {
        self.let_stats
    }

    /// Device bytes held by the GPU walk (0 on the CPU).
    pub fn device_bytes(&self) -> usize {
        self.gpu.as_ref().map_or(0, Gpu::device_bytes)
    }

    /// One force evaluation on the local particles `p` of this rank, from the particles of
    /// every rank of `comm` (collective: every rank calls it). `old_acc`, the accelerations of
    /// the previous step, feed the acceleration criterion; without them that criterion first
    /// walks with the modified criterion to obtain them (timed as part of `walk`).
    pub fn compute(
        &mut self,
        comm: &dyn Comm,
        p: &Particles,
        old_acc: Option<&[DVec3]>,
    ) -> Result<ForceResult> {
        self.evaluate(comm, p, old_acc, None)
    }

    /// Forces on the active particles of `p` only (`active[i]`, one flag per particle), from
    /// all particles of the job: for those particles the result equals that of
    /// [`ForceEngine::compute`] bit for bit; the entries of the others are zero. The tree is
    /// built over all particles and only the target groups holding an active particle walk.
    pub fn compute_active(
        &mut self,
        comm: &dyn Comm,
        p: &Particles,
        old_acc: Option<&[DVec3]>,
        active: &[bool],
    ) -> Result<ForceResult> {
        debug_assert_eq!(active.len(), p.len());
        self.evaluate(comm, p, old_acc, Some(active))
    }

    fn evaluate(
        &mut self,
        comm: &dyn Comm,
        p: &Particles,
        old_acc: Option<&[DVec3]>,
        active: Option<&[bool]>,
    ) -> Result<ForceResult> {
        let t0 = Instant::now();
        let device = self.device();
        let params = &self.params;
        // Only the acceleration criterion reads the previous accelerations.
        let old_acc = old_acc.filter(|_| params.mac == Mac::Acceleration);
        let mut result = match (params.method, self.gpu.as_mut()) {
            (Method::Direct, gpu) => {
                let mut times = PhaseTimes::default();
                // Every rank needs every particle: gather them (a no-op on one rank).
                let (pos, mass, mine) =
                    times.time("exchange", || crate::domain::gather_all(comm, p))?;
                let (acc, pot): (Vec<DVec3>, Vec<f64>) = match gpu {
                    Some(gpu) => {
                        if comm.size() > 1 {
                            return Err(Error::input(
                                "--method direct on the GPU runs on one rank only \
                                 (use --backend cpu for a multi-rank direct sum)",
                            ));
                        }
                        let src: Vec<[f32; 4]> = pos
                            .iter()
                            .zip(&mass)
                            .map(|(x, &m)| [x.x as f32, x.y as f32, x.z as f32, m as f32])
                            .collect();
                        let eps2 = (params.eps * params.eps) as f32;
                        let out = gpu.direct(&src, eps2, &mut times)?;
                        out.iter()
                            .map(|f| {
                                (
                                    DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64),
                                    f[3] as f64,
                                )
                            })
                            .unzip()
                    }
                    None => {
                        let targets: Vec<usize> = mine
                            .clone()
                            .filter(|&i| active.is_none_or(|a| a[i - mine.start]))
                            .collect();
                        let (acc, pot) =
                            times.time("walk", || direct_forces(&pos, &mass, params.eps, &targets));
                        let mut all = (vec![DVec3::ZERO; p.len()], vec![0.0; p.len()]);
                        for (k, &i) in targets.iter().enumerate() {
                            (all.0[i - mine.start], all.1[i - mine.start]) = (acc[k], pot[k]);
                        }
                        all
                    }
                };
                let (mut acc, mut pot) = (acc, pot);
                if let Some(active) = active {
                    // The GPU sums for every particle; only the active ones are reported.
                    for (i, _) in active.iter().enumerate().filter(|(_, &a)| !a) {
                        (acc[i], pot[i]) = (DVec3::ZERO, 0.0);
                    }
                }
                let n = pos.len() as u32;
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
                let mut times = PhaseTimes::default();
                let rebuild = self.trees.due();
                let tp = TreeParams {
                    order: params.order,
                    ncrit: params.ncrit.resolve(gpu.is_some()),
                    mac: params.mac,
                    theta: params.theta,
                };
                let situation = device_forces::Situation {
                    ranks: comm.size(),
                    rebuild: self.trees.policy(),
                    partial: active.is_some(),
                    tune,
                    old_acc: old_acc.is_some(),
                };
                let (r, stats, walked) = match gpu {
                    Some(gpu) if device_forces::applies(params, &situation, p) => {
                        let r = device_forces::device_forces(
                            p, params, &tp, gpu, old_acc, device, times,
                        )?;
                        (r, LetStats::default(), p.len())
                    }
                    mut gpu => {
                        let builder = gpu
                            .as_deref_mut()
                            .filter(|_| params.tree_build == TreeBuild::Gpu);
                        let tree = self.trees.prepare(p, &tp, rebuild, builder, &mut times)?;
                        tree_forces(
                            comm, p, tree, params, gpu, tune, old_acc, active, device, times,
                        )?
                    }
                };
                self.trees.record(comm, rebuild, &r.times, walked);
                self.let_stats = stats;
                r
            }
        };
        result.times.add("total", t0.elapsed().as_secs_f64());
        Ok(result)
    }
}

/// One force evaluation with a throw-away [`ForceEngine`] (see [`ForceEngine::compute`]).
pub fn compute_forces(
    comm: &dyn Comm,
    p: &Particles,
    params: &ForceParams,
    old_acc: Option<&[DVec3]>,
) -> Result<ForceResult> {
    ForceEngine::new(params.clone())?.compute(comm, p, old_acc)
}
