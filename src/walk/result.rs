//! The result of one force evaluation: what every path (tree walk or direct summation, CPU or
//! GPU) gives and the integrator and the reports take.

use crate::diag::PhaseTimes;
use crate::walk::cpu::Forces;
use glam::DVec3;

/// The result of one force evaluation, in the order of the engine's particles, G included.
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
    /// Bytes this rank copied between host and device in this evaluation: (up, down).
    pub bus_bytes: (u64, u64),
}

impl ForceResult {
    /// The result of converted forces `f` (accelerations, potentials, p2p and m2p counts per
    /// particle), with the evaluation's `times` and `device`.
    pub fn of(f: Forces, times: PhaseTimes, device: String) -> Self {
        let (acc, pot, p2p, m2p) = f;
        Self {
            acc,
            pot,
            p2p,
            m2p,
            times,
            device,
            bus_bytes: (0, 0),
        }
    }
}
