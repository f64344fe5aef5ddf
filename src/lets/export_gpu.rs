//! LETs on the device (`cuda/lets.cu`): the region of this rank's particles from the tree built
//! there, the LET of that tree for every other rank packed there into one buffer that comes
//! down once, and the received forest, gone up once, unpacked there into the walk's arrays. The
//! same region, the same LET words and the same forest as the host's [`Region::of_tree`],
//! [`export`](super::export) and [`unpack_forest`](super::wire::unpack_forest) (tested on the
//! emulator), so the walk sees the same trees on either backend.

use super::export::padded;
use super::region::{Region, TargetBox, GROUP_BOXES};
use super::wire::{header, malformed, HEADER_WORDS, ROOT_SPANS_NOT};
use super::{Incoming, LetShape};
use crate::comm::Comm;
use crate::error::Result;
use crate::gpu::args::{
    LetEdgesArgs, LetFatesArgs, LetPackArgs, LetSentArgs, LetUnpackArgs, RegionBoxesArgs,
    RegionCellsArgs, RegionListArgs, TargetsAminArgs, TreeArrays,
};
use crate::gpu::exchange::DeviceExchange;
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::tree::build_gpu::DeviceTree;
use crate::walk::mac::{Criterion, Mac};

/// Blocks of the per-block reductions (their partial results come down).
const REDUCE_BLOCKS: usize = 256;

/// The device arrays of the LET stages, grown as needed and kept across evaluations.
pub struct LetArrays<R: KernelRunner> {
    /// Per cell and one more: region flags, then their scan.
    slot: R::Array<u32>,
    /// The region's cells; their boxes (6 floats each), then the per-block partial minima of
    /// the targets' previous |a| ([`REDUCE_BLOCKS`]), which come down together.
    list: R::Array<u32>,
    boxes: R::Array<f32>,
    /// The destinations, gone up in one copy: per destination its first group box (after its
    /// bound), then per destination its number of boxes, then per destination its amin (f32
    /// bits), then the boxes (padded, 6 f32 each, as bits: bound, groups, boxes).
    dests: R::Array<u32>,
    /// Per destination and cell: its fate; then per destination and cell (and one more each)
    /// whether it is sent and its particles, then their scans.
    fate: R::Array<u8>,
    sent: R::Array<u32>,
    particles: R::Array<u32>,
    /// Both scans at each destination's first cell.
    edges: R::Array<u32>,
    /// Per destination where its buffer starts (words), then per destination its cells.
    layout: R::Array<u32>,
    /// The packed LETs, and the received ones.
    out: R::Array<f32>,
    received: R::Array<f32>,
    /// Per received LET, what [`LetArrays::unpack`] found malformed ([`BAD_WORDS`] each).
    bad: R::Array<u32>,
    /// The shape of each destination's LET in `out` (the last pack).
    packed: Vec<LetShape>,
}

impl<R: KernelRunner> LetArrays<R> {
    /// Empty arrays on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            slot: r.alloc(1)?,
            list: r.alloc(1)?,
            boxes: r.alloc(1)?,
            dests: r.alloc(1)?,
            fate: r.alloc(1)?,
            sent: r.alloc(1)?,
            particles: r.alloc(1)?,
            edges: r.alloc(1)?,
            layout: r.alloc(1)?,
            out: r.alloc(1)?,
            received: r.alloc(1)?,
            bad: r.alloc(BAD_WORDS)?,
            packed: Vec::new(),
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        4 * (self.slot.len()
            + self.list.len()
            + self.boxes.len()
            + self.dests.len()
            + self.sent.len()
            + self.particles.len()
            + self.edges.len()
            + self.layout.len()
            + self.out.len()
            + self.received.len()
            + self.bad.len())
            + self.fate.len()
    }

    /// The region of the particles of `tree` ([`Region::of_tree`]: the tight boxes of its
    /// cells cut at `n / pieces` particles), with the smallest previous |a| of the `nt` targets
    /// at device address `targets` (x, y, z, |a_old| each).
    pub fn region(
        &mut self,
        s: &Stages<R>,
        tree: &DeviceTree,
        targets: u64,
        nt: usize,
        pieces: usize,
    ) -> Result<Region> {
        let r = s.runner();
        let nc = tree.cells;
        let cut = (tree.particles / pieces.max(1)).max(1) as u32;
        grow(r, &mut self.slot, nc + 1)?;
        // SAFETY: slot holds a flag per cell and one more.
        unsafe {
            s.launch(
                "region_cells",
                blocks(nc + 1),
                &RegionCellsArgs {
                    tree: tree.arrays,
                    ncells: int(nc)?,
                    cut,
                    flag: self.slot.ptr(),
                },
            )?;
        }
        let nb = s.scan_total(self.slot.ptr(), nc)?;
        grow(r, &mut self.list, nb)?;
        grow(r, &mut self.boxes, 6 * nb + REDUCE_BLOCKS)?;
        // SAFETY: list and boxes hold `nb` entries, the number of flagged cells.
        unsafe {
            s.launch(
                "region_list",
                blocks(nc),
                &RegionListArgs {
                    ncells: int(nc)?,
                    slot: self.slot.ptr(),
                    list: self.list.ptr(),
                },
            )?;
            if nb > 0 {
                s.launch(
                    "region_boxes",
                    nb as u32,
                    &RegionBoxesArgs {
                        tree: tree.arrays,
                        list: self.list.ptr(),
                        boxes: self.boxes.ptr(),
                    },
                )?;
            }
            s.launch(
                "targets_amin",
                REDUCE_BLOCKS as u32,
                &TargetsAminArgs {
                    targets,
                    n: int(nt)?,
                    partial: self.boxes.ptr() + 4 * (6 * nb) as u64,
                },
            )?;
        }
        let words: Vec<f32> = s.fetch(&self.boxes, 6 * nb + REDUCE_BLOCKS)?;
        let (words, partial) = words.split_at(6 * nb);
        let boxes: Vec<TargetBox> = words
            .chunks_exact(6)
            .map(|b| ([b[0], b[1], b[2]], [b[3], b[4], b[5]]))
            .collect();
        let amin = partial.iter().copied().fold(f32::INFINITY, f32::min);
        Ok(Region::from_boxes(amin, boxes))
    }

    /// The LET of `tree` (its boxes at the rebuild at device address `built`, whence the key
    /// cells) for every rank's region in `regions` (none for rank `me`), packed on
    /// the device in the wire format, concatenated in rank order; the shape of each. What
    /// [`export`](super::export) gives rank by rank on the host tree, word for word (see
    /// [`LetArrays::packed`]).
    pub fn pack(
        &mut self,
        s: &Stages<R>,
        (tree, built): (&DeviceTree, u64),
        regions: &[Region],
        me: usize,
        crit: &Criterion,
        periodic: bool,
    ) -> Result<Vec<LetShape>> {
        let r = s.runner();
        let (nc, nd) = (tree.cells, regions.len());
        // The destinations' boxes, padded as the host's export pads them: each bound, then its
        // groups' boxes, then its boxes; one upload of every destination's first group box,
        // box count, amin and the boxes, queued (the kernels after it read them; the host
        // does not wait for the copy, nor for the layout's below).
        let (mut start, mut count, mut amin, mut words) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (d, region) in regions.iter().enumerate() {
            let nb = if d == me { 0 } else { region.boxes.len() };
            if nb > 0 {
                words.extend(flat(&padded(&region.bound)).map(f32::to_bits));
                start.push((words.len() / 6) as u32);
                for b in region.groups.iter().chain(&region.boxes) {
                    words.extend(flat(&padded(b)).map(f32::to_bits));
                }
            } else {
                start.push(0);
            }
            count.push(nb as u32);
            amin.push(region.amin.to_bits());
        }
        let dests: Vec<u32> = [start, count, amin, words].concat();
        grow(r, &mut self.dests, dests.len())?;
        r.upload_queued(&dests, &mut self.dests)?;
        let first = self.dests.ptr();
        let dest_word = |k: usize| first + 4 * (k * nd) as u64;
        let entries = nd * (nc + 1);
        grow(r, &mut self.fate, nd * nc)?;
        grow(r, &mut self.sent, entries + 1)?;
        grow(r, &mut self.particles, entries + 1)?;
        let pairs = nd * nc;
        // SAFETY: fate holds a cell per destination, sent and particles a cell and one more per
        // destination and one more; the boxes are those of `start` and `count`.
        unsafe {
            s.launch(
                "let_fates",
                blocks(pairs),
                &LetFatesArgs {
                    tree: tree.arrays,
                    ncells: int(nc)?,
                    ndest: int(nd)?,
                    box_start: dest_word(0),
                    box_count: dest_word(1),
                    group_boxes: GROUP_BOXES as u32,
                    amin: dest_word(2),
                    dest_boxes: dest_word(3),
                    accel_mac: (crit.mac == Mac::Acceleration) as i32,
                    alpha: crit.alpha,
                    grav: crit.g,
                    periodic: periodic as i32,
                    fate: self.fate.ptr(),
                },
            )?;
            s.launch(
                "let_sent",
                blocks(entries + 1),
                &LetSentArgs {
                    tree: tree.arrays,
                    ncells: int(nc)?,
                    ndest: int(nd)?,
                    fate: self.fate.ptr(),
                    sent: self.sent.ptr(),
                    particles: self.particles.ptr(),
                },
            )?;
        }
        s.scan(self.sent.ptr(), entries + 1)?;
        s.scan(self.particles.ptr(), entries + 1)?;
        // Each destination's cells and particles: differences of the scans at its boundaries.
        grow(r, &mut self.edges, 2 * (nd + 1))?;
        // SAFETY: edges holds two entries per destination and one more.
        unsafe {
            s.launch(
                "let_edges",
                blocks(nd + 1),
                &LetEdgesArgs {
                    ncells: int(nc)?,
                    ndest: int(nd)?,
                    sent: self.sent.ptr(),
                    particles: self.particles.ptr(),
                    edges: self.edges.ptr(),
                },
            )?;
        }
        let edges = s.fetch(&self.edges, 2 * (nd + 1))?;
        let edge = |k: usize, d: usize| edges[2 * d + k] as usize;
        let shapes: Vec<LetShape> = (0..nd)
            .map(|d| LetShape {
                cells: edge(0, d + 1) - edge(0, d),
                particles: edge(1, d + 1) - edge(1, d),
            })
            .collect();
        let mut at = Vec::with_capacity(2 * nd);
        let mut total = 0usize;
        for shape in &shapes {
            at.push(
                u32::try_from(total)
                    .map_err(|_| crate::Error::device("the LETs of one rank exceed 2^32 words"))?,
            );
            total += shape.words();
        }
        at.extend(shapes.iter().map(|l| l.cells as u32));
        grow(r, &mut self.layout, 2 * nd)?;
        r.upload_queued(&at, &mut self.layout)?;
        grow(r, &mut self.out, total)?;
        // SAFETY: out holds every destination's buffer at its `at`, sized from the scans.
        unsafe {
            s.launch(
                "let_pack",
                blocks(entries),
                &LetPackArgs {
                    tree: tree.arrays,
                    built,
                    ncells: int(nc)?,
                    ndest: int(nd)?,
                    fate: self.fate.ptr(),
                    sent: self.sent.ptr(),
                    particles: self.particles.ptr(),
                    at: self.layout.ptr(),
                    ncell: self.layout.ptr() + 4 * nd as u64,
                    out: self.out.ptr(),
                },
            )?;
        }
        self.packed = shapes.clone();
        Ok(shapes)
    }

    /// The LETs of the last [`LetArrays::pack`], brought to the host: every destination's
    /// words, concatenated in rank order, and the words of each.
    pub fn packed(&self, s: &Stages<R>) -> Result<(Vec<f32>, Vec<usize>)> {
        let counts: Vec<usize> = self.packed.iter().map(|l| l.words()).collect();
        Ok((s.fetch(&self.out, counts.iter().sum())?, counts))
    }

    /// Sends the LETs of the last [`LetArrays::pack`] to their ranks and receives those of
    /// `incoming` (the shape of each rank's LET for this one) into the device's receive
    /// buffer, through `link`, device to device: enqueued after the work so far, and done
    /// once [`DeviceExchange::finish`] returns. Collective (every rank of the link and of
    /// `comm`).
    pub fn send(
        &mut self,
        s: &Stages<R>,
        link: &mut DeviceExchange,
        incoming: &[LetShape],
        comm: &dyn Comm,
    ) -> Result<()> {
        let bytes = |shapes: &[LetShape]| -> Vec<(usize, usize)> {
            let mut at = 0usize;
            shapes
                .iter()
                .map(|l| {
                    let n = 4 * l.words();
                    at += n;
                    (at - n, n)
                })
                .collect()
        };
        let recv = bytes(incoming);
        let words: usize = incoming.iter().map(|l| l.words()).sum();
        grow(s.runner(), &mut self.received, words)?;
        // SAFETY: `out` holds the packed LETs and `received` the incoming words; neither is
        // touched again before `finish` (the next pack and unpack come after it).
        unsafe {
            link.alltoallv(
                comm,
                (self.out.ptr(), &bytes(&self.packed)),
                (self.received.ptr(), &recv),
            )
        }
    }

    /// Unpacks the LETs received from every rank (`incoming`: on the host, uploaded first; or
    /// already in the device's receive buffer, by [`LetArrays::send`]) into a forest on the
    /// device, where `place` puts its cells and particles, checking each LET as
    /// [`unpack_forest`](super::wire::unpack_forest) does (the same error for the same
    /// defect). Returns where the forest is, its cells and its particles.
    pub fn unpack(
        &mut self,
        s: &Stages<R>,
        incoming: Incoming,
        place: impl FnOnce(usize, usize) -> Result<ForestPlace>,
    ) -> Result<(ForestPlace, usize, usize)> {
        let r = s.runner();
        // Each LET: (source, first word, cells, particles).
        let mut pieces = Vec::new();
        let mut at = 0usize;
        match incoming {
            Incoming::Host { data, counts } => {
                for (src, &len) in counts.iter().enumerate() {
                    if len > 0 {
                        let (nc, np) = header(src, &data[at..at + len])?;
                        pieces.push((src, at, nc, np));
                    }
                    at += len;
                }
                grow(r, &mut self.received, data.len())?;
                r.upload(data, &mut self.received)?;
            }
            Incoming::Device(shapes) => {
                for (src, l) in shapes.iter().enumerate() {
                    if l.cells > 0 {
                        pieces.push((src, at, l.cells, l.particles));
                    }
                    at += l.words();
                }
            }
        }
        let cells: usize = pieces.iter().map(|p| p.2).sum();
        let particles: usize = pieces.iter().map(|p| p.3).sum();
        let forest = place(cells, particles)?;
        // Per LET: its first malformed cell, first particle that is not finite, and whether
        // its root spans its cells; all checked after one copy.
        grow(r, &mut self.bad, BAD_WORDS * pieces.len())?;
        r.fill(&mut self.bad, BAD_WORDS * pieces.len(), u32::MAX)?;
        let (mut cell0, mut part0) = (0usize, 0usize);
        for (k, &(_, at, nc, np)) in pieces.iter().enumerate() {
            // SAFETY: the forest holds `cells` cells and `particles` particles, of which this
            // LET's go at cell0 and part0; its words lie in `received` from `at` (checked
            // against its header or its shape); `bad` holds BAD_WORDS words per LET.
            unsafe {
                s.launch(
                    "let_unpack",
                    blocks(nc + np),
                    &LetUnpackArgs {
                        data: self.received.ptr(),
                        cells_at: (at + HEADER_WORDS) as u32,
                        ncells: int(nc)?,
                        nparts: int(np)?,
                        cell0: int(cell0)?,
                        part0: int(part0)?,
                        tree: forest.arrays,
                        keys: forest.keys.unwrap_or(0),
                        bad: self.bad.ptr() + (4 * BAD_WORDS * k) as u64,
                    },
                )?;
            }
            cell0 += nc;
            part0 += np;
        }
        let bad = s.fetch(&self.bad, BAD_WORDS * pieces.len())?;
        for (&(src, ..), b) in pieces.iter().zip(bad.chunks_exact(BAD_WORDS)) {
            if b[0] != u32::MAX {
                return Err(malformed(src, &format!("cell {} is malformed", b[0])));
            }
            if b[2] != u32::MAX {
                return Err(malformed(src, ROOT_SPANS_NOT));
            }
            if b[1] != u32::MAX {
                return Err(malformed(src, "a particle is not finite"));
            }
        }
        Ok((forest, cells, particles))
    }
}

/// Where [`LetArrays::unpack`] puts a forest.
#[derive(Clone, Copy, Debug)]
pub struct ForestPlace {
    /// The tree arrays its cells and particles go to, from the first.
    pub arrays: TreeArrays,
    /// Device address of room for its cells' key cells (u64 each); `None`: not kept.
    pub keys: Option<u64>,
}

/// Words of `bad` per received LET: its first malformed cell, its first particle that is not
/// finite, and 0 where its root does not span its cells (`u32::MAX` each where all is well).
const BAD_WORDS: usize = 3;

/// A box as 6 floats: centre, then half-extents.
fn flat((c, h): &TargetBox) -> [f32; 6] {
    [c[0], c[1], c[2], h[0], h[1], h[2]]
}

#[cfg(all(test, hinoki_emulator))]
mod tests;
