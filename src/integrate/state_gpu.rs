//! The time step on the device (`cuda/integrate.cu`): the kicks, drifts and bins of
//! [`IntegratorState`](super::IntegratorState) on the particles and state that live there
//! ([`DeviceParticles`]), the walk's results taken into that state without coming down, and
//! the reductions a run reports (bins in use, particles due, conserved quantities). The same
//! float64 operations as the host's, so from the same forces the same trajectory.

use super::timeline::MAX_DEPTH;
use super::{BinSummary, NonFinite, Timeline};
use crate::error::Result;
use crate::gpu::args::{
    AccMagnitudesArgs, AddBackgroundArgs, AssignBinsArgs, BinSummaryArgs, ConservedSumsArgs,
    DriftArgs, FirstNonFiniteArgs, HalfKickArgs, KeepForcesArgs, ParticleRecordArgs,
    SynchronisedFlagsArgs,
};
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::particles_gpu::DeviceParticles;
use crate::walk::cpu::Units;
use glam::DVec3;

/// Blocks of the per-block reductions (their partial results come down).
const REDUCE_BLOCKS: usize = 256;

/// Words per block of `bin_summary`'s partial results: lowest and highest bin, particles due,
/// and the summed cost's low and high words.
const BIN_WORDS: usize = 5;

/// Particles per block of the conserved sums (CONSERVED_CHUNK in cuda/integrate.cu).
const CONSERVED_CHUNK: usize = 16384;

/// The device arrays of the time step besides the particles' (flags and partial sums).
pub struct StepArrays<R: KernelRunner> {
    /// One flag per particle: synchronised at the tick last asked for.
    flags: R::Array<u8>,
    bins: R::Array<u32>,
    sums: R::Array<f64>,
    /// The first bad particle's index, and its record.
    first: R::Array<u32>,
    record: R::Array<f64>,
    /// The half kick's factor of each bin, uploaded by a kick whose factors differ from the
    /// last ones uploaded.
    kick: R::Array<f64>,
    /// The bits of the factors `kick` holds (none before the first kick).
    kick_held: Vec<u64>,
}

impl<R: KernelRunner> StepArrays<R> {
    /// Empty arrays on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            flags: r.alloc(1)?,
            bins: r.alloc(BIN_WORDS * REDUCE_BLOCKS)?,
            sums: r.alloc(1)?,
            first: r.alloc(1)?,
            record: r.alloc(8)?,
            kick: r.alloc(MAX_DEPTH as usize + 1)?,
            kick_held: Vec::new(),
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        self.flags.len() + 4 * (self.bins.len() + 1) + 8 * (self.sums.len() + 8 + self.kick.len())
    }

    /// Half kick of the particles of `p` that end their step at tick `tick` of `tl`, by the
    /// factor of their bin in `kick` (one per bin 0 ..= depth; see
    /// [`IntegratorState::half_kick`](super::IntegratorState::half_kick)). The factors are
    /// uploaded only when they differ (bit for bit) from those the device holds: they change
    /// with the time step, not with every kick.
    pub fn half_kick(
        &mut self,
        s: &Stages<R>,
        p: &mut DeviceParticles<R>,
        tl: &Timeline,
        tick: u64,
        kick: &[f64],
    ) -> Result<()> {
        tl.check_per_bin(kick)?;
        if !kick
            .iter()
            .map(|k| k.to_bits())
            .eq(self.kick_held.iter().copied())
        {
            self.kick_held.clear();
            s.runner().upload_queued(kick, &mut self.kick)?;
            self.kick_held.extend(kick.iter().map(|k| k.to_bits()));
        }
        let a = &p.arrays;
        // SAFETY: the state's arrays hold p.n particles; kick one factor per bin.
        unsafe {
            s.launch(
                "half_kick",
                blocks(p.n),
                &HalfKickArgs {
                    n: int(p.n)?,
                    bin: a.bin.ptr(),
                    ti: tick,
                    depth: tl.depth as i32,
                    kick: self.kick.ptr(),
                    acc: a.acc.ptr(),
                    vel: a.vel.ptr(),
                },
            )
        }
    }

    /// Drift of every particle of `p` by `dt` (time units, or the comoving drift factor), then
    /// wrapped into [0, `period`)³ (0: no box; [`crate::integrate::wrap`]).
    pub fn drift(
        &self,
        s: &Stages<R>,
        p: &mut DeviceParticles<R>,
        dt: f64,
        period: f64,
    ) -> Result<()> {
        let a = &p.arrays;
        // SAFETY: the arrays hold p.n particles.
        unsafe {
            s.launch(
                "drift",
                blocks(p.n),
                &DriftArgs {
                    n: int(p.n)?,
                    dt,
                    period,
                    vel: a.vel.ptr(),
                    pos: a.pos.ptr(),
                },
            )
        }
    }

    /// Adds `c` x to the acceleration of the particles of `p` at x that end their step at
    /// `tick` of `tl` (see
    /// [`IntegratorState::add_background`](super::IntegratorState::add_background)).
    pub fn add_background(
        &self,
        s: &Stages<R>,
        p: &mut DeviceParticles<R>,
        c: f64,
        tl: &Timeline,
        tick: u64,
    ) -> Result<()> {
        let a = &p.arrays;
        // SAFETY: the arrays and the state hold p.n particles.
        unsafe {
            s.launch(
                "add_background",
                blocks(p.n),
                &AddBackgroundArgs {
                    n: int(p.n)?,
                    bin: a.bin.ptr(),
                    ti: tick,
                    depth: tl.depth as i32,
                    c,
                    pos: a.pos.ptr(),
                    acc: a.acc.ptr(),
                },
            )
        }
    }

    /// New bins for the particles that end their step at `tick` (η, ε as
    /// [`IntegratorState::assign_bins`](super::IntegratorState::assign_bins) takes them).
    pub fn assign_bins(
        &self,
        s: &Stages<R>,
        p: &mut DeviceParticles<R>,
        tl: &Timeline,
        eta: f64,
        eps: f64,
        tick: u64,
    ) -> Result<()> {
        let a = &p.arrays;
        // SAFETY: the state's arrays hold p.n particles.
        unsafe {
            s.launch(
                "assign_bins",
                blocks(p.n),
                &AssignBinsArgs {
                    n: int(p.n)?,
                    ti: tick,
                    depth: tl.depth as i32,
                    dt_top: tl.dt_top,
                    eta,
                    eps,
                    acc: a.acc.ptr(),
                    bin: a.bin.ptr(),
                },
            )
        }
    }

    /// Device address of one flag per particle of `p`, set where it ends its step at `tick`.
    pub fn synchronised(
        &mut self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
        tl: &Timeline,
        tick: u64,
    ) -> Result<u64> {
        grow(s.runner(), &mut self.flags, p.n)?;
        // SAFETY: flags holds p.n entries, the bins p.n.
        unsafe {
            s.launch(
                "synchronised_flags",
                blocks(p.n),
                &SynchronisedFlagsArgs {
                    n: int(p.n)?,
                    bin: p.arrays.bin.ptr(),
                    ti: tick,
                    depth: tl.depth as i32,
                    flag: self.flags.ptr(),
                },
            )?;
        }
        Ok(self.flags.ptr())
    }

    /// The walk's results at device addresses `out` (acceleration and potential in a tree's
    /// frame, G = 1) and `counts` (p2p with the particle itself, m2p), in the particles' order,
    /// taken into the state of `p` in `units`: for every particle, or for those flagged at
    /// device address `active`.
    pub fn keep_forces(
        &self,
        s: &Stages<R>,
        p: &mut DeviceParticles<R>,
        (out, counts): (u64, u64),
        units: Units,
        active: Option<u64>,
    ) -> Result<()> {
        let a = &p.arrays;
        // SAFETY: the results, the flags (when given) and the state hold p.n particles.
        unsafe {
            s.launch(
                "keep_forces",
                blocks(p.n),
                &KeepForcesArgs {
                    n: int(p.n)?,
                    out,
                    counts,
                    acc_unit: units.acc,
                    pot_unit: units.pot,
                    active: active.unwrap_or(0),
                    has_active: active.is_some() as i32,
                    acc: a.acc.ptr(),
                    pot: a.pot.ptr(),
                    cost: a.cost.ptr(),
                },
            )
        }
    }

    /// Each particle's |a| of the state of `p` times `scale` (L² for the frame of a cube of
    /// side L) in float32, written at device address `into`: the acceleration criterion's
    /// previous accelerations.
    pub fn acc_magnitudes(
        &self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
        scale: f64,
        into: u64,
    ) -> Result<()> {
        // SAFETY: `into` holds p.n floats, the state p.n accelerations.
        unsafe {
            s.launch(
                "acc_magnitudes",
                blocks(p.n),
                &AccMagnitudesArgs {
                    n: int(p.n)?,
                    acc: p.arrays.acc.ptr(),
                    scale,
                    amag: into,
                },
            )
        }
    }

    /// The first particle of `p` whose state holds a non-finite acceleration or potential
    /// (only its record comes down).
    pub fn first_non_finite(
        &mut self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
    ) -> Result<Option<NonFinite>> {
        s.runner().fill(&mut self.first, 1, u32::MAX)?;
        let a = &p.arrays;
        // SAFETY: the state holds p.n particles; first one word.
        unsafe {
            s.launch(
                "first_non_finite",
                blocks(p.n),
                &FirstNonFiniteArgs {
                    n: int(p.n)?,
                    acc: a.acc.ptr(),
                    pot: a.pot.ptr(),
                    first: self.first.ptr(),
                },
            )?;
        }
        let i = s.fetch(&self.first, 1)?[0];
        if i == u32::MAX {
            return Ok(None);
        }
        // SAFETY: i < p.n; record holds 8 doubles.
        unsafe {
            s.launch(
                "particle_record",
                1,
                &ParticleRecordArgs {
                    i: i as i32,
                    id: a.id.ptr(),
                    pos: a.pos.ptr(),
                    acc: a.acc.ptr(),
                    pot: a.pot.ptr(),
                    out: self.record.ptr(),
                },
            )?;
        }
        let r = s.fetch(&self.record, 8)?;
        Ok(Some(NonFinite {
            id: r[0].to_bits(),
            pos: DVec3::new(r[1], r[2], r[3]),
            acc: DVec3::new(r[4], r[5], r[6]),
            pot: r[7],
        }))
    }

    /// The bins of `p` in use, the particles due at `tick`, and their summed cost.
    pub fn bins(
        &self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
        tl: &Timeline,
        tick: u64,
    ) -> Result<BinSummary> {
        // SAFETY: bins holds BIN_WORDS words per block; the state p.n bins and costs.
        unsafe {
            s.launch(
                "bin_summary",
                REDUCE_BLOCKS as u32,
                &BinSummaryArgs {
                    n: int(p.n)?,
                    bin: p.arrays.bin.ptr(),
                    ti: tick,
                    depth: tl.depth as i32,
                    cost: p.arrays.cost.ptr(),
                    partial: self.bins.ptr(),
                },
            )?;
        }
        let partial = s.fetch(&self.bins, BIN_WORDS * REDUCE_BLOCKS)?;
        Ok(partial.chunks_exact(BIN_WORDS).fold(
            BinSummary {
                lowest: u8::MAX,
                highest: 0,
                due: 0,
                particles: p.n,
                cost: 0,
            },
            |b, c| BinSummary {
                lowest: b.lowest.min(c[0].min(255) as u8),
                highest: b.highest.max(c[1] as u8),
                due: b.due + c[2] as usize,
                cost: b.cost + (c[3] as u64 | (c[4] as u64) << 32),
                ..b
            },
        ))
    }

    /// The sums of the conserved quantities of `p` with its state's potentials
    /// ([`Conserved::sums`](crate::diag::conservation::Conserved::sums)), in a fixed order.
    pub fn conserved(&mut self, s: &Stages<R>, p: &DeviceParticles<R>) -> Result<[f64; 8]> {
        let chunks = p.n.div_ceil(CONSERVED_CHUNK);
        let mut total = [0.0; 8];
        if chunks == 0 {
            return Ok(total);
        }
        grow(s.runner(), &mut self.sums, 8 * chunks)?;
        let a = &p.arrays;
        // SAFETY: sums holds 8 doubles per chunk; the arrays p.n particles.
        unsafe {
            s.launch(
                "conserved_sums",
                chunks as u32,
                &ConservedSumsArgs {
                    n: int(p.n)?,
                    pos: a.pos.ptr(),
                    vel: a.vel.ptr(),
                    mass: a.mass.ptr(),
                    pot: a.pot.ptr(),
                    partial: self.sums.ptr(),
                },
            )?;
        }
        for c in s.fetch(&self.sums, 8 * chunks)?.chunks_exact(8) {
            for (t, x) in total.iter_mut().zip(c) {
                *t += x;
            }
        }
        Ok(total)
    }
}
