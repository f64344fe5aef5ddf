//! A rank's particles on the device, kept there between force evaluations: positions and
//! velocities (three doubles each), masses and ids, the device twin of [`Particles`]. The
//! positions and masses are what every evaluation reads; the velocities and ids travel with
//! the particles when a domain decomposition moves them between ranks (`domain::gpu`), and come
//! down with them for output; in a run the integrator's state (bins, last forces) lives here
//! too and travels with them.

use crate::error::Result;
use crate::gpu::args::{ParticleBoundsArgs, ParticleSet};
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{int, Stages};
use crate::integrate::IntegratorState;
use crate::particles::Particles;
use crate::tree::build_gpu::Positions;
use glam::DVec3;

/// Blocks of the bounds reduction (its partial results come down).
const BOUNDS_BLOCKS: usize = 256;

/// One set of particle arrays on the device.
pub struct ParticleArrays<R: KernelRunner> {
    /// Positions, 3 doubles each (length units).
    pub pos: R::Array<f64>,
    /// Velocities, 3 doubles each (velocity units).
    pub vel: R::Array<f64>,
    /// Masses (mass units).
    pub mass: R::Array<f64>,
    /// Ids.
    pub id: R::Array<u64>,
    /// In a run, the integrator's state ([`IntegratorState`]): time-step bins.
    pub bin: R::Array<u8>,
    /// Accelerations of the last evaluation, 3 doubles each, G applied (length / time²).
    pub acc: R::Array<f64>,
    /// Potentials of the last evaluation, G applied (energy per mass).
    pub pot: R::Array<f64>,
    /// Interactions of the last evaluation (its cost).
    pub cost: R::Array<f64>,
}

/// What a set of particle arrays holds besides positions and masses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Velocities and ids (what a migration moves and output needs).
    pub payload: bool,
    /// The integrator's state.
    pub state: bool,
}

impl<R: KernelRunner> ParticleArrays<R> {
    /// Empty arrays.
    pub fn new(r: &R) -> Result<Self> {
        Ok(Self {
            pos: r.alloc(1)?,
            vel: r.alloc(1)?,
            mass: r.alloc(1)?,
            id: r.alloc(1)?,
            bin: r.alloc(1)?,
            acc: r.alloc(1)?,
            pot: r.alloc(1)?,
            cost: r.alloc(1)?,
        })
    }

    /// Grows the arrays to `n` particles: positions and masses, and what `held` says.
    pub fn reserve(&mut self, r: &R, n: usize, held: Held) -> Result<()> {
        grow(r, &mut self.pos, 3 * n)?;
        grow(r, &mut self.mass, n)?;
        if held.payload {
            grow(r, &mut self.vel, 3 * n)?;
            grow(r, &mut self.id, n)?;
        }
        if held.state {
            grow(r, &mut self.bin, n)?;
            grow(r, &mut self.acc, 3 * n)?;
            grow(r, &mut self.pot, n)?;
            grow(r, &mut self.cost, n)?;
        }
        Ok(())
    }

    /// Where the arrays are, as kernels take them (`ParticleSet` of `cuda/particles.cu`).
    pub fn set(&self) -> ParticleSet {
        ParticleSet {
            pos: self.pos.ptr(),
            vel: self.vel.ptr(),
            mass: self.mass.ptr(),
            id: self.id.ptr(),
            bin: self.bin.ptr(),
            acc: self.acc.ptr(),
            pot: self.pot.ptr(),
            cost: self.cost.ptr(),
        }
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        8 * (self.pos.len()
            + self.vel.len()
            + self.mass.len()
            + self.id.len()
            + self.acc.len()
            + self.pot.len()
            + self.cost.len())
            + self.bin.len()
    }
}

/// This rank's particles on the device.
pub struct DeviceParticles<R: KernelRunner> {
    /// The particles.
    pub arrays: ParticleArrays<R>,
    /// How many there are.
    pub n: usize,
    /// What is there besides positions and masses.
    pub held: Held,
    /// Per-block partial bounds.
    partial: R::Array<f64>,
}

impl<R: KernelRunner> DeviceParticles<R> {
    /// No particles yet, on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        Ok(Self {
            arrays: ParticleArrays::new(s.runner())?,
            n: 0,
            held: Held::default(),
            partial: s.runner().alloc(6 * BOUNDS_BLOCKS)?,
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        self.arrays.bytes() + 8 * self.partial.len()
    }

    /// Copies `p` up: positions and masses, and with `payload` velocities and ids too. Drops
    /// the integrator's state.
    pub fn load(&mut self, s: &Stages<R>, p: &Particles, payload: bool) -> Result<()> {
        let r = s.runner();
        let held = Held {
            payload,
            state: false,
        };
        self.arrays.reserve(r, p.len(), held)?;
        let a = &mut self.arrays;
        r.upload(bytemuck::cast_slice(&p.pos), &mut a.pos)?;
        r.upload(&p.mass, &mut a.mass)?;
        if payload {
            r.upload(bytemuck::cast_slice(&p.vel), &mut a.vel)?;
            r.upload(&p.id, &mut a.id)?;
        }
        self.n = p.len();
        self.held = held;
        Ok(())
    }

    /// Copies the integrator's state `st` of the particles loaded up.
    pub fn load_state(&mut self, s: &Stages<R>, st: &IntegratorState) -> Result<()> {
        if st.len() != self.n {
            return Err(crate::Error::device(format!(
                "an integrator state of {} particles for {} on the GPU",
                st.len(),
                self.n
            )));
        }
        let r = s.runner();
        self.held.state = true;
        self.arrays.reserve(r, self.n, self.held)?;
        let a = &mut self.arrays;
        r.upload(&st.bin, &mut a.bin)?;
        r.upload(bytemuck::cast_slice(&st.acc), &mut a.acc)?;
        r.upload(&st.pot, &mut a.pot)?;
        r.upload(&st.cost, &mut a.cost)
    }

    /// The integrator's state copied down (`None` where none was loaded).
    pub fn state(&self, s: &Stages<R>) -> Result<Option<IntegratorState>> {
        if !self.held.state {
            return Ok(None);
        }
        let (n, a) = (self.n, &self.arrays);
        Ok(Some(IntegratorState {
            bin: s.fetch(&a.bin, n)?,
            acc: s.fetch_as(&a.acc, n)?,
            pot: s.fetch(&a.pot, n)?,
            cost: s.fetch(&a.cost, n)?,
        }))
    }

    /// Copies new positions and masses of the particles loaded up (the same particles, moved).
    pub fn update(&mut self, s: &Stages<R>, p: &Particles) -> Result<()> {
        let r = s.runner();
        if p.len() != self.n {
            return Err(crate::Error::device(format!(
                "{} new positions for {} particles on the GPU",
                p.len(),
                self.n
            )));
        }
        r.upload(bytemuck::cast_slice(&p.pos), &mut self.arrays.pos)?;
        r.upload(&p.mass, &mut self.arrays.mass)
    }

    /// The particles copied down (velocities and ids zero where they were not loaded).
    pub fn download(&self, s: &Stages<R>) -> Result<Particles> {
        let n = self.n;
        let a = &self.arrays;
        let mut p = Particles {
            pos: s.fetch_as(&a.pos, n)?,
            mass: s.fetch(&a.mass, n)?,
            vel: vec![DVec3::ZERO; n],
            id: vec![0; n],
        };
        if self.held.payload {
            p.vel = s.fetch_as(&a.vel, n)?;
            p.id = s.fetch(&a.id, n)?;
        }
        Ok(p)
    }

    /// Where the positions and masses are, for a tree build.
    pub fn positions(&self) -> Positions {
        Positions {
            pos: self.arrays.pos.ptr(),
            mass: self.arrays.mass.ptr(),
            n: self.n,
        }
    }

    /// The bounding box (lowest, highest corner; length units) of the positions; inverted
    /// (+inf, -inf) without particles.
    pub fn bounds(&self, s: &Stages<R>) -> Result<(DVec3, DVec3)> {
        // SAFETY: the positions hold n particles, partial 6 doubles per block.
        unsafe {
            s.launch(
                "particle_bounds",
                BOUNDS_BLOCKS as u32,
                &ParticleBoundsArgs {
                    pos: self.arrays.pos.ptr(),
                    n: int(self.n)?,
                    partial: self.partial.ptr(),
                },
            )?;
        }
        let partial = s.fetch(&self.partial, 6 * BOUNDS_BLOCKS)?;
        let (mut lo, mut hi) = (DVec3::INFINITY, DVec3::NEG_INFINITY);
        for b in partial.chunks_exact(6) {
            lo = lo.min(DVec3::new(b[0], b[1], b[2]));
            hi = hi.max(DVec3::new(b[3], b[4], b[5]));
        }
        Ok((lo, hi))
    }
}
