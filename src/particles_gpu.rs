//! A rank's particles on the device, kept there between force evaluations: positions and
//! velocities (three doubles each), masses and ids, the device twin of [`Particles`]. The
//! positions and masses are what every evaluation reads; the velocities and ids travel with
//! the particles when a domain decomposition moves them between ranks (`domain::gpu`), and come
//! down with them for output.

use crate::error::Result;
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{int, ptr, Stages};
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
}

impl<R: KernelRunner> ParticleArrays<R> {
    /// Empty arrays.
    pub fn new(r: &R) -> Result<Self> {
        Ok(Self {
            pos: r.alloc(1)?,
            vel: r.alloc(1)?,
            mass: r.alloc(1)?,
            id: r.alloc(1)?,
        })
    }

    /// Grows the arrays to `n` particles (the velocities and ids only with `payload`).
    pub fn reserve(&mut self, r: &R, n: usize, payload: bool) -> Result<()> {
        grow(r, &mut self.pos, 3 * n)?;
        grow(r, &mut self.mass, n)?;
        if payload {
            grow(r, &mut self.vel, 3 * n)?;
            grow(r, &mut self.id, n)?;
        }
        Ok(())
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        8 * (self.pos.len() + self.vel.len() + self.mass.len() + self.id.len())
    }
}

/// This rank's particles on the device.
pub struct DeviceParticles<R: KernelRunner> {
    /// The particles.
    pub arrays: ParticleArrays<R>,
    /// How many there are.
    pub n: usize,
    /// Whether the velocities and ids are there too (loaded with [`DeviceParticles::load`]).
    pub payload: bool,
    /// Per-block partial bounds.
    partial: R::Array<f64>,
}

impl<R: KernelRunner> DeviceParticles<R> {
    /// No particles yet, on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        Ok(Self {
            arrays: ParticleArrays::new(s.runner())?,
            n: 0,
            payload: false,
            partial: s.runner().alloc(6 * BOUNDS_BLOCKS)?,
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        self.arrays.bytes() + 8 * self.partial.len()
    }

    /// Copies `p` up: positions and masses, and with `payload` velocities and ids too.
    pub fn load(&mut self, s: &Stages<R>, p: &Particles, payload: bool) -> Result<()> {
        let r = s.runner();
        self.arrays.reserve(r, p.len(), payload)?;
        let a = &mut self.arrays;
        r.upload(bytemuck::cast_slice(&p.pos), &mut a.pos)?;
        r.upload(&p.mass, &mut a.mass)?;
        if payload {
            r.upload(bytemuck::cast_slice(&p.vel), &mut a.vel)?;
            r.upload(&p.id, &mut a.id)?;
        }
        self.n = p.len();
        self.payload = payload;
        Ok(())
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
        if self.payload {
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
                &[ptr(&self.arrays.pos), int(self.n)?, ptr(&self.partial)],
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
