//! Time integration: the kick–drift–kick leapfrog of seed 002 (Eq. 1–3), with a shared step or
//! with block (power-of-two hierarchical) steps chosen per particle as in GADGET (seed 003):
//! the integer [`timeline`], the per-particle [`state`] (bins, last forces) and its kicks, on the
//! host or, with the particles on the GPU, there ([`state_gpu`]), [`advice`] on the step, and
//! the drift and kick factors of runs in comoving coordinates ([`comoving`]).

pub mod advice;
pub mod comoving;
pub mod leapfrog;
pub mod state;
pub mod state_gpu;
pub mod timeline;

pub use advice::{step_warning, top_step_within};
pub use comoving::{Expansion, HalfKick};
pub use leapfrog::{drift, wrap};
pub use state::{BinSummary, IntegratorState, NonFinite};
pub use timeline::{Stepping, Timeline};
