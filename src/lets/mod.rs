//! Locally Essential Trees (seed 001 Sec. 7.3): what each rank needs of every other rank's tree.
//!
//! Every rank publishes the region its particles occupy ([`Region`]: tight boxes around them
//! and their smallest previous acceleration), by allgatherv ([`gather_regions`]). For each other
//! rank it walks its own tree against that region ([`export`] on the host, in parallel over
//! destinations with rayon; [`export_gpu`] on the device, the same words) and packs the result
//! in the walk's node format ([`wire`]); counts and payloads travel by one alltoallv. The
//! received LETs are unpacked into one forest that the ordinary walk (CPU or GPU) runs through
//! after the local tree, or that is merged with the local tree into one tree ([`union`],
//! [`LetWalk`]). `forces` orchestrates the exchange.

mod export;
pub mod export_gpu;
mod region;
pub mod union;
pub mod union_gpu;
pub mod wire;

pub use export::export;
pub use region::{Region, TargetBox};

use crate::comm::Comm;
use crate::error::{Error, Result};
use wire::{malformed, CELL_WORDS, HEADER_WORDS, PARTICLE_WORDS};

/// How a rank walks the LETs it received, with its own tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LetWalk {
    /// Merged in a periodic box, apart in open boundaries ([`LetWalk::resolve`]).
    Auto,
    /// Merged with the local tree into one tree ([`union`]): the cells that the domains'
    /// boundaries cut made whole again, walked once, after the LETs arrive.
    Merged,
    /// Apart: the local tree walked while the LETs travel, then the forest of LETs.
    Apart,
}

impl LetWalk {
    /// The walk `Auto` is in a `periodic` box or not: merged where the domains cut the trees'
    /// cells at every level (a periodic box, whose trees are built in a frame moved to a
    /// random centre at every rebuild), apart where the domains are whole cells of the trees
    /// (open boundaries, whose trees are built in the domains' key cube): there the merge
    /// finds little to merge, and the local walk's overlap with the exchange is worth more.
    pub fn resolve(self, periodic: bool) -> LetWalk {
        match (self, periodic) {
            (LetWalk::Auto, true) => LetWalk::Merged,
            (LetWalk::Auto, false) => LetWalk::Apart,
            (walk, _) => walk,
        }
    }
}

/// What one LET holds: its cells and particles, from which its words follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LetShape {
    /// Cell records.
    pub cells: usize,
    /// Particles.
    pub particles: usize,
}

impl LetShape {
    /// Its words in the wire format ([`wire`]): none without cells (nothing is sent).
    pub fn words(self) -> usize {
        match self.cells {
            0 => 0,
            c => HEADER_WORDS + c * CELL_WORDS + self.particles * PARTICLE_WORDS,
        }
    }

    /// The shapes of the LETs sent to this rank, from rank r's (cells, particles) at 2r, 2r + 1
    /// of `words` (what every rank told it), checked: each LET's words must fit an offset of
    /// 32 bits, as the forest's do.
    pub fn decode(words: &[u64]) -> Result<Vec<LetShape>> {
        let mut total = 0u64;
        words
            .chunks_exact(2)
            .enumerate()
            .map(|(src, w)| {
                let n = (w[1].checked_mul(PARTICLE_WORDS as u64))
                    .and_then(|p| w[0].checked_mul(CELL_WORDS as u64)?.checked_add(p));
                total = n
                    .and_then(|n| total.checked_add(n + HEADER_WORDS as u64))
                    .filter(|&t| t <= u32::MAX as u64)
                    .ok_or_else(|| {
                        malformed(
                            src,
                            &format!("{} cells and {} particles exceed 2^32 words", w[0], w[1]),
                        )
                    })?;
                Ok(LetShape {
                    cells: w[0] as usize,
                    particles: w[1] as usize,
                })
            })
            .collect()
    }

    /// `shapes` as the words [`LetShape::decode`] reads, two per rank.
    pub fn encode(shapes: &[LetShape]) -> Vec<u64> {
        shapes
            .iter()
            .flat_map(|s| [s.cells as u64, s.particles as u64])
            .collect()
    }
}

/// The LETs this rank exported for every rank, in rank order (none for itself).
#[derive(Clone, Debug, PartialEq)]
pub enum Outgoing {
    /// On the host, for an exchange through the [`Comm`]: every destination's words
    /// concatenated, and the words of each.
    Host {
        /// The words.
        words: Vec<f32>,
        /// Words per destination.
        counts: Vec<usize>,
    },
    /// Left on the device where they were packed, for the backend's device exchange: the
    /// shape of each destination's LET.
    Device(Vec<LetShape>),
}

/// The LETs this rank received from every rank, in rank order.
#[derive(Clone, Copy, Debug)]
pub enum Incoming<'a> {
    /// On the host: every source's words concatenated, and the words of each.
    Host {
        /// The words.
        data: &'a [f32],
        /// Words per source.
        counts: &'a [usize],
    },
    /// On the device, by the backend's device exchange: the shape of each source's LET.
    Device(&'a [LetShape]),
}

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

/// The regions of every rank (this one's is `mine`), gathered in rank order: one allgatherv
/// of their encodings, each of which says its own length. Collective.
pub fn gather_regions(comm: &dyn Comm, mine: &Region) -> Result<Vec<Region>> {
    let words = comm.allgatherv_f64(&mine.encode())?;
    let mut at = 0usize;
    let regions = (0..comm.size())
        .map(|rank| {
            let (r, len) = Region::decode(&words[at..])
                .ok_or_else(|| Error::comm(format!("the region of rank {rank} is malformed")))?;
            at += len;
            Ok(r)
        })
        .collect::<Result<Vec<_>>>()?;
    match at == words.len() {
        true => Ok(regions),
        false => Err(Error::comm(format!(
            "the ranks' regions hold {} words more than {} regions",
            words.len() - at,
            comm.size()
        ))),
    }
}

#[cfg(test)]
mod tests;
