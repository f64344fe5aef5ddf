//! hinoki: a Barnes–Hut tree code for gravitational N-body simulation.
//!
//! One force evaluation is a pipeline, and the modules follow it (see `ARCHITECTURE.md`):
//! [`sfc`] keys → [`domain`] decomposition → [`tree`] build and moments → [`lets`] → [`walk`]
//! (CPU grouped walk, single-particle walk, GPU walk, direct summation) → [`integrate`] →
//! [`diag`]. Every stage is reached through one [`backend`] trait, implemented on the CPU and on
//! the GPU; [`forces`] orchestrates one evaluation above it, the same for one rank or many, and
//! [`gpu`] is the GPU runtime the GPU stages launch through. [`ics`] makes initial conditions,
//! [`io`] reads and writes files and configurations, [`comm`] is the only place that knows
//! about MPI, [`resources`] checks what the machine can give (host memory, threads) before it
//! is asked.
//! Units are N-body units with G = 1 unless a run configures otherwise; softening is Plummer.

pub mod backend;
pub mod comm;
pub mod cosmology;
pub mod diag;
pub mod domain;
pub mod error;
pub mod forces;
pub mod gpu;
pub mod hash;
pub mod ics;
pub mod integrate;
pub mod io;
pub mod lets;
pub mod particles;
pub mod particles_gpu;
pub mod render;
pub mod resources;
pub mod sfc;
pub mod simulation;
pub mod tree;
pub mod walk;

pub use error::{Error, Result};
pub use particles::Particles;
