//! Locally Essential Trees (seed 001 Sec. 7.3): what each rank needs of every other rank's tree.
//!
//! Every rank publishes the region its particles occupy ([`Region`]: tight boxes around them
//! and their smallest previous acceleration), by allgatherv ([`gather_regions`]). For each other
//! rank it walks its own tree against that region ([`export`] on the host, in parallel over
//! destinations with rayon; [`export_gpu`] on the device, the same words) and packs the result
//! in the walk's node format ([`wire`]); counts and payloads travel by one alltoallv. The
//! received LETs are unpacked into one forest that the ordinary walk (CPU or GPU) runs through
//! after the local tree. `forces` orchestrates the exchange.

mod export;
pub mod export_gpu;
mod region;
pub mod wire;

pub use export::export;
pub use region::{Region, TargetBox};

use crate::comm::Comm;
use crate::error::Result;

/// What one LET exchange moved, for this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LetStats {
    /// Bytes of LET data this rank sent to other ranks.
    pub bytes_sent: u64,
    /// Bytes of LET data this rank received.
    pub bytes_received: u64,
    /// Cells received (in the forest).
    pub cells_received: u64,
    /// Particles received (in the forest).
    pub particles_received: u64,
}

/// The regions of every rank (this one's is `mine`), gathered in rank order. Collective.
pub fn gather_regions(comm: &dyn Comm, mine: &Region) -> Result<Vec<Region>> {
    let lens = comm.allgather_u64(1 + mine.boxes.len() as u64 * 6);
    let words = comm.allgatherv_f64(&mine.encode())?;
    let mut at = 0usize;
    Ok(lens
        .into_iter()
        .map(|n| {
            let r = Region::decode(&words[at..at + n as usize]);
            at += n as usize;
            r
        })
        .collect())
}

#[cfg(test)]
mod tests;
